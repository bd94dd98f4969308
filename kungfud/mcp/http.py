"""``kungfud mcp --http``: the MCP tools over Streamable HTTP, for any number of agents.

The same tools, results and errors as the stdio bridge (:mod:`kungfud.mcp`),
served at ``/mcp`` (WIRE.md "MCP over HTTP"). Each HTTP request acts as the agent
whose key it sends as ``Authorization: Bearer <key>``:

- no ``Authorization`` header: only ``agent_register`` is listed, and every other
  tool is an ``unauthenticated`` tool error whose hint is ``agent_register``;
- a key the daemon refuses, or a header that is not ``Bearer <key>``: HTTP 401
  with ``WWW-Authenticate: Bearer`` and a WIRE.md error object as the body.

Every agent key seen gets its own daemon connection (a :class:`~kungfud.mcp.bridge.McpBridge`
in a :class:`~kungfud.mcp.bridge.BridgePool`), closed after 10 minutes without a
request. The MCP transport is stateless (no MCP session to steal or to expire) and
answers with JSON, so a plain ``curl`` can use it too. Needs the ``mcp`` SDK 2.x,
which brings Starlette and uvicorn.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import socket
import sys
import time
from typing import Any

from websockets.exceptions import InvalidStatus

from .bridge import McpBridge, BridgePool
from .schemas import DEFAULT_TOOLSET, TOOLSETS
from .serve import build_server

__all__ = ["PATH", "serve_http", "bearer_key", "AuthGate", "parse_listen", "TOOLS_PARAM", "chosen_toolset"]

log = logging.getLogger("kungfud.mcp")

PATH = "/mcp"

#: A header that is there but is not ``Bearer <key>``: refused like a bad key.
_MALFORMED = object()

#: The query parameter by which a request chooses its tool set: ``/mcp?tools=worker``.
TOOLS_PARAM = "tools"
#: The tool set the request being served chose (set by :class:`AuthGate`; the
#: SDK serves each stateless request in a task started from the request's own
#: context, so its ``initialize`` reads the request's set here).
REQUEST_TOOLSET: contextvars.ContextVar[str | None] = contextvars.ContextVar("kungfud_mcp_toolset", default=None)


def chosen_toolset(query: str | bytes) -> str | None:
    """The tool set a request's query string names (None: the server's own);
    ValueError for a name that is not a tool set."""
    from urllib.parse import parse_qs

    if isinstance(query, bytes):
        query = query.decode("latin-1")
    values = parse_qs(query).get(TOOLS_PARAM)
    if not values:
        return None
    if values[-1] not in TOOLSETS:
        raise ValueError(
            f"`{TOOLS_PARAM}` must name a tool set: {', '.join(sorted(TOOLSETS))}; not `{values[-1][:64]}`"
        )
    return values[-1]


def bearer_key(headers: Any) -> Any:
    """The agent key of a request: ``None`` without an ``Authorization`` header,
    :data:`_MALFORMED` for a header that is not ``Bearer <key>``."""
    value = headers.get("authorization")
    if value is None:
        return None
    scheme, _, key = value.strip().partition(" ")
    key = key.strip()
    if scheme.lower() != "bearer" or not key or len(key) > 256 or not key.isprintable():
        return _MALFORMED
    return key


def _unauthorized(reason: str) -> tuple[dict[str, Any], list[tuple[bytes, bytes]], bytes]:
    body = json.dumps({"error": {"code": "unauthenticated", "reason": reason, "next": "stop"}}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"www-authenticate", b'Bearer realm="kungfud"'),
        (b"content-length", str(len(body)).encode()),
    ]
    return {"type": "http.response.start", "status": 401, "headers": headers}, headers, body


class AuthGate:
    """ASGI middleware in front of the SDK's Streamable HTTP app: answers HTTP 401
    for a key the daemon refuses before any MCP message is read. A key is checked by
    opening (or finding open) that agent's daemon connection, so a key that stops
    working (rotated, reset) is refused from then on."""

    def __init__(self, app: Any, pool: BridgePool, path: str = PATH, reap_every_s: float = 60.0):
        self.app = app
        self.pool = pool
        self.path = path
        self.reap_every_s = reap_every_s
        self._reaped = time.monotonic()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"].rstrip("/") != self.path:
            await self.app(scope, receive, send)
            return
        if time.monotonic() - self._reaped > self.reap_every_s:
            self._reaped = time.monotonic()
            await self.pool.reap()
        try:
            REQUEST_TOOLSET.set(chosen_toolset(scope.get("query_string", b"")))
        except ValueError as e:
            body = json.dumps({"error": {"code": "bad_request", "reason": str(e), "next": "revise"}}).encode()
            await send({"type": "http.response.start", "status": 400, "headers": [
                (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if sum(k.lower() == b"authorization" for k, _ in scope["headers"]) > 1:  # which one would count?
            body = json.dumps({"error": {"code": "bad_request", "next": "revise",
                                         "reason": "the Authorization header may appear once"}}).encode()
            await send({"type": "http.response.start", "status": 400, "headers": [
                (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        key = bearer_key(headers)
        if key is _MALFORMED:
            await self._refuse(send, "the Authorization header must be `Bearer <agent key>`")
            return
        if key is not None:
            bridge = self.pool.get(key)
            try:
                if await bridge.key_refused():  # D237: also on an open connection
                    await self.pool.forget(key)
                    await self._refuse(send, "the daemon refused this agent key")
                    return
            except InvalidStatus as e:
                if e.response.status_code == 401:
                    await self.pool.forget(key)
                    await self._refuse(send, "the daemon refused this agent key")
                    return
                # any other refusal is reported by the tool call (unavailable, retry)
            except Exception as e:  # daemon down: the tool call answers unavailable/retry
                log.info("could not reach the daemon to check a key: %s", e)
        await self.app(scope, receive, send)

    async def _refuse(self, send: Any, reason: str) -> None:
        start, _, body = _unauthorized(reason)
        await send(start)
        await send({"type": "http.response.body", "body": body})


def parse_listen(listen: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:8741`` for IPv6)."""
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or not host or int(port) > 65535:
        raise ValueError(f"--listen must be HOST:PORT, got {listen!r}")
    return host.strip("[]"), int(port)


def _bridge_of(pool: BridgePool) -> Any:
    def bridge_for(ctx: Any) -> McpBridge:
        request = getattr(ctx, "request", None)
        key = bearer_key(request.headers) if request is not None else None
        return pool.get(None if key is _MALFORMED else key)

    return bridge_for


def _toolset_of(ctx: Any) -> str | None:
    request = getattr(ctx, "request", None)
    if request is None:
        return None
    try:
        return chosen_toolset(request.url.query)
    except ValueError:  # refused with HTTP 400 before it got here
        return None


async def _run(url: str, host: str, port: int, timeout: float, toolset: str = DEFAULT_TOOLSET) -> None:
    import uvicorn

    pool = BridgePool(url, timeout, toolset=toolset)
    server = build_server(
        _bridge_of(pool), http=True, toolset=toolset, toolset_for=_toolset_of, instructions_for=REQUEST_TOOLSET.get
    )
    app = server.streamable_http_app(streamable_http_path=PATH, json_response=True, stateless_http=True, host=host)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    config = uvicorn.Config(AuthGate(app, pool), log_level="warning", lifespan="on", access_log=False)
    web = uvicorn.Server(config)
    print(f"kungfud mcp listening on http://{shown}:{bound}{PATH}", flush=True)
    try:
        await web.serve(sockets=[sock])
    finally:
        await pool.close()
        sock.close()


def serve_http(url: str, listen: str, timeout: float = 60.0, toolset: str = DEFAULT_TOOLSET) -> int:
    """Serve until SIGINT/SIGTERM. Returns the process exit code."""
    try:
        import uvicorn  # noqa: F401
        from mcp.server.lowlevel import Server
    except ImportError:
        print("kungfud mcp --http needs the MCP SDK 2.x: pip install -e '.[mcp]'", file=sys.stderr)
        return 2
    if not hasattr(Server, "streamable_http_app"):
        print("kungfud mcp --http needs the MCP SDK 2.x (this one has no Streamable HTTP app)", file=sys.stderr)
        return 2
    try:
        host, port = parse_listen(listen)
    except ValueError as e:
        print(f"kungfud mcp: {e}", file=sys.stderr)
        return 2
    try:
        asyncio.run(_run(url, host, port, timeout, toolset))
    except OSError as e:
        print(f"kungfud mcp: cannot listen on {listen}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0
