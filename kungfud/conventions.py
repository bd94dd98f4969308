"""Conventions every layer shares, with no dependency of their own (WIRE.md
"Conventions"): how a time is written on the wire, which receipt fields are
secrets, and how two maps of when agents were last seen combine.
"""

from __future__ import annotations

import datetime as _dt
from typing import Literal, Mapping

__all__ = ["rfc3339", "SECRET_FIELDS", "Role", "merge_latest", "Scope", "SCOPES", "allows"]

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)

#: Receipt fields that hold a secret (an agent key, an admission token): shown
#: once in the first reply, nulled in the stored receipt (DECISIONS.md B4) and
#: never written to the audit log.
SECRET_FIELDS = ("key", "token", "secret")  # secret: a webhook's signing secret (WIRE.md 1.2)

#: A member's role in a Thread (WIRE.md "Thread"; spec §6): the facts, the
#: member objects and the wire's args all name it from here.
Role = Literal["observer", "speaker", "governor"]


#: A scoped key's scope (WIRE.md 1.3 "Scoped keys"): the daemon refuses an op
#: outside it (core/keys.py); the MCP bridge offers only the tools inside it.
Scope = Literal["read", "worker", "a2a"]
SCOPES: tuple[Scope, ...] = ("read", "worker", "a2a")
#: The actions the ``worker`` scope may send besides every read.
WORKER_ACTIONS = frozenset({
    "thread.post", "thread.handle",
    "assignment.take", "assignment.deliver", "assignment.drop",
    "task.take", "task.deliver", "task.drop",
})
A2A_PREFIX = "a2a."  # the a2a scope: every op of the A2A binding, present and future


def allows(scope: str, op: str, kind: str) -> bool:
    """Whether a key of ``scope`` may call ``op`` (of ``kind`` ``"A"`` or ``"R"``):
    ``agent.whoami`` for every scope; ``read`` every read, ``worker`` every
    read and the work actions above; ``a2a`` the ``a2a.*`` ops (which are
    no other scope's)."""
    if op == "agent.whoami":
        return True
    if scope == "a2a" or op.startswith(A2A_PREFIX):
        return scope == "a2a" and op.startswith(A2A_PREFIX)
    return kind == "R" or (scope == "worker" and op in WORKER_ACTIONS)


def merge_latest(into: dict[str, int], seen: Mapping[str, int]) -> None:
    """Merge ``seen`` (agent -> ms) into ``into`` by max: a node's map of when
    agents were last seen, and what waits to be shared of it, only move
    forward whatever order the shares arrive in (D175)."""
    for agent, ms in seen.items():
        if ms > into.get(agent, -1):
            into[agent] = ms


_second: tuple[int, str] = (0, _EPOCH.strftime("%Y-%m-%dT%H:%M:%S."))  # the last second written


def rfc3339(ms: int) -> str:
    """``1764504000000`` → ``"2025-11-30T12:00:00.000Z"``: RFC 3339 UTC with
    milliseconds, from integer milliseconds since the Unix epoch."""
    global _second
    s, milli = divmod(ms, 1000)
    last = _second  # one tuple, replaced whole: safe to share between threads
    if last[0] != s:  # times written together mostly share their second
        last = _second = (s, (_EPOCH + _dt.timedelta(seconds=s)).strftime("%Y-%m-%dT%H:%M:%S."))
    return f"{last[1]}{milli:03d}Z"
