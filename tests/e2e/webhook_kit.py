"""A webhook receiver for the tests: a small HTTP/1.1 server on 127.0.0.1 in
the test's event loop that records every POST (headers, body) and answers
with the status the test chooses (``status``), or closes the connection
without answering (``refuse``)."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Post:
    headers: dict[str, str]
    body: bytes
    status: int
    at: float = field(default_factory=time.monotonic)

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def id(self) -> str:
        return self.headers["webhook-id"]


class Receiver:
    def __init__(self) -> None:
        self.posts: list[Post] = []
        self.status = 200
        self.refuse = False  # close the connection without an answer
        self.delay = 0.0  # seconds before answering
        self.arrived = asyncio.Event()
        self._server: asyncio.AbstractServer | None = None
        self.port = 0

    async def start(self) -> "Receiver":
        self._server = await asyncio.start_server(self._conn, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()

    def ok(self) -> list[Post]:
        """The POSTs answered 2xx, in arrival order."""
        return [p for p in self.posts if 200 <= p.status < 300]

    async def wait(self, pred, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while not pred():
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"receiver: condition not met within {timeout} s; got {[p.id for p in self.posts]}")
            self.arrived.clear()
            try:
                await asyncio.wait_for(self.arrived.wait(), min(left, 0.2))
            except asyncio.TimeoutError:
                pass

    async def _conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        k, v = line.split(":", 1)
                        headers[k.strip().lower()] = v.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                if self.refuse:
                    self.posts.append(Post(headers, body, 0))
                    self.arrived.set()
                    writer.close()
                    return
                if self.delay:
                    await asyncio.sleep(self.delay)
                status = self.status
                self.posts.append(Post(headers, body, status))
                self.arrived.set()
                writer.write(f"HTTP/1.1 {status} X\r\ncontent-length: 2\r\n\r\nok".encode())
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()
