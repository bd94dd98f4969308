"""Memory reads (§5, §9): ``memory.get`` and ``memory.list``, with §9 deciding
what the caller sees. Each is answered from one read view (R9-5, R12-10)."""

from __future__ import annotations

from typing import Any, Iterator

import msgspec

from ..core.timestamps import rfc3339
from ..core.visibility import may_list_memory, may_read_memory
from ..errors import Rejection
from ..store.view import View
from . import pager

__all__ = ["memory_get", "memory_list", "SCAN_BUDGET"]

SCAN_BUDGET = 1000  # index rows one page may examine: every read is bounded (R8-13)


def memory_get(view: View, caller: str, memory: str, version: int | None) -> dict | Rejection:
    state = view.state(memory)
    if state is None or not may_read_memory(state, caller, version):
        return Rejection.not_found("memory", memory if version is None else f"{memory} version {version}")
    v = state.latest if version is None else version
    content = view.memory_content(memory, v)
    assert content is not None, "versions index lost a version"
    return {
        "memory": memory,
        "author": state.author,
        "version": v,
        "latest": state.latest,
        "status": state.status,
        "visibility": state.visibility,
        "created_at": rfc3339(state.created_at),
        "content": msgspec.Raw(content),
    }


def _memory_position(pos: bytes) -> bool:
    # A Memory id: what memory.list returns in the clear (the wire also lets `_` through).
    return pos.startswith(b"me_") and pos[3:].isalnum() and pos.isascii()


def memory_list(view: View, caller: str, author: str | None, cursor: str | None, limit: int) -> dict | Rejection:
    author = author or caller

    def item(memory: str) -> dict[str, Any] | None:
        state = view.state(memory)
        if state is None or not may_list_memory(state, caller):
            return None
        return {
            "memory": memory,
            "author": state.author,
            "latest": state.latest,
            "status": state.status,
            "visibility": state.visibility,
        }

    # D233: another agent's page walks only that author's public Memories, so
    # no page (its items, its cursor, where it stops) depends on the private
    # ones the caller may not read (R12-9).
    public = author != caller

    def rows(after: bytes | None) -> Iterator[tuple[bytes, str]]:
        start = after.decode() if after is not None else None
        return ((m.encode(), m) for m in view.memories_of(author, start, public=public))

    # D44: the clear id only when it is an item of this page; else sealed.
    return pager.page("memory.list", caller, cursor, limit, SCAN_BUDGET, rows, item, pager.IDS, valid=_memory_position)
