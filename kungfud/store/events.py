"""The durable per-agent event feed (WIRE.md "Event", §8 R8-20).

Events are derived, fact by fact, from how each fact changed the obligations and
opportunities its objects imply: ``turn`` events list obligations added and ended
(with why), ``opportunity`` events announce an untaken assignment addressed to an
agent or a restricted Task naming it. Each event carries the seq of the fact that
produced it, is stored under (agent, seq) in the same transaction as the fact,
and can be rebuilt from the log (``kungfud check``). Notifications only speed
recovery up; the turn alone is always sufficient (R8-21).
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..core.assignment import AssignmentState
from ..core.clock import rfc3339
from ..core.facts import (
    AssignmentDelivered,
    AssignmentDropped,
    AssignmentExpired,
    AssignmentJudged,
    AssignmentTaken,
    AssignmentVoided,
    EngagementDelivered,
    EngagementDropped,
    EngagementExpired,
    EngagementJudged,
    EntryPosted,
    MembershipEnded,
    RequestRetracted,
    ResponseHandled,
    RoleSet,
    ThreadClosed,
)
from ..core.obligations import NEXT, Obligation, of_state
from ..core.task import TaskState
from .layout import u64

__all__ = ["Feed", "why_ended", "turn_item", "event_key", "opportunity_item"]

_json = msgspec.json.Encoder()


def event_key(agent: str, seq: int) -> bytes:
    return agent.encode() + b"\x00" + u64(seq)


def why_ended(fact: Any) -> str:
    """The reason an obligation ended, named after the fact that ended it."""
    if isinstance(fact, EntryPosted):
        return "replied"
    if isinstance(fact, ResponseHandled):
        return "handled"
    if isinstance(fact, RequestRetracted):
        return "retracted"
    if isinstance(fact, MembershipEnded):
        return fact.why
    if isinstance(fact, RoleSet):
        return "demoted"
    if isinstance(fact, ThreadClosed):
        return "closed"
    if isinstance(fact, AssignmentTaken):
        return "taken"
    if isinstance(fact, (AssignmentDelivered, EngagementDelivered)):
        return "delivered"
    if isinstance(fact, (AssignmentJudged, EngagementJudged)):
        return "judged"
    if isinstance(fact, (AssignmentDropped, EngagementDropped)):
        return "dropped"
    if isinstance(fact, AssignmentVoided):
        return "voided"
    if isinstance(fact, (AssignmentExpired, EngagementExpired)):
        return "expired"
    return type(fact).__name__


def turn_item(ob: Obligation) -> dict[str, Any]:
    item: dict[str, Any] = {
        "obligation_id": ob.obligation_id,
        "obligation": ob.obligation,
        "ref": ob.ref,
        "created_at": rfc3339(ob.created_at),
    }
    if ob.due is not None:
        item["due"] = rfc3339(ob.due)
    item["next"] = NEXT[ob.obligation]
    return item


def opportunity_item(state: Any) -> dict[str, Any]:
    """An opportunity as the ``opportunities`` read and the event show it."""
    if isinstance(state, AssignmentState):
        return {
            "opportunity": "assignment",
            "ref": {"thread": state.thread, "assignment": state.assignment},
            "creator": state.creator,
            "created_at": rfc3339(state.created_at),
            "deliver_within_s": state.deliver_within_s,
            "judge_within_s": state.judge_within_s,
        }
    assert isinstance(state, TaskState)
    return {
        "opportunity": "task",
        "ref": {"task": state.task},
        "author": state.author,
        "created_at": rfc3339(state.created_at),
        "accepting": state.accepting,
        "contract_version": state.latest,
    }


def _opportunities(state: Any) -> dict[tuple[str, str], dict[str, Any]]:
    if isinstance(state, AssignmentState) and state.state == "open":
        return {(state.to, state.assignment): opportunity_item(state)}
    if isinstance(state, TaskState) and state.audience is not None:
        item = opportunity_item(state)
        return {(a, state.task): item for a in state.audience}
    return {}


class Feed:
    """Collects the events of one fact, then renders them per agent."""

    __slots__ = ("_turn", "_opps")

    def __init__(self) -> None:
        self._turn: dict[str, dict[str, list]] = {}
        self._opps: dict[str, list] = {}

    def observe(self, obj: str, before: Any, after: Any, fact: Any) -> None:
        ob_before = {o.obligation_id: o for o in of_state(obj, before)} if before is not None else {}
        ob_after = {o.obligation_id: o for o in of_state(obj, after)}
        for oid, ob in ob_after.items():
            if oid not in ob_before:
                self._turn.setdefault(ob.holder, {"added": [], "ended": []})["added"].append(turn_item(ob))
        for oid, ob in ob_before.items():
            if oid not in ob_after:
                self._turn.setdefault(ob.holder, {"added": [], "ended": []})["ended"].append(
                    {"obligation_id": oid, "why": why_ended(fact)}
                )
        opp_before = _opportunities(before) if before is not None else {}
        for key, item in _opportunities(after).items():
            if key not in opp_before:
                self._opps.setdefault(key[0], []).append(item)

    def rendered(self) -> list[tuple[str, bytes]]:
        """(agent, JSON of the event without seq), turn events first."""
        out: list[tuple[str, bytes]] = []
        for agent, data in self._turn.items():
            out.append((agent, _json.encode({"event": "turn", "data": data})))
        for agent, items in self._opps.items():
            for item in items:
                out.append((agent, _json.encode({"event": "opportunity", "data": item})))
        return out
