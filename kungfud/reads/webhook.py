"""``webhook.get`` (WIRE.md 1.2): the caller's endpoint and how delivery to it
goes, from one view: the registration (``ag_….webhook``, never its key) and
the delivery runner's cursor (store/hooks.py)."""

from __future__ import annotations

from typing import Any

from ..core.timestamps import rfc3339
from ..core.webhook import webhook_obj
from ..store.hooks import count_pending
from ..store.view import View

__all__ = ["webhook_get", "PENDING_CAP", "state_of"]

PENDING_CAP = 10_000  # events `pending` counts at most: every read is bounded (R8-13)
# Rows `pending` reads and does not count (other kinds, offers not meant for the
# caller) at most: the read's work is bounded by what it counts (D331).
PENDING_PASS = 1024


def state_of(cursor: Any) -> str:
    """``active``, ``failing`` (retrying) or ``disabled``, from a cursor of
    the current registration (None: nothing attempted yet)."""
    if cursor is None:
        return "active"
    if cursor.disabled_at:
        return "disabled"
    return "failing" if cursor.attempts else "active"


def webhook_get(view: View, caller: str) -> dict:
    reg = view.state(webhook_obj(caller))
    if reg is None or reg.url is None:
        return {"url": None}
    cursor = view.hook_cursor(caller)
    if cursor is not None and cursor.hook != reg.hook:
        cursor = None  # the cursor of an endpoint set before this one
    delivered = reg.since if cursor is None else cursor.delivered
    feed = view.feed(caller, delivered, open_tasks="task_offered" in reg.events, passed=True)
    try:
        pending = count_pending(feed, reg.events, PENDING_CAP, PENDING_PASS)
    finally:
        feed.close()
    out: dict[str, Any] = {
        "url": reg.url,
        "events": list(reg.events),
        "state": state_of(cursor),
        "delivered_seq": delivered,
        "pending": pending,
    }
    if cursor is not None and cursor.last_attempt_at:
        out["last_attempt_at"] = rfc3339(cursor.last_attempt_at)
    if cursor is not None and cursor.last_error:
        out["last_error"] = cursor.last_error
    return out
