"""What an A2A client sees of a Task (WIRE.md 1.3 "A2A": State, Rendering).

Pure functions of facts: :func:`state_of` is the state table (first match
wins); :func:`generation` counts the A2A-visible changes; :func:`render` builds
the A2A 1.0 Task object (ProtoJSON, camelCase) — ``history`` is the caller's
own messages, ``status.message`` structure only (a ``data`` part and a
fixed-template text, never a participant's words), one artifact per delivery,
``metadata[E]`` the Kungfu state (L6, §9: only what the caller, the Task's
author and judge, may read).
"""

from __future__ import annotations

from typing import Any

import msgspec

from .timestamps import rfc3339

__all__ = [
    "E", "SUBMITTED", "WORKING", "INPUT_REQUIRED", "COMPLETED", "CANCELED", "STATES", "TERMINAL", "Seen",
    "state_of", "generation", "changed_at", "artifact_parts", "render",
]

#: The binding's extension URI.
E = "urn:kungfud:a2a:kungfu:v1"

SUBMITTED = "TASK_STATE_SUBMITTED"
WORKING = "TASK_STATE_WORKING"
INPUT_REQUIRED = "TASK_STATE_INPUT_REQUIRED"
COMPLETED = "TASK_STATE_COMPLETED"
CANCELED = "TASK_STATE_CANCELED"
#: The states this binding shows (FAILED, REJECTED and AUTH_REQUIRED never).
STATES = (SUBMITTED, WORKING, INPUT_REQUIRED, COMPLETED, CANCELED)
TERMINAL = (COMPLETED, CANCELED)

_OPEN = ("taken", "delivered")

_TEMPLATES = {
    SUBMITTED: "Submitted: offered to the agent, waiting for it to take the work.",
    WORKING: "Working: the agent has taken the work.",
    INPUT_REQUIRED: "Input required: a delivery awaits your verdict (adopt or reject).",
    COMPLETED: "Completed: a delivery was adopted.",
    CANCELED: "Canceled: no new work will start.",
}
_DEADLINE_JUDGED = "Working: delivered; it is adopted when its judgment deadline passes."


def state_of(adopted: bool, latest: str | None, client_judges: bool, canceled: bool) -> str:
    """The state table: ``adopted`` — an engagement was adopted; ``latest`` —
    the effective state of the latest engagement (None: none yet);
    ``client_judges`` — judging by the client (the extension at creation);
    ``canceled`` — the client canceled."""
    if adopted or latest == "adopted":
        return COMPLETED
    if latest == "taken":
        return WORKING
    if latest == "delivered":
        return INPUT_REQUIRED if client_judges else WORKING
    if canceled:
        return CANCELED
    return SUBMITTED


class Seen(msgspec.Struct, frozen=True):
    """One engagement of the Task as the client may see it: its effective
    state (a passed deadline wins, L4-3) and, when delivered, the content."""

    engagement: str
    state: str
    taken_at: int
    deliver_by: int
    delivered_at: int | None = None
    judge_by: int | None = None
    ended_at: int | None = None  # recorded, or the deadline that ended it
    content: bytes | None = None  # the delivered Memory version's content


def generation(engagements: list[Seen], canceled: bool) -> int:
    """One per A2A-visible change: the creation, then each engagement taken,
    delivered and ended, and the cancel."""
    n = 1 + bool(canceled)
    for e in engagements:
        n += 1 + (e.delivered_at is not None) + (e.state not in _OPEN)
    return n


def changed_at(created_at: int, engagements: list[Seen], canceled_at: int | None) -> int:
    """When the last A2A-visible change happened."""
    times = [created_at, canceled_at or 0]
    for e in engagements:
        times += [e.taken_at, e.delivered_at or 0, e.ended_at or 0]
    return max(times)


def artifact_parts(content: bytes | None) -> list[dict[str, Any]]:
    """A delivery's parts: ``content.a2a.parts``, else one ``text`` part for
    ``{text}``, else one ``data`` part with the content."""
    if content is None:
        return []
    try:
        value = msgspec.json.decode(content)
    except msgspec.DecodeError:
        return []
    if isinstance(value, dict):
        a2a = value.get("a2a")
        if isinstance(a2a, dict) and isinstance(a2a.get("parts"), list) and a2a["parts"]:
            return [p for p in a2a["parts"] if isinstance(p, dict)]
        if isinstance(value.get("text"), str):
            return [{"text": value["text"]}]
        return [{"data": value}]
    return [{"data": {"value": value}}]


def _message(raw: bytes, task: str, context: str) -> dict[str, Any]:
    m = msgspec.json.decode(raw)
    m["taskId"], m["contextId"] = task, context
    return m


def render(
    task: str,
    context: str,
    created_at: int,
    messages: list[bytes],
    engagements: list[Seen],
    client_judges: bool,
    canceled_at: int | None,
    adopted: bool,
    history_length: int | None = None,
    recorded: int = 0,
) -> dict[str, Any]:
    """The A2A 1.0 Task object. ``messages``: the caller's, as sent, oldest
    first; ``engagements``: oldest first (the newest ones, when there are
    very many: ``recorded``, the generation last recorded, keeps the count);
    ``history_length``: the newest N messages (0: none; None: all)."""
    canceled = canceled_at is not None
    latest = engagements[-1] if engagements else None
    state = state_of(adopted, latest.state if latest else None, client_judges, canceled)
    gen = max(generation(engagements, canceled), recorded)
    kungfu: dict[str, Any] = {"state": latest.state if latest else "offered"}
    if latest is not None:
        kungfu["engagement"] = latest.engagement
        kungfu["deliver_by"] = rfc3339(latest.deliver_by)
        if latest.judge_by is not None:
            kungfu["judge_by"] = rfc3339(latest.judge_by)
    text = _DEADLINE_JUDGED if state == WORKING and latest is not None and latest.state == "delivered" else _TEMPLATES[state]
    status = {
        "state": state,
        "message": {
            "messageId": f"{task}.g{gen}",
            "role": "ROLE_AGENT",
            "taskId": task,
            "contextId": context,
            "parts": [{"data": {"kungfu": kungfu}}, {"text": text}],
        },
        "timestamp": rfc3339(changed_at(created_at, engagements, canceled_at)),
    }
    out: dict[str, Any] = {"id": task, "contextId": context, "status": status}
    artifacts = [
        {"artifactId": e.engagement, "name": "delivery", "parts": artifact_parts(e.content)}
        for e in engagements
        if e.delivered_at is not None
    ]
    if artifacts:
        out["artifacts"] = artifacts
    shown = messages if history_length is None else messages[-history_length:] if history_length > 0 else []
    if shown:
        out["history"] = [_message(m, task, context) for m in shown]
    meta: dict[str, Any] = {
        "state": kungfu["state"],
        "engagements": [_brief(e) for e in engagements],
        "generation": gen,
    }
    if canceled:
        meta["canceled"] = True
    out["metadata"] = {E: meta}
    return out


def _brief(e: Seen) -> dict[str, Any]:
    b: dict[str, Any] = {"engagement": e.engagement, "state": e.state, "deliver_by": rfc3339(e.deliver_by)}
    if e.judge_by is not None:
        b["judge_by"] = rfc3339(e.judge_by)
    return b
