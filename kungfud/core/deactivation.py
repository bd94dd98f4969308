"""§4 deactivation: an admin sets an account's status (R4-3), and deactivating
ends every membership of the agent with the effects of §6.2 and closes a Thread
left open with no governor (§6.5), in the same atomic action (R4-6…R4-8).
Deactivating an agent or resetting its key also clears its webhook, in the
same action (WIRE.md 1.2, D210).

It sits above :mod:`kungfud.core.agent` and :mod:`kungfud.core.thread`, so
neither imports the other. The memberships come from the ``memberships`` query,
guarded by the version of the agent's ``ag_….threads`` object (D90).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import DecisionRefused, Rejection, rejects
from . import agent
from .agent import AgentState, ResetKey, SetStatus, require_admin
from .decision import fold_into
from .facts import AgentStatusSet, Decision, Fact, threads_obj
from .thread import membership_end_facts
from .webhook import cleared_by

if TYPE_CHECKING:
    from .context import Ctx

__all__ = ["decide_set_status", "decide_reset_key"]


@rejects
def decide_set_status(target: AgentState | None, cmd: SetStatus, ctx: "Ctx") -> Decision | Rejection:
    if (r := require_admin(ctx, "set an agent's account status")) is not None:
        raise DecisionRefused(r)
    assert ctx.caller is not None
    if target is None:
        raise DecisionRefused(Rejection.not_found("agent", cmd.agent))
    if target.status == cmd.status:
        raise DecisionRefused(Rejection.conflict(f"agent {cmd.agent} is already {cmd.status}"))
    if target.agent == ctx.caller.agent:
        # Strictest reading (docs/decisions.md D1): an admin cannot lock itself out.
        raise DecisionRefused(Rejection.forbidden("an admin agent may not deactivate itself"))
    fact = AgentStatusSet(at=ctx.now, by=ctx.caller.agent, agent=cmd.agent, status=cmd.status)
    facts: list[Fact] = [fact]
    ended: list[str] = []
    if cmd.status == "deactivated":
        # R4-6, R4-8: in the same atomic action, every membership ends with the
        # effects of §6.2, and a Thread left open with no governor closes (§6.5).
        # The count object first: its version guards the memberships query (L5).
        ctx.get(threads_obj(cmd.agent))
        for thread in ctx.memberships(cmd.agent):
            more, ids = membership_end_facts(ctx.get(thread), cmd.agent, "deactivated", ctx)
            facts += more
            ended += ids
        facts += cleared_by(cmd.agent, "deactivated", ctx)
    states = fold_into({cmd.agent: agent.apply(target, fact)}, facts[1:], ctx.get)
    # `seq` is filled by the store with the seq of the action's last fact (D9).
    return Decision(facts, {"agent": cmd.agent, "status": cmd.status, "seq": None, "ended": ended}, states)


@rejects
def decide_reset_key(target: AgentState | None, cmd: ResetKey, ctx: "Ctx") -> Decision | Rejection:
    """``admin.agent.reset_key`` (:func:`agent.decide_reset_key`), and the
    agent's webhook cleared in the same action: whoever held the old key may
    have set it (WIRE.md 1.2)."""
    d = agent.decide_reset_key(target, cmd, ctx)
    if isinstance(d, Rejection):
        raise DecisionRefused(d)
    more = cleared_by(cmd.agent, "key_reset", ctx)
    if not more:
        return d
    return Decision(d.facts + more, d.result, fold_into(dict(d.states), more, ctx.get))
