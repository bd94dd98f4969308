"""Conventions every layer shares, with no dependency of their own (WIRE.md
"Conventions"): how a time is written on the wire, which receipt fields are
secrets, how two maps of when agents were last seen combine, and how an entry
of ``[webhooks] allow_hosts`` is written (the config checks it, the core
applies it).
"""

from __future__ import annotations

import datetime as _dt
from typing import Literal, Mapping

__all__ = ["rfc3339", "SECRET_FIELDS", "Role", "merge_latest", "Scope", "SCOPES", "allows", "allow_entry"]

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
    read and the work actions above — the ``a2a.*`` reads among them, as
    wire.md 1.3 says "every read" (D376); ``a2a`` the ``a2a.*`` ops."""
    if op == "agent.whoami":
        return True
    if scope == "a2a":
        return op.startswith(A2A_PREFIX)
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


def allow_entry(text: str) -> tuple[str, int | None] | None:
    """One ``[webhooks] allow_hosts`` entry as ``(host, port)``: the host in
    lower case without brackets; the port an int, ``-1`` for ``host:*`` (every
    port), None when the entry names none (then only the URL scheme's default
    port, 80 or 443, is allowed: D328). None: not an entry."""
    text = text.strip().lower()
    if not text or any(c.isspace() or ord(c) < 32 or c in "/@?#" for c in text):
        return None
    if text.startswith("["):  # [v6] or [v6]:port
        host, sep, rest = text[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            return None
        port_text = rest[1:] if rest else None
    elif text.count(":") == 1:  # host:port
        host, _, port_text = text.partition(":")
    else:  # a name, an IPv4 address, or a bare IPv6 address (no port)
        host, port_text = text, None
    if not host:
        return None
    if port_text is None:
        return host, None
    if port_text == "*":
        return host, -1
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        return None
    return host, int(port_text)
