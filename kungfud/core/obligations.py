"""§8 obligation catalogue: respond, deliver, judge (R8-2, closed).

Obligations are never written directly (R8-1): they are derived from object
states — a pending response of an entry, a taken assignment, a delivered one
whose creator's right to judge stands — and indexed per holder in the same
transaction as the facts that change those states. Their ids are deterministic,
so a rebuild from the facts yields the same ids.

Which kind of object implies which obligations is a column of the table of
kinds: :func:`kungfud.core.kinds.of_state` reads any object's.
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal

import msgspec

__all__ = ["Obligation", "ob_id", "respond", "of_assignment", "of_engagement"]

Kind = Literal["respond", "deliver", "judge"]


def ob_id(kind: Kind, obj: str, holder: str) -> str:
    """Deterministic id of one obligation: its kind, its object, its holder."""
    return "ob_" + hashlib.sha256(f"{kind}|{obj}|{holder}".encode()).hexdigest()[:26]


class Obligation(msgspec.Struct, frozen=True):
    obligation_id: str
    obligation: Kind
    holder: str
    ref: dict[str, Any]  # exactly the ids needed to act (WIRE.md "Turn")
    created_at: int  # when it arose (ms)
    due: int | None = None


def respond(obj: str, entry: Any) -> list[Obligation]:
    """An entry's pending responses (R8-2 respond): one per responder."""
    return [
        Obligation(ob_id("respond", obj, agent), "respond", agent, {"thread": entry.thread, "entry": entry.entry}, entry.at)
        for agent, r in entry.responses.items()
        if r.state == "pending"
    ]


def of_assignment(obj: str, state: Any) -> list[Obligation]:
    """A taken assignment's deliver duty (its taker); a delivered one's judge
    duty (its creator, while the right to judge stands, R6.2-13)."""
    ref = {"thread": state.thread, "assignment": state.assignment}
    if state.state == "taken" and state.taker is not None and state.taken_at is not None:
        return [Obligation(ob_id("deliver", obj, state.taker), "deliver", state.taker, ref, state.taken_at, state.deliver_by)]
    if state.state == "delivered" and not state.forfeited and state.delivered_at is not None:
        return [Obligation(ob_id("judge", obj, state.creator), "judge", state.creator, ref, state.delivered_at, state.judge_by)]
    return []


def of_engagement(obj: str, state: Any) -> list[Obligation]:
    """A taken engagement's deliver duty; a delivered one's judge duty."""
    ref = {"task": state.task, "engagement": state.engagement}
    if state.state == "taken":
        return [Obligation(ob_id("deliver", obj, state.agent), "deliver", state.agent, ref, state.taken_at, state.deliver_by)]
    if state.state == "delivered" and state.delivered_at is not None:
        # B23: the judge duty of the author or designated judge is in its turn.
        return [Obligation(ob_id("judge", obj, state.judge), "judge", state.judge, ref, state.delivered_at, state.judge_by)]
    return []
