"""Wire shapes built from states: one builder per shape (WIRE.md "Turn",
"Event", 1.1 working sets and "Outcomes").

The events (``core/events.py``) and the reads (``reads/``) show the same
things — an obligation, an opportunity, an outcome, a delivery, a judgment, a
contract version — and both build them here, so an item in an event is the
item a read returns. Pure: states and bytes in, JSON-ready dicts out (content
stays opaque bytes, L6); what a caller may see is decided by whoever calls.
"""

from __future__ import annotations

from typing import Any

import msgspec

from .assignment import AssignmentState
from .timestamps import rfc3339
from .engagement import EngagementState
from .kinds import of_state
from .obligations import Obligation
from .task import ContractState, TaskState

__all__ = [
    "obligation_item", "held_obligations", "opportunity_item", "outcome_item", "delivery", "judgment", "contract_view",
]


def obligation_item(ob: Obligation) -> dict[str, Any]:
    """An obligation as the turn, its events and the working sets show it; its
    ``next`` is the op that discharges it, named like the obligation (R8-2)."""
    item: dict[str, Any] = {
        "obligation_id": ob.obligation_id,
        "obligation": ob.obligation,
        "ref": ob.ref,
        "created_at": rfc3339(ob.created_at),
    }
    if ob.due is not None:
        item["due"] = rfc3339(ob.due)
    item["next"] = ob.obligation
    return item


def held_obligations(obj: str, state: Any, holder: str, now: int) -> list[dict[str, Any]]:
    """The items of the obligations ``state`` implies that ``holder`` holds as
    of ``now``: the one derivation (:func:`of_state`), less those whose
    deadline passed (L4-3: its expiry fact is on its way)."""
    return [
        obligation_item(ob)
        for ob in of_state(obj, state)
        if ob.holder == holder and not (ob.due is not None and ob.due <= now)
    ]


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


def outcome_item(state: Any, by: str | None) -> dict[str, Any]:
    """An outcome as the ``outcome`` event and the ``outcomes`` read show it
    (WIRE.md 1.1 "Outcomes"): ``by`` absent when a deadline ended the work;
    ``content.reason`` only for a rejection (R6.4-26, R7.3-17: the taker reads it)."""
    if isinstance(state, AssignmentState):
        ref = {"thread": state.thread, "assignment": state.assignment}
    else:
        assert isinstance(state, EngagementState)
        ref = {"task": state.task, "engagement": state.engagement}
    assert state.ended_at is not None
    item: dict[str, Any] = {"ref": ref, "state": state.state, "at": rfc3339(state.ended_at)}
    if by is not None:
        item["by"] = by
    if state.state == "rejected" and state.reason is not None:
        item["content"] = msgspec.Raw(state.reason)
    return item


def delivery(at: int, memory: str, version: int, content: bytes | None) -> dict[str, Any]:
    """A delivery of an assignment or an engagement: when, its pin, and the
    pinned content when the reader may read it (``None``: not shown)."""
    out: dict[str, Any] = {"at": rfc3339(at), "pin": {"memory": memory, "version": version}}
    if content is not None:
        out["content"] = msgspec.Raw(content)
    return out


def judgment(state: str, at: int, reason: bytes | None) -> dict[str, Any]:
    """A judgment of an assignment or an engagement that ended in ``state``."""
    out: dict[str, Any] = {"verdict": "adopt" if state == "adopted" else "reject", "at": rfc3339(at)}
    if reason is not None:
        out["content"] = msgspec.Raw(reason)
    return out


def contract_view(c: ContractState) -> dict[str, Any]:
    """One contract version as ``task.get`` shows it (R9-13, R9-14)."""
    k = c.contract
    return {
        "version": c.version,
        "created_at": rfc3339(c.created_at),
        "inputs": [{"memory": m, "version": v} for m, v in k.inputs],
        "deliver_within_s": k.deliver_within_s,
        "judge_within_s": k.judge_within_s,
        "on_no_judgment": k.on_no_judgment,
        "adoption_limit": k.adoption_limit,
        "judge": k.judge,
        "eligibility": {"agents": k.eligibility} if k.eligibility is not None else None,
        "readers": k.readers,
        "content": msgspec.Raw(k.content),
    }
