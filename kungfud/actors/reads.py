"""Reads: answered from one LMDB read transaction each (R9-5, R12-10), with §9
deciding what the caller sees. Reads do not need an active agent (R4-2) and write
nothing. They run without an actor hop: a read serializes with nothing."""

from __future__ import annotations

from typing import Any, Mapping

import msgspec

from ..core.clock import rfc3339
from ..core.visibility import may_list_memory, may_read_memory
from ..errors import Rejection
from ..store.store import View
from . import cursors

__all__ = ["whoami", "memory_get", "memory_list", "agent_list", "SCAN_BUDGET"]

SCAN_BUDGET = 1000  # index rows one page may examine: every read is bounded (R8-13)


def whoami(view: View, caller: str) -> dict | Rejection:
    state = view.state(caller)
    if state is None:
        return Rejection("unauthenticated", "this connection's agent no longer exists", "stop")
    return {"agent": state.agent, "status": state.status, "content": msgspec.Raw(state.content)}


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


def agent_list(
    view: View, caller: str, status: str | None, cursor: str | None, limit: int, seen: Mapping[str, int]
) -> dict | Rejection:
    """``admin.agent.list`` (WIRE.md "Operating a deployment"): every agent, in
    creation order, for an active admin only (docs/decisions.md). ``seen`` is
    when this daemon last saw each agent (in memory; absent: not since start)."""
    me = view.state(caller)
    if me is None or not me.admin:
        return Rejection.forbidden("only an admin agent may list agents")
    if not me.active:
        return Rejection.forbidden(f"agent {caller} is deactivated and may not use admin ops")
    # `cursor` is an agent id, its format checked at the wire (AgentCursor).
    items: list[dict[str, Any]] = []
    last: str | None = None
    scanned = 0
    exhausted = True
    for agent in view.agents(cursor):
        if len(items) == limit or scanned == SCAN_BUDGET:
            exhausted = False
            break
        scanned += 1
        last = agent
        state = view.state(agent)
        if state is None or (status is not None and state.status != status):
            continue
        item: dict[str, Any] = {
            "agent": agent,
            "status": state.status,
            "admin": state.admin,
            "content": msgspec.Raw(state.content),
            "created_at": rfc3339(state.created_at),
        }
        if (at := seen.get(agent)) is not None:
            item["last_seen_at"] = rfc3339(at)
        items.append(item)
    return {"items": items, "cursor": None if exhausted else last}
