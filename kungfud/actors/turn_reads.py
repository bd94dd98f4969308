"""§8 turn and opportunities.

The turn is the caller's open obligations across all its memberships (and, with
Tasks, engagements and judge duties), ordered by when each arose, without
duplicates (R8-6, R8-7), read page by page from the per-holder obligations
index — so a page costs the same however many obligations other agents hold.
The cursor is the index position of the last item returned: obligations that end
between pages are simply not there, and none that still exists is skipped
(R8-10). An obligation whose deadline has passed is never shown (L4-3).
"""

from __future__ import annotations

from typing import Any, Callable

import msgspec

from ..core.facts import member_obj
from ..core.members import current
from ..core.obligations import Obligation
from ..core.task import TaskState, in_audience
from ..core.thread import ThreadState
from ..errors import Rejection
from ..store.events import opportunity_item, turn_item
from ..store.store import View
from . import cursors
from .task_reads import takes_engagements

__all__ = ["turn", "opportunities", "SCAN_BUDGET"]

SCAN_BUDGET = 2000  # index rows one page may examine (bounded reads, R8-13)
_ob_dec = msgspec.msgpack.Decoder(Obligation)


def _bad_cursor() -> Rejection:
    return Rejection.bad_request("`cursor` is not a cursor this daemon returned - at `$.args.cursor`")


def _start(op: str, me: str, prefix: bytes, cursor: str | None) -> bytes | Rejection:
    if cursor is None:
        return prefix
    if cursors.is_sealed(cursor):
        sealed = cursors.unseal(op, me, cursor)
        if sealed is None:
            return _bad_cursor()
        return prefix + sealed + b"\x00"
    try:
        pos = bytes.fromhex(cursor)
    except ValueError:
        return _bad_cursor()
    if len(pos) > 200:
        return _bad_cursor()
    return prefix + pos + b"\x00"  # the first key after the cursor's


def _page(
    view: View, op: str, db: str, me: str, cursor: str | None, limit: int, item: Callable[[bytes, bytes], "dict | None"]
) -> dict | Rejection:
    """One page of the caller's rows of ``db``, in key order, from after the
    cursor. ``item`` turns a row (key suffix, value) into an item or None (not
    shown). The cursor is the last row examined, so rows that end between pages
    are simply absent and none that still exists is skipped (R8-10); a page
    examines at most SCAN_BUDGET rows (R8-13). A row the page did not show may
    name what the caller cannot read: its position is sealed (D44)."""
    prefix = me.encode() + b"\x00"
    start = _start(op, me, prefix, cursor)
    if isinstance(start, Rejection):
        return start
    items: list[dict[str, Any]] = []
    last: bytes | None = None
    shown: dict | None = None
    scanned = 0
    more = False
    with view.txn.cursor(db=view.dbs[db]) as cur:
        if cur.set_range(start):
            for key, value in cur.iternext():
                if not key.startswith(prefix):
                    break
                if len(items) == limit or scanned == SCAN_BUDGET:
                    more = True
                    break
                scanned += 1
                last = key
                shown = item(key[len(prefix):], value)
                if shown is not None:
                    items.append(shown)
    if not more or last is None:
        return {"items": items, "cursor": None}
    pos = last[len(prefix):]
    return {"items": items, "cursor": pos.hex() if shown is not None else cursors.seal(op, me, pos)}


def turn(view: View, me: str, cursor: str | None, limit: int, now: int) -> dict | Rejection:
    def item(_: bytes, value: bytes) -> dict | None:
        ob = _ob_dec.decode(value)
        if ob.due is not None and ob.due <= now:
            return None  # L4-3: the deadline won; its expiry fact is on its way
        return turn_item(ob)

    return _page(view, "turn", "obligations", me, cursor, limit, item)


def opportunities(view: View, me: str, cursor: str | None, limit: int) -> dict | Rejection:
    """R8-3…R8-5, B24: untaken assignments addressed to the caller, while it is a
    member of their open Thread, and restricted Tasks naming it that take a new
    engagement now (WIRE.md 1.1). They bind no one and are never in the turn."""

    def item(ident_raw: bytes, value: bytes) -> dict | None:
        ident = ident_raw.decode()
        if ident.startswith("tk_"):
            tk: TaskState | None = view.state(ident)
            # WIRE.md 1.1: only a Task the caller may take, and that takes a new engagement now, is offered.
            if tk is None or not in_audience(tk, me) or not takes_engagements(view, tk):
                return None
            return opportunity_item(tk)
        t: ThreadState | None = view.state(value.decode())
        if t is None or current(view.state(member_obj(t.thread, me))) is None or not t.open:
            return None
        return opportunity_item(view.state(ident))

    return _page(view, "opportunities", "opportunities", me, cursor, limit, item)
