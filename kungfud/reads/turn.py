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

from typing import Any, Callable, Iterator

from ..core.obligations import Obligation
from ..core.task import TaskState, in_audience
from ..core.thread import ThreadState
from ..errors import Rejection
from ..store.events import opportunity_item, turn_item
from ..store.store import View
from . import cursors
from .task import takes_engagements

__all__ = ["turn", "opportunities", "SCAN_BUDGET"]

SCAN_BUDGET = 2000  # index rows one page may examine (bounded reads, R8-13)


def _bad_cursor() -> Rejection:
    return Rejection.bad_request("`cursor` is not a cursor this daemon returned - at `$.args.cursor`")


def _position(op: str, me: str, cursor: str | None) -> bytes | None | Rejection:
    if cursor is None:
        return None
    if cursors.is_sealed(cursor):
        sealed = cursors.unseal(op, me, cursor)
        if sealed is None:
            return _bad_cursor()
        return sealed
    try:
        pos = bytes.fromhex(cursor)
    except ValueError:
        return _bad_cursor()
    if len(pos) > 200:
        return _bad_cursor()
    return pos


def _page(
    op: str, me: str, cursor: str | None, limit: int, rows: Callable[[bytes | None], Iterator[tuple[bytes, Any]]],
    item: Callable[[Any], "dict | None"],
) -> dict | Rejection:
    """One page of the caller's ``rows`` (position, row), in order, from after
    the cursor. ``item`` turns a row into an item or None (not shown). The cursor
    is the last row examined, so rows that end between pages are simply absent
    and none that still exists is skipped (R8-10); a page examines at most
    SCAN_BUDGET rows (R8-13). A row the page did not show may name what the
    caller cannot read: its position is sealed (D44)."""
    start = _position(op, me, cursor)
    if isinstance(start, Rejection):
        return start
    items: list[dict[str, Any]] = []
    last: bytes | None = None
    shown: dict | None = None
    scanned = 0
    more = False
    for pos, row in rows(start):
        if len(items) == limit or scanned == SCAN_BUDGET:
            more = True
            break
        scanned += 1
        last = pos
        shown = item(row)
        if shown is not None:
            items.append(shown)
    if not more or last is None:
        return {"items": items, "cursor": None}
    return {"items": items, "cursor": last.hex() if shown is not None else cursors.seal(op, me, last)}


def turn(view: View, me: str, cursor: str | None, limit: int, now: int) -> dict | Rejection:
    def item(ob: Obligation) -> dict | None:
        if ob.due is not None and ob.due <= now:
            return None  # L4-3: the deadline won; its expiry fact is on its way
        return turn_item(ob)

    return _page("turn", me, cursor, limit, lambda after: view.obligations_of(me, after), item)


def opportunities(view: View, me: str, cursor: str | None, limit: int) -> dict | Rejection:
    """R8-3…R8-5, B24: untaken assignments addressed to the caller, while it is a
    member of their open Thread, and restricted Tasks naming it that take a new
    engagement now (WIRE.md 1.1). They bind no one and are never in the turn."""

    def item(row: tuple[str, str]) -> dict | None:
        ident, where = row
        if ident.startswith("tk_"):
            tk: TaskState | None = view.state(ident)
            # WIRE.md 1.1: only a Task the caller may take, and that takes a new engagement now, is offered.
            if tk is None or not in_audience(tk, me) or not takes_engagements(view, tk):
                return None
            return opportunity_item(tk)
        t: ThreadState | None = view.state(where)
        if t is None or me not in t.members or not t.open:
            return None
        return opportunity_item(view.state(ident))

    rows = lambda after: ((pos, (ident, where)) for pos, ident, where in view.opportunities_of(me, after))  # noqa: E731
    return _page("opportunities", me, cursor, limit, rows, item)
