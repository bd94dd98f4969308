"""WIRE.md "Transport", seen from a client: where the daemon listens by default,
and what a refused websocket handshake means.

The daemon refuses an upgrade before any frame is exchanged: HTTP 401 for an
unknown agent key on the ``Authorization`` header (WIRE.md "Transport", and
after a key rotation or reset), HTTP 503 when it is at its connection limit.
Every client that opens a connection for someone else (the ``kungfu`` CLI, the
MCP bridge) turns such a status into the WIRE.md rejection its caller can act
on, with the same ``code`` and ``next``: that mapping lives here, once; each
client words the ``reason`` for its own user (which key, which setting).
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["DEFAULT_URL", "HandshakeRefusal", "refusal"]

#: The daemon's default listen address and path (config ``server.listen``/``path``).
DEFAULT_URL = "ws://127.0.0.1:8740/v1"


class HandshakeRefusal(NamedTuple):
    """A refused handshake as a WIRE.md rejection: ``code`` and ``next``, and
    ``why``, what the daemon did, worded to follow "the daemon at URL"."""

    code: str
    next: str
    why: str


_REFUSALS: dict[int, HandshakeRefusal] = {
    401: HandshakeRefusal("unauthenticated", "stop", "refused the agent key (HTTP 401)"),
    503: HandshakeRefusal("unavailable", "retry", "has too many connections (HTTP 503)"),
}


def refusal(status: int) -> HandshakeRefusal | None:
    """The rejection an HTTP status of a refused handshake stands for, or None
    when it stands for none the daemon sends (a wrong URL path gets 404, a
    proxy anything): the client reports that as failing to connect."""
    return _REFUSALS.get(status)
