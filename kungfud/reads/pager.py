"""One pager for the scanned list reads (WIRE.md "Lists"): ``memory.list``,
``admin.agent.list``, ``turn``, ``opportunities`` and ``outcomes``.

A page walks the caller's rows of one store query from just after (or, newest
first, before) the cursor's position, and stops after ``limit`` items or
``budget`` rows examined, whichever comes first (R8-13: every read is bounded).
The cursor is the position of the last row *examined*, not the last item shown:
rows that end between pages are simply absent and none that still exists is
skipped (R8-10). When that row was not shown, its position may name what the
caller cannot read, so the cursor is sealed (D44, :mod:`.cursors`); a read
whose rows are all readable by the caller (``admin.agent.list``) never seals.

Pure: the rows come from a :class:`~kungfud.store.view.View` query, the items
from the read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, TypeVar

from ..errors import Rejection
from . import cursors

__all__ = ["Positions", "HEX", "IDS", "page"]

Row = TypeVar("Row")


@dataclass(frozen=True, slots=True)
class Positions:
    """How a read's page positions travel in the clear: ``show`` turns a
    position into the cursor; ``read`` turns a clear cursor back into one, or
    None when it is not a position this daemon could have returned."""

    show: Callable[[bytes], str]
    read: Callable[[str], "bytes | None"]


# Index positions (turn, opportunities, outcomes): hex, its format checked at
# the wire (PositionCursor, D52).
HEX = Positions(bytes.hex, bytes.fromhex)
# Object ids (memory.list, admin.agent.list): the id itself.
IDS = Positions(bytes.decode, str.encode)


def page(
    op: str,
    caller: str,
    cursor: str | None,
    limit: int,
    budget: int,
    rows: Callable[["bytes | None"], Iterable[tuple[bytes, Row]]],
    item: Callable[[Row], "dict[str, Any] | Any | None"],
    positions: Positions,
    *,
    valid: Callable[[bytes], bool] | None = None,
    seal: bool = True,
) -> dict | Rejection:
    """One page of ``rows(after)`` — (position, row) pairs in page order from
    the cursor's position (None: from the start) — with ``item(row)`` the item
    shown for a row, or None when the caller may not see it. ``valid``: whether
    a cursor's position is one the query could have returned."""
    start: bytes | None = None
    if cursor is not None:
        start = cursors.unseal(op, caller, cursor) if cursors.is_sealed(cursor) else positions.read(cursor)
        if start is None or (valid is not None and not valid(start)):
            return cursors.bad_cursor()
    items: list[Any] = []
    last: bytes | None = None
    shown = False
    scanned = 0
    more = False
    for pos, row in rows(start):
        if len(items) == limit or scanned == budget:
            more = True
            break
        scanned += 1
        last = pos
        got = item(row)
        shown = got is not None
        if shown:
            items.append(got)
    if not more or last is None:
        return {"items": items, "cursor": None}
    return {"items": items, "cursor": positions.show(last) if shown or not seal else cursors.seal(op, caller, last)}
