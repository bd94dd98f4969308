"""§4 Agent: an authenticated identity, active or deactivated.

Account state is set by the implementation (R4-3): registration (open by default,
see config) and ``admin.agent.set_status`` by an admin agent. Only an active agent
may act (R4-1); reads do not require activity (R4-2). Deactivation erases no fact
(R4-4); its effects on Threads and Tasks (R4-6…R4-8) join this module's decision
when those atoms exist.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Literal

import msgspec

from ..errors import Rejection
from .decision import fold_into
from .facts import AgentRegistered, AgentStatusSet, Decision, Fact

if TYPE_CHECKING:
    from .context import Ctx

__all__ = [
    "AgentState",
    "Register",
    "SetStatus",
    "apply",
    "decide_register",
    "decide_set_status",
    "require_active",
    "key_hash",
]

Status = Literal["active", "deactivated"]


class AgentState(msgspec.Struct, frozen=True):
    agent: str
    status: Status
    admin: bool
    content: bytes  # {"name": …}
    created_at: int
    key_hash: bytes = b""  # sha256 of its key: the authentication index derives from it

    @property
    def active(self) -> bool:
        return self.status == "active"


class Register(msgspec.Struct, frozen=True):
    content: bytes  # {"name": …}, validated at the wire boundary
    admin: bool = False  # only the daemon's own bootstrap sets this


class SetStatus(msgspec.Struct, frozen=True):
    agent: str
    status: Status


def key_hash(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


def require_active(ctx: "Ctx") -> Rejection | None:
    """R4-1: only an active agent may act."""
    if ctx.caller is None:
        return Rejection("unauthenticated", "this action needs an authenticated agent", "revise")
    if not ctx.caller.active:
        return Rejection.forbidden(f"agent {ctx.caller.agent} is deactivated and may not act (§4)")
    return None


def decide_register(cmd: Register, ctx: "Ctx", *, bootstrap: bool = False) -> Decision | Rejection:
    if not bootstrap and not ctx.limits.open_registration:
        return Rejection.forbidden("open registration is disabled on this daemon; ask its operator for an agent")
    if len(cmd.content) > ctx.limits.max_content_bytes:
        return Rejection(
            "too_large", f"content is {len(cmd.content)} bytes encoded; the limit is {ctx.limits.max_content_bytes}", "revise"
        )
    agent = ctx.new_id("ag_")
    key = ctx.new_secret()
    fact = AgentRegistered(
        at=ctx.now, by=None, agent=agent, content=cmd.content, key_hash=key_hash(key), admin=cmd.admin and bootstrap
    )
    state = apply(None, fact)
    return Decision([fact], {"agent": agent, "key": key}, {agent: state})


def decide_set_status(target: AgentState | None, cmd: SetStatus, ctx: "Ctx") -> Decision | Rejection:
    if (r := require_active(ctx)) is not None:
        return r
    assert ctx.caller is not None
    if not ctx.caller.admin:
        return Rejection.forbidden("only an admin agent may set an agent's account status")
    if target is None:
        return Rejection.not_found("agent", cmd.agent)
    if target.status == cmd.status:
        return Rejection.conflict(f"agent {cmd.agent} is already {cmd.status}")
    if target.agent == ctx.caller.agent:
        # Strictest reading (docs/decisions.md D1): an admin cannot lock itself out.
        return Rejection.forbidden("an admin agent may not deactivate itself")
    fact = AgentStatusSet(at=ctx.now, by=ctx.caller.agent, agent=cmd.agent, status=cmd.status)
    facts: list[Fact] = [fact]
    ended: list[str] = []
    if cmd.status == "deactivated":
        # R4-6, R4-8: in the same atomic action, every membership ends with the
        # effects of §6.2, and a Thread left open with no governor closes (§6.5).
        from .facts import threads_obj
        from .thread import membership_end_facts

        memberships = ctx.get(threads_obj(cmd.agent))
        for thread in sorted(memberships.threads) if memberships is not None else []:
            more, ids = membership_end_facts(ctx.get(thread), cmd.agent, "deactivated", ctx)
            facts += more
            ended += ids
    states = fold_into({cmd.agent: apply(target, fact)}, facts[1:], ctx.get)
    # `seq` is filled by the store with the seq of the action's last fact (D9).
    return Decision(facts, {"agent": cmd.agent, "status": cmd.status, "seq": None, "ended": ended}, states)


def apply(state: AgentState | None, fact: Fact) -> AgentState:
    if isinstance(fact, AgentRegistered):
        assert state is None
        return AgentState(fact.agent, "active", fact.admin, fact.content, fact.at, fact.key_hash)
    if isinstance(fact, AgentStatusSet):
        assert state is not None
        return msgspec.structs.replace(state, status=fact.status)
    raise TypeError(f"agent cannot apply {type(fact).__name__}")
