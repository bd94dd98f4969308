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

from typing import Any

import msgspec

from ..core.clock import rfc3339
from ..core.obligations import NEXT, Obligation
from ..core.thread import ThreadState
from ..errors import Rejection
from ..store.events import opportunity_item
from ..store.store import View

__all__ = ["turn", "opportunities", "SCAN_BUDGET"]

SCAN_BUDGET = 2000  # index rows one page may examine (bounded reads, R8-13)
_ob_dec = msgspec.msgpack.Decoder(Obligation)


def _bad_cursor() -> Rejection:
    return Rejection.bad_request("`cursor` is not a cursor this daemon returned - at `$.args.cursor`")


def _start(prefix: bytes, cursor: str | None) -> bytes | Rejection:
    if cursor is None:
        return prefix
    try:
        pos = bytes.fromhex(cursor)
    except ValueError:
        return _bad_cursor()
    if len(pos) > 200:
        return _bad_cursor()
    return prefix + pos + b"\x00"  # the first key after the cursor's


def turn(view: View, me: str, cursor: str | None, limit: int, now: int) -> dict | Rejection:
    prefix = me.encode() + b"\x00"
    start = _start(prefix, cursor)
    if isinstance(start, Rejection):
        return start
    items: list[dict[str, Any]] = []
    last: bytes | None = None
    scanned = 0
    more = False
    with view.txn.cursor(db=view.dbs["obligations"]) as cur:
        if cur.set_range(start):
            for key, value in cur.iternext():
                if not key.startswith(prefix):
                    break
                if len(items) == limit or scanned == SCAN_BUDGET:
                    more = True
                    break
                scanned += 1
                last = key
                ob = _ob_dec.decode(value)
                if ob.due is not None and ob.due <= now:
                    continue  # L4-3: the deadline won; its expiry fact is on its way
                item: dict[str, Any] = {
                    "obligation_id": ob.obligation_id,
                    "obligation": ob.obligation,
                    "ref": ob.ref,
                    "created_at": rfc3339(ob.created_at),
                }
                if ob.due is not None:
                    item["due"] = rfc3339(ob.due)
                item["next"] = NEXT[ob.obligation]
                items.append(item)
    return {"items": items, "cursor": last[len(prefix):].hex() if more and last is not None else None}


def opportunities(view: View, me: str, cursor: str | None, limit: int) -> dict | Rejection:
    """R8-3…R8-5, B24: untaken assignments addressed to the caller, while it is a
    member of their open Thread, and restricted Tasks naming it. They bind no one
    and are never in the turn."""
    prefix = me.encode() + b"\x00"
    start = _start(prefix, cursor)
    if isinstance(start, Rejection):
        return start
    items: list[dict[str, Any]] = []
    last: bytes | None = None
    scanned = 0
    more = False
    with view.txn.cursor(db=view.dbs["opportunities"]) as cur:
        if cur.set_range(start):
            for key, value in cur.iternext():
                if not key.startswith(prefix):
                    break
                if len(items) == limit or scanned == SCAN_BUDGET:
                    more = True
                    break
                scanned += 1
                last = key
                ident = key[len(prefix):].decode()
                if ident.startswith("tk_"):
                    tk = view.state(ident)
                    if tk is not None:
                        items.append(opportunity_item(tk))
                    continue
                t: ThreadState | None = view.state(value.decode())
                if t is None or me not in t.members or not t.open:
                    continue
                items.append(opportunity_item(view.state(ident)))
    return {"items": items, "cursor": last[len(prefix):].hex() if more and last is not None else None}
