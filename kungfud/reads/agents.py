"""Agent reads (§4): ``agent.whoami`` and the admin's ``admin.agent.list``."""

from __future__ import annotations

from typing import Any, Iterator, Mapping

import msgspec

from ..core.timestamps import rfc3339
from ..errors import Rejection
from ..store.view import View
from . import pager

__all__ = ["whoami", "agent_list", "SCAN_BUDGET"]

SCAN_BUDGET = 1000  # agent rows one page may examine: every read is bounded (R8-13)


def whoami(view: View, caller: str) -> dict | Rejection:
    state = view.state(caller)
    if state is None:
        return Rejection("unauthenticated", "this connection's agent no longer exists", "stop")
    return {"agent": state.agent, "status": state.status, "content": msgspec.Raw(state.content)}


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

    def item(agent: str) -> dict[str, Any] | None:
        state = view.state(agent)
        if state is None or (status is not None and state.status != status):
            return None
        out: dict[str, Any] = {
            "agent": agent,
            "status": state.status,
            "admin": state.admin,
            "content": msgspec.Raw(state.content),
            "created_at": rfc3339(state.created_at),
        }
        if (at := seen.get(agent)) is not None:
            out["last_seen_at"] = rfc3339(at)
        return out

    def rows(after: bytes | None) -> Iterator[tuple[bytes, str]]:
        return ((a.encode(), a) for a in view.agents(after.decode() if after is not None else None))

    # Every agent id is the admin's to read: the cursor is never sealed.
    return pager.page("admin.agent.list", caller, cursor, limit, SCAN_BUDGET, rows, item, pager.IDS, seal=False)
