"""The ``outcomes`` read (WIRE.md 1.1 "Outcomes"): how the work the caller took,
created or judges ended, newest first.

Read page by page, backwards, from the caller's rows of the ``outcomes`` index
(written with the facts, rebuilt by ``kungfud check``): a page costs the same
however long the history is. Rows are never removed, so the cursor — the index
position of the last row examined — never skips one (R8-10); a page examines at
most SCAN_BUDGET rows (R8-13). An assignment's outcome is Thread history: it is
shown only while the caller is a member of that Thread (§9 R9-9, R9-2); an
engagement's to its parties always (R9-16).
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..errors import Rejection
from ..store.store import View
from . import cursors

__all__ = ["outcomes", "SCAN_BUDGET"]

SCAN_BUDGET = 2000  # index rows one page may examine (bounded reads, R8-13)


def _bad_cursor() -> Rejection:
    return Rejection.bad_request("`cursor` is not a cursor this daemon returned - at `$.args.cursor`")


def outcomes(view: View, me: str, cursor: str | None, limit: int) -> dict | Rejection:
    pos: bytes | None = None
    if cursor is not None and cursors.is_sealed(cursor):
        pos = cursors.unseal("outcomes", me, cursor)
        if pos is None:
            return _bad_cursor()
    elif cursor is not None:
        try:
            pos = bytes.fromhex(cursor)
        except ValueError:
            return _bad_cursor()
    if pos is not None and not view.outcome_position(pos):
        return _bad_cursor()
    items: list[Any] = []
    last: bytes | None = None
    shown = False
    scanned = 0
    more = False
    member: dict[str, bool] = {}
    for row_pos, thread, item in view.outcomes_of(me, pos):
        if len(items) == limit or scanned == SCAN_BUDGET:
            more = True
            break
        scanned += 1
        last, shown = row_pos, False
        if thread is not None:
            if thread not in member:
                member[thread] = view.is_member(me, thread)  # one index lookup (R9-2)
            if not member[thread]:
                continue
        items.append(msgspec.Raw(item))
        shown = True
    if not more or last is None:
        return {"items": items, "cursor": None}
    # A cursor never names what the caller may not read (D44): the position of a
    # row the page did not show (an assignment of a Thread the caller left) is sealed.
    return {"items": items, "cursor": last.hex() if shown else cursors.seal("outcomes", me, last)}
