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

from typing import Iterator

from ..core.obligations import Obligation
from ..core.shapes import obligation_item, opportunity_item
from ..core.facts import member_obj
from ..core.members import current
from ..core.task import TaskState, in_audience
from ..core.thread import ThreadState
from ..errors import Rejection
from ..store.view import View
from . import pager
from .task import takes_engagements

__all__ = ["turn", "opportunities", "SCAN_BUDGET"]

SCAN_BUDGET = 2000  # index rows one page may examine (bounded reads, R8-13)


def turn(view: View, me: str, cursor: str | None, limit: int, now: int) -> dict | Rejection:
    def item(ob: Obligation) -> dict | None:
        if ob.due is not None and ob.due <= now:
            return None  # L4-3: the deadline won; its expiry fact is on its way
        return obligation_item(ob)

    return pager.page("turn", me, cursor, limit, SCAN_BUDGET, lambda after: view.obligations_of(me, after), item, pager.HEX)


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
        if t is None or current(view.state(member_obj(t.thread, me))) is None or not t.open:
            return None
        return opportunity_item(view.state(ident))

    def rows(after: bytes | None) -> Iterator[tuple[bytes, tuple[str, str]]]:
        return ((pos, (ident, where)) for pos, ident, where in view.opportunities_of(me, after))

    return pager.page("opportunities", me, cursor, limit, SCAN_BUDGET, rows, item, pager.HEX)
