"""Serving the A2A app with uvicorn on the daemon's own event loop, on a socket
the daemon bound (alone, or one of a ``--workers N`` set joined with
SO_REUSEPORT, as the websocket port is).

uvicorn rather than hypercorn: it is the ASGI server the a2a-sdk's own examples
run, it takes already-bound sockets, and its ``startup``/``shutdown`` run on a
running loop without taking the process's signal handlers (the daemon keeps
its own SIGTERM handling). HTTP/1.1 only (h11), which is all A2A's HTTP
bindings use.
"""

from __future__ import annotations

import logging
import socket
from typing import Any

import uvicorn

from .app import A2AApp, Settings
from .card import a2a_url
from .ops import ServerOps

__all__ = ["A2AServer"]

log = logging.getLogger("kungfud.a2a")

STOP_WITHIN_S = 2.0  # open streams get this long to end when the daemon stops


class A2AServer:
    """The endpoint of one process: ``start(sock)`` serves, ``stop()`` ends."""

    def __init__(self, server: Any, cfg: Any):
        self.server = server
        self.cfg = cfg
        self._uvicorn: uvicorn.Server | None = None
        self.app: A2AApp | None = None

    async def start(self, sock: socket.socket) -> tuple[str, int]:
        host, port = sock.getsockname()[:2]
        rt = self.server.rt
        if not self.cfg.a2a.public_url:
            rt.a2a_public_url = a2a_url(host, port)  # the bound port, when [a2a] listen asked for a free one
        settings = Settings(public_url=rt.a2a_public_url, block_s=self.cfg.a2a.block_s, auto_adopt_s=self.cfg.a2a.auto_adopt_s)
        self.app = A2AApp(ServerOps(self.server), settings)
        config = uvicorn.Config(
            self.app, lifespan="off", http="h11", ws="none", log_config=None, log_level="warning",
            access_log=False, server_header=False, date_header=False, proxy_headers=False,
            timeout_graceful_shutdown=STOP_WITHIN_S, timeout_keep_alive=30,
        )
        config.load()
        self._uvicorn = uvicorn.Server(config)
        # What uvicorn's own serve() does before startup(), without its signal
        # handlers or its once-a-tick main loop (the daemon's loop runs; stop() ends it).
        self._uvicorn.lifespan = config.lifespan_class(config)
        await self._uvicorn.startup(sockets=[sock])
        return host, port

    url = staticmethod(a2a_url)

    async def stop(self) -> None:
        if self._uvicorn is not None:
            self._uvicorn.should_exit = True
            await self._uvicorn.shutdown()
