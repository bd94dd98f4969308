"""The ``search`` op's arguments (WIRE.md 1.3 "Search"; wire/args.py is full)."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from .args import Limit, ThreadId, _Args, _SEALED

__all__ = ["SearchArgs", "SearchCursor", "SearchKind"]

SearchKind = Literal["memory", "entry", "task", "delivery"]
# Always sealed: a page's position is the score, time and key of its last item.
SearchCursor = Annotated[str, msgspec.Meta(pattern=rf"^{_SEALED}$(?!\n)")] | None


class SearchArgs(_Args, frozen=True):
    q: Annotated[str, msgspec.Meta(min_length=1, max_length=1000)]
    in_: Annotated[list[SearchKind], msgspec.Meta(min_length=1, max_length=4)] | None = msgspec.field(
        default=None, name="in"
    )
    thread: ThreadId | None = None
    cursor: SearchCursor = None
    limit: Limit = 20
