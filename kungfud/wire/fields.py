"""The field types every op's args share (WIRE.md "Conventions"): ids with
their prefixes, ranges of integers, cursor formats (a sealed cursor, D44),
and :class:`Args`, the base of every args type. :mod:`.args` and the args of
later additions (:mod:`.a2a`, :mod:`.keys`, :mod:`.search`) build on them."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from ..conventions import Role

__all__ = [
    "Args", "id_field", "SEALED_CURSOR",
    "ReqId", "AgentId", "MemoryId", "ThreadId", "AssignmentId", "TaskId", "RoleName", "MAX_INT", "EntryNo", "Version", "WithinS", "Content", "Cursor", "Limit", "EntryCursor", "MemoryCursor", "ThreadCursor", "TaskCursor", "AgentCursor", "PositionCursor", "EngagementId",
]

ReqId = str | int


# Patterns end in `$(?!\n)`: Python's `$` also matches before a final newline, and
# the lookahead refuses that while reading the same in JSON Schema (ECMA-262) regexes.


def id_field(prefix: str) -> Any:
    return Annotated[str, msgspec.Meta(pattern=rf"^{prefix}[0-9a-z_]{{1,60}}$(?!\n)")]


AgentId = id_field("ag_")
MemoryId = id_field("me_")
ThreadId = id_field("th_")
AssignmentId = id_field("as_")
TaskId = id_field("tk_")
EngagementId = id_field("en_")
RoleName = Role  # one definition (conventions.py), shared with the core
# Every integer arg has a range and every cursor a format, so a value the daemon
# cannot use is `bad_request` naming the field at the wire, never a failure deeper
# in (an integer too large to store, a cursor `int()` cannot read). 2^53 is the
# largest integer below which doubles (how most JSON clients read numbers) are exact.
MAX_INT = 2**53
EntryNo = Annotated[int, msgspec.Meta(ge=1, le=MAX_INT)]
Version = Annotated[int, msgspec.Meta(ge=1, le=MAX_INT)]
WithinS = Annotated[int, msgspec.Meta(ge=1, le=31_536_000)]
Content = dict[str, Any]  # participant data, opaque to the daemon (L6)
Cursor = Annotated[str, msgspec.Meta(max_length=256)] | None  # prefer a format below
Limit = Annotated[int, msgspec.Meta(ge=1, le=100)]
# The cursor each list read returns, and so the only ones it accepts.
EntryCursor = Annotated[str, msgspec.Meta(pattern=r"^[0-9]{1,16}$(?!\n)")] | None  # an entry number
# A sealed cursor (docs/decisions.md D44: a page that stopped on a row the caller
# may not read) is `~` + URL-safe base64, within WIRE.md's 256 characters.
SEALED_CURSOR = r"~[A-Za-z0-9_-]{1,255}"
MemoryCursor = Annotated[str, msgspec.Meta(pattern=rf"^(?:me_[0-9a-z_]{{1,60}}|{SEALED_CURSOR})$(?!\n)")] | None
ThreadCursor = ThreadId | None
TaskCursor = TaskId | None
AgentCursor = AgentId | None
PositionCursor = (
    Annotated[str, msgspec.Meta(pattern=rf"^(?:(?:[0-9a-f]{{2}}){{1,200}}|{SEALED_CURSOR})$(?!\n)")] | None
)  # an index position, in the clear or sealed


class Args(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The base of every op's args: frozen, unknown fields refused (WIRE.md "Frames")."""
