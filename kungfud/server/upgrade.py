"""The HTTP request a connection opens with, answered before the websocket
upgrade (websockets' ``process_request`` hook): ``/healthz``, ``/metrics``, the
web console's files, a 404 for any other path than the websocket path, the
connection cap (503), and an ``Authorization: Bearer`` key checked at the door
(401 when unknown; else the connection starts authenticated as its agent).
"""

from __future__ import annotations

import http
from typing import TYPE_CHECKING, Any

from websockets.asyncio.server import ServerConnection

from .console import console_response

if TYPE_CHECKING:
    from .app import Server

__all__ = ["process_request"]


def process_request(server: "Server", connection: ServerConnection, request: Any) -> Any:
    """None lets the upgrade go on; anything else is the HTTP response."""
    path = request.path.split("?", 1)[0]
    if path == "/healthz":
        return connection.respond(http.HTTPStatus.OK, "ok\n")
    if path == "/metrics":
        response = connection.respond(http.HTTPStatus.OK, server.metrics.render(server))
        response.headers["Content-Type"] = "text/plain; version=0.0.4; charset=utf-8"
        return response
    if (page := console_response(request, server.cfg.server.path)) is not None:
        return page
    if path != server.cfg.server.path:
        return connection.respond(http.HTTPStatus.NOT_FOUND, f"not found; connect to {server.cfg.server.path}\n")
    if len(server.connections) >= server.cfg.server.max_connections:
        return connection.respond(http.HTTPStatus.SERVICE_UNAVAILABLE, "too many connections; retry later\n")
    auth = request.headers.get("Authorization")
    if auth is not None:
        scheme, _, key = auth.partition(" ")
        who = server.rt.authenticate(key.strip()) if scheme.lower() == "bearer" else None
        if who is None:
            return connection.respond(http.HTTPStatus.UNAUTHORIZED, "unknown agent key\n")
        connection.kungfu_agent = who.agent  # type: ignore[attr-defined]
        connection.kungfu_key_hash = who.key_hash  # type: ignore[attr-defined]
    return None
