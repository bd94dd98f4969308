"""Memory reads (§5, §9): ``memory.get`` and ``memory.list``, with §9 deciding
what the caller sees. Each is answered from one read view (R9-5, R12-10)."""

from __future__ import annotations

from typing import Any

import msgspec

from ..core.clock import rfc3339
from ..core.visibility import may_list_memory, may_read_memory
from ..errors import Rejection
from ..store.store import View
from . import cursors

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


def memory_list(view: View, caller: str, author: str | None, cursor: str | None, limit: int) -> dict | Rejection:
    author = author or caller
    bad = Rejection.bad_request("`cursor` is not a cursor this daemon returned - at `$.args.cursor`")
    after: str | None = None
    if cursor is not None and cursors.is_sealed(cursor):
        pos = cursors.unseal("memory.list", caller, cursor)
        if pos is None:
            return bad
        after = pos.decode()
    elif cursor is not None:
        if not (cursor.startswith("me_") and cursor[3:].isalnum() and cursor.isascii()):
            return bad
        after = cursor
    items: list[dict[str, Any]] = []
    last: str | None = None
    shown = False
    scanned = 0
    exhausted = True
    for memory in view.memories_of(author, after):
        if len(items) == limit or scanned == SCAN_BUDGET:
            exhausted = False
            break
        scanned += 1
        last = memory
        state = view.state(memory)
        shown = state is not None and may_list_memory(state, caller)
        if shown:
            items.append(
                {
                    "memory": memory,
                    "author": state.author,
                    "latest": state.latest,
                    "status": state.status,
                    "visibility": state.visibility,
                }
            )
    if exhausted or last is None:
        return {"items": items, "cursor": None}
    # D44: the clear id only when it is an item of this page; else sealed.
    return {"items": items, "cursor": last if shown else cursors.seal("memory.list", caller, last.encode())}
