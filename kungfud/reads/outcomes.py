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
from ..store.events import OutcomeRow
from ..store.store import View
from . import cursors

__all__ = ["outcomes", "SCAN_BUDGET"]

SCAN_BUDGET = 2000  # index rows one page may examine (bounded reads, R8-13)
_row_dec = msgspec.msgpack.Decoder(OutcomeRow)


def _bad_cursor() -> Rejection:
    return Rejection.bad_request("`cursor` is not a cursor this daemon returned - at `$.args.cursor`")


def outcomes(view: View, me: str, cursor: str | None, limit: int) -> dict | Rejection:
    prefix = me.encode() + b"\x00"
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
    if pos is not None:
        # (seq, assignment or engagement id), as :func:`outcome_key` wrote it.
        ident = pos[8:]
        if len(pos) > 80 or not (ident[:3] in (b"as_", b"en_") and ident[3:].isalnum() and ident.isascii()):
            return _bad_cursor()
    items: list[Any] = []
    last: bytes | None = None
    shown = False
    scanned = 0
    more = False
    member: dict[str, bool] = {}
    with view.txn.cursor(db=view.dbs["outcomes"]) as cur:
        # Newest first: start just before the cursor's row, or at the caller's
        # last row (the first key after the caller's range, then one back).
        upper = prefix + pos if pos is not None else me.encode() + b"\x01"
        ok = cur.prev() if cur.set_range(upper) else cur.last()
        while ok:
            key = cur.key()
            if not key.startswith(prefix):
                break
            if len(items) == limit or scanned == SCAN_BUDGET:
                more = True
                break
            scanned += 1
            last, shown = key, False
            row = _row_dec.decode(cur.value())
            if row.thread is not None:
                if row.thread not in member:
                    # One index lookup: is the caller a current member (R9-2)?
                    member[row.thread] = view.txn.get(me.encode() + b"\x00" + row.thread.encode(), db=view.dbs["memberships"]) is not None
                if not member[row.thread]:
                    ok = cur.prev()
                    continue
            items.append(msgspec.Raw(row.item))
            shown = True
            ok = cur.prev()
    if not more or last is None:
        return {"items": items, "cursor": None}
    # A cursor never names what the caller may not read (D44): the position of a
    # row the page did not show (an assignment of a Thread the caller left) is sealed.
    pos = last[len(prefix):]
    return {"items": items, "cursor": pos.hex() if shown else cursors.seal("outcomes", me, pos)}
