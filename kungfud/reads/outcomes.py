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

from typing import Any, Iterator

import msgspec

from ..errors import Rejection
from ..store.view import View
from . import pager

__all__ = ["outcomes", "SCAN_BUDGET"]

SCAN_BUDGET = 2000  # index rows one page may examine (bounded reads, R8-13)


def outcomes(view: View, me: str, cursor: str | None, limit: int) -> dict | Rejection:
    member: dict[str, bool] = {}

    def item(row: tuple[str | None, bytes]) -> Any:
        thread, outcome = row
        if thread is not None:
            if thread not in member:
                member[thread] = view.is_member(me, thread)  # one index lookup (R9-2)
            if not member[thread]:
                return None
        return msgspec.Raw(outcome)

    def rows(before: bytes | None) -> Iterator[tuple[bytes, tuple[str | None, bytes]]]:
        return ((pos, (thread, outcome)) for pos, thread, outcome in view.outcomes_of(me, before))

    # A cursor never names what the caller may not read (D44): the position of a
    # row the page did not show (an assignment of a Thread the caller left) is sealed.
    return pager.page("outcomes", me, cursor, limit, SCAN_BUDGET, rows, item, pager.HEX, valid=view.outcome_position)
