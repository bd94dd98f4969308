"""§4 Agent: an authenticated identity, active or deactivated.

Account state is set by the implementation (R4-3): registration (open by default,
see config), ``admin.agent.create`` and ``admin.agent.set_status`` by an admin
agent, and a new key by ``agent.rotate_key`` (the agent itself) or
``admin.agent.reset_key`` (an admin; WIRE.md "Operating a deployment"). Only an active agent
may act (R4-1); reads do not require activity (R4-2). Setting an account's
status, with the effects of deactivation on Threads (R4-4…R4-8), is decided in
:mod:`kungfud.core.deactivation`, above this module and the Thread's.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Literal

import msgspec

from ..errors import DecisionRefused, Hint, Rejection, rejects
from .facts import AgentKeySet, AgentRegistered, AgentStatusSet, Decision, Fact
from . import keys
from .keys import KEY_REVOKED, ScopedKey, ScopedKeyCreated, ScopedKeyRevoked, held_in, refusal

if TYPE_CHECKING:
    from .context import Ctx

__all__ = [
    "AgentState",
    "Register",
    "SetStatus",
    "CreateAgent",
    "RotateKey",
    "ResetKey",
    "apply",
    "decide_register",
    "decide_create",
    "decide_rotate_key",
    "decide_reset_key",
    "require_active",
    "require_admin",
    "key_hash",
    "KEY_REVOKED",
    "key_revoked",
]

Status = Literal["active", "deactivated"]


# omit_defaults: the snapshot of an agent without scoped keys is encoded as
# before they existed (kungfud check compares stored snapshots byte for byte).
class AgentState(msgspec.Struct, frozen=True, omit_defaults=True):
    agent: str
    status: Status
    admin: bool
    content: bytes  # {"name": …}
    created_at: int
    key_hash: bytes = b""  # sha256 of its key: the authentication index derives from it
    # Its scoped keys (WIRE.md 1.3; core/keys.py), oldest first; a new main key
    # or a deactivation drops them all.
    scoped: tuple[ScopedKey, ...] = ()

    @property
    def active(self) -> bool:
        return self.status == "active"


class Register(msgspec.Struct, frozen=True):
    content: bytes  # {"name": …}, validated at the wire boundary
    admin: bool = False  # only the daemon's own bootstrap sets this


class SetStatus(msgspec.Struct, frozen=True):
    agent: str
    status: Status


class CreateAgent(msgspec.Struct, frozen=True):
    """``admin.agent.create``: an admin makes a (non-admin) agent."""

    content: bytes  # {"name": …}, validated at the wire boundary


class RotateKey(msgspec.Struct, frozen=True):
    """``agent.rotate_key``: the caller's own new key."""


class ResetKey(msgspec.Struct, frozen=True):
    """``admin.agent.reset_key``: an admin gives ``agent`` a new key."""

    agent: str


def key_hash(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


def key_revoked(state: AgentState | None, authenticated_with: bytes | None, now: int = 0, op: str | None = None) -> Rejection | None:
    """:data:`KEY_REVOKED` when a connection that authenticated with the key
    of hash ``authenticated_with`` asks as the agent whose state is ``state``
    and that key is no longer the agent's (rotated or reset; a scoped key
    revoked or expired at ``now``); ``forbidden`` when it is a scoped key whose
    scope does not allow action ``op``. None when nothing was authenticated
    (no hash), or when the agent does not exist (the action or read refuses
    that itself)."""
    if authenticated_with is None or state is None or state.key_hash == authenticated_with:
        return None
    return refusal(state.agent, held_in(state, authenticated_with), now, op, "A")


def require_active(ctx: "Ctx") -> Rejection | None:
    """R4-1: only an active agent may act."""
    if ctx.caller is None:
        return Rejection("unauthenticated", "this action needs an authenticated agent", "revise")
    if not ctx.caller.active:
        return Rejection.forbidden(f"agent {ctx.caller.agent} is deactivated and may not act")
    return None


@rejects
def decide_register(cmd: Register, ctx: "Ctx", *, bootstrap: bool = False) -> Decision | Rejection:
    if not bootstrap and not ctx.limits.open_registration:
        raise DecisionRefused(Rejection.forbidden(
            "open registration is disabled on this daemon; ask its operator for an agent "
            "(an admin creates one with admin.agent.create)"
        ))
    return _new_agent(cmd.content, ctx, by=None, admin=cmd.admin and bootstrap)


def _new_agent(content: bytes, ctx: "Ctx", *, by: str | None, admin: bool) -> Decision | Rejection:
    """One definition of making an agent: registration, bootstrap and
    ``admin.agent.create``. The key is in the result once; only its hash is kept."""
    if len(content) > ctx.limits.max_content_bytes:
        return Rejection(
            "too_large", f"content is {len(content)} bytes encoded; the limit is {ctx.limits.max_content_bytes}", "revise"
        )
    agent = ctx.new_id("ag_")
    key = ctx.new_secret()
    fact = AgentRegistered(at=ctx.now, by=by, agent=agent, content=content, key_hash=key_hash(key), admin=admin)
    state = apply(None, fact)
    return Decision([fact], {"agent": agent, "key": key}, {agent: state})


def require_admin(ctx: "Ctx", what: str) -> Rejection | None:
    """An active admin caller, checked before anything about a target is read
    (D5): a non-admin learns nothing about which agents exist."""
    if (r := require_active(ctx)) is not None:
        return r
    assert ctx.caller is not None
    if not ctx.caller.admin:
        return Rejection.forbidden(f"only an admin agent may {what}")
    return None


@rejects
def decide_create(cmd: CreateAgent, ctx: "Ctx") -> Decision | Rejection:
    """``admin.agent.create``: works whether or not open registration is on."""
    if (r := require_admin(ctx, "create agents")) is not None:
        raise DecisionRefused(r)
    assert ctx.caller is not None
    return _new_agent(cmd.content, ctx, by=ctx.caller.agent, admin=False)


def _new_key(target: AgentState, ctx: "Ctx") -> Decision:
    assert ctx.caller is not None
    key = ctx.new_secret()
    fact = AgentKeySet(at=ctx.now, by=ctx.caller.agent, agent=target.agent, key_hash=key_hash(key))
    return Decision([fact], {"agent": target.agent, "key": key}, {target.agent: apply(target, fact)})


@rejects
def decide_rotate_key(cmd: RotateKey, ctx: "Ctx") -> Decision | Rejection:
    """``agent.rotate_key``: the caller's new key; the old one stops
    authenticating with this fact (the server closes its connections)."""
    if (r := require_active(ctx)) is not None:
        raise DecisionRefused(r)
    assert ctx.caller is not None
    current = ctx.get(ctx.caller.agent)
    assert current is not None, "an authenticated caller's account exists"
    return _new_key(current, ctx)


@rejects
def decide_reset_key(target: AgentState | None, cmd: ResetKey, ctx: "Ctx") -> Decision | Rejection:
    """``admin.agent.reset_key``: as rotate_key, for any agent, by an admin.
    A deactivated target is reset too (its old key could still read, R4-2) and
    stays deactivated (docs/decisions.md)."""
    if (r := require_admin(ctx, "reset an agent's key")) is not None:
        raise DecisionRefused(r)
    if target is None:
        raise DecisionRefused(Rejection.not_found("agent", cmd.agent))
    assert ctx.caller is not None
    if target.agent == ctx.caller.agent:
        # D236: nobody could reset it back, and the admin.key file would go stale
        # without a word; rotating is the admin's own way to a new key.
        raise DecisionRefused(Rejection(
            "forbidden",
            "an admin may not reset its own key: rotate it with agent.rotate_key, "
            "then replace the content of admin.key with the new key",
            "revise",
            Hint("agent.rotate_key", {}),
        ))
    return _new_key(target, ctx)


def apply(state: AgentState | None, fact: Fact) -> AgentState:
    if isinstance(fact, AgentRegistered):
        assert state is None
        return AgentState(fact.agent, "active", fact.admin, fact.content, fact.at, fact.key_hash)
    if isinstance(fact, AgentStatusSet):
        assert state is not None
        if fact.status == "deactivated":  # WIRE.md 1.3: deactivation revokes every scoped key
            return msgspec.structs.replace(state, status=fact.status, scoped=())
        return msgspec.structs.replace(state, status=fact.status)
    if isinstance(fact, AgentKeySet):
        assert state is not None  # a new main key revokes every scoped key (WIRE.md 1.3)
        return msgspec.structs.replace(state, key_hash=fact.key_hash, scoped=())
    if isinstance(fact, (ScopedKeyCreated, ScopedKeyRevoked)):
        assert state is not None
        return keys.apply(state, fact)
    raise TypeError(f"agent cannot apply {type(fact).__name__}")
