"""The ``search`` op's arguments (WIRE.md 1.3 "Search"; wire/args.py is full)."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from .fields import SEALED_CURSOR, Args, Limit, ThreadId

__all__ = ["SearchArgs", "SearchCursor", "SearchKind"]

SearchKind = Literal["memory", "entry", "task", "delivery"]
# Always sealed: a page's position is the score, time and key of its last item.
SearchCursor = Annotated[str, msgspec.Meta(pattern=rf"^{SEALED_CURSOR}$(?!\n)")] | None


class SearchArgs(Args, frozen=True):
    # No lower bounds: an empty query or kind list is refused by the read, saying why.
    q: Annotated[str, msgspec.Meta(max_length=256)]
    in_: list[SearchKind] | None = msgspec.field(default=None, name="in")
    thread: ThreadId | None = None
    cursor: SearchCursor = None
    limit: Limit = 20
