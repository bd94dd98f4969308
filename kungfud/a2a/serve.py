"""Serving the A2A app with uvicorn on the daemon's own event loop, on a socket
the daemon bound (alone, or one of a ``--workers N`` set joined with
SO_REUSEPORT, as the websocket port is).

uvicorn rather than hypercorn: it is the ASGI server the a2a-sdk's own examples
run, it takes already-bound sockets, and its ``startup``/``shutdown`` run on a
running loop without taking the process's signal handlers (the daemon keeps
its own SIGTERM handling). HTTP/1.1 only, which is all A2A's HTTP bindings
use: parsed by httptools (C; the ``a2a`` extra installs it) when it is
installed, else by h11 (D413: httptools cut the endpoint's CPU per task by a
tenth in bench/a2a.py). ``KUNGFUD_A2A_HTTP=h11`` picks h11 (for comparing).

Loaded on the first connection (issue 38, D400): the socket listens from the
start on a plain asyncio server, and the app — uvicorn, starlette, the a2a-sdk
and protobuf, ~8 MiB of a daemon's memory — is imported when the first
connection arrives, which it then serves. A daemon nobody calls over A2A
never loads them.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import os
import socket
from typing import Any

from .card import a2a_url
from .ops import ServerOps

__all__ = ["A2AServer", "missing"]

log = logging.getLogger("kungfud.a2a")

STOP_WITHIN_S = 2.0  # open streams get this long to end when the daemon stops
NEEDS = ("uvicorn", "h11", "starlette", "a2a")  # the ``a2a`` extra (top-level names: finding one imports nothing)


def missing() -> str | None:
    """The first package of the ``a2a`` extra not installed (None: all are),
    found without importing any of them."""
    for name in NEEDS:
        try:
            if importlib.util.find_spec(name) is None:
                return name
        except (ImportError, ValueError):
            return name
    return None


class A2AServer:
    """The endpoint of one process: ``start(sock)`` serves, ``stop()`` ends."""

    def __init__(self, server: Any, cfg: Any):
        self.server = server
        self.cfg = cfg
        self._uvicorn: Any = None  # uvicorn.Server, once the first connection came
        self._listening: asyncio.AbstractServer | None = None
        self._ops: ServerOps | None = None
        self.app: Any = None  # the A2AApp, once loaded

    async def start(self, sock: socket.socket) -> tuple[str, int]:
        host, port = sock.getsockname()[:2]
        rt = self.server.rt
        if not self.cfg.a2a.public_url:
            rt.a2a_public_url = a2a_url(host, port)  # the bound port, when [a2a] listen asked for a free one
        self._ops = ServerOps(self.server)
        loop = asyncio.get_running_loop()
        self._listening = await loop.create_server(self._protocol, sock=sock)
        return host, port

    url = staticmethod(a2a_url)

    def _protocol(self) -> asyncio.Protocol:
        """A connection's protocol: uvicorn's, as its own ``startup`` makes it
        (the app loaded on the first call)."""
        if self._uvicorn is None:
            self._load()
        u = self._uvicorn
        return u.config.http_protocol_class(
            config=u.config, server_state=u.server_state, app_state=u.lifespan.state, _loop=None,
        )

    def _load(self) -> None:
        import uvicorn

        from .app import A2AApp, Settings

        rt = self.server.rt
        settings = Settings(public_url=rt.a2a_public_url, block_s=self.cfg.a2a.block_s, auto_adopt_s=self.cfg.a2a.auto_adopt_s)
        self.app = A2AApp(self._ops, settings)
        config = uvicorn.Config(
            self.app, lifespan="off", http=os.environ.get("KUNGFUD_A2A_HTTP", "auto"), ws="none", log_config=None, log_level="warning",
            access_log=False, server_header=False, date_header=False, proxy_headers=False,
            timeout_graceful_shutdown=STOP_WITHIN_S, timeout_keep_alive=30,
        )
        config.load()
        u = uvicorn.Server(config)
        # What uvicorn's own startup() does, without its signal handlers or
        # its once-a-tick main loop (the daemon's loop runs; stop() ends it):
        # the lifespan is off, and the server listening is this one's.
        u.lifespan = config.lifespan_class(config)
        u.servers = [self._listening]
        u.started = True
        self._uvicorn = u
        log.debug("A2A app loaded on its first connection")

    async def stop(self) -> None:
        if self._uvicorn is not None:
            self._uvicorn.should_exit = True
            await self._uvicorn.shutdown()
        elif self._listening is not None:
            self._listening.close()
            await self._listening.wait_closed()
