"""The HTTP request a connection opens with, answered before the websocket
upgrade (websockets' ``process_request`` hook): a header the daemon reads sent
twice (400, :func:`.door.duplicated`), ``/healthz``, ``/metrics``, the
web console's files, a 404 for any other path than the websocket path, a foreign
``Host`` (421) or ``Origin`` (403) refused (:mod:`.door`), an ``Authorization:
Bearer`` key checked at the door (401 when unknown; else the connection starts
authenticated as its agent), the connection cap (503), and for a connection
without a key the budget of unauthenticated connections (503, :mod:`.door`).
"""

from __future__ import annotations

import http
from typing import TYPE_CHECKING, Any

from websockets.asyncio.server import ServerConnection

from .console import console_response
from .door import address_key, duplicated, foreign

if TYPE_CHECKING:
    from .app import Server

__all__ = ["process_request"]


def process_request(server: "Server", connection: ServerConnection, request: Any) -> Any:
    """None lets the upgrade go on; anything else is the HTTP response."""
    if (refused := duplicated(request.headers)) is not None:  # before anything reads one of them
        return connection.respond(http.HTTPStatus(refused[0]), refused[1])
    path = request.path.split("?", 1)[0]
    if path == "/healthz":
        return connection.respond(http.HTTPStatus.OK, "ok\n")
    cfg = server.cfg.server
    if (refused := foreign(request.headers, server.listen_host, cfg.allowed_hosts, cfg.allowed_origins)) is not None:
        return connection.respond(http.HTTPStatus(refused[0]), refused[1])
    if path == "/metrics":
        response = connection.respond(http.HTTPStatus.OK, server.metrics.render(server))
        # Headers.__setitem__ appends: delete respond()'s header first, so one is sent.
        del response.headers["Content-Type"]
        response.headers["Content-Type"] = "text/plain; version=0.0.4; charset=utf-8"
        return response
    if (page := console_response(request, server.cfg.server.path)) is not None:
        return page
    if path != server.cfg.server.path:
        return connection.respond(http.HTTPStatus.NOT_FOUND, f"not found; connect to {server.cfg.server.path}\n")
    auth = request.headers.get("Authorization")
    who = None
    if auth is not None:
        scheme, _, key = auth.partition(" ")
        who = server.rt.authenticate(key.strip()) if scheme.lower() == "bearer" else None
        if who is None:
            return connection.respond(http.HTTPStatus.UNAUTHORIZED, "unknown agent key\n")
    if len(server.connections) >= cfg.max_connections:
        return connection.respond(http.HTTPStatus.SERVICE_UNAVAILABLE, "too many connections; retry later\n")
    if who is None:
        # Not authenticated yet: a slot of the budget of its own (D231), given
        # back when it authenticates (hello) or when the connection is gone,
        # even one whose handshake never completes.
        slot = server.unauthenticated.take(address_key(connection.remote_address))
        if isinstance(slot, str):
            return connection.respond(http.HTTPStatus.SERVICE_UNAVAILABLE, slot + "\n")
        connection.connection_lost_waiter.add_done_callback(lambda _: slot.free())
        connection.kungfu_slot = slot  # type: ignore[attr-defined]
        return None
    connection.kungfu_agent = who.agent  # type: ignore[attr-defined]
    connection.kungfu_key_hash = who.key_hash  # type: ignore[attr-defined]
    return None
