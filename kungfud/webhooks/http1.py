"""The webhook POST's HTTP/1.1 client (D390): one request on a kept-alive
connection per receiving address, written as one buffer, answered by a
status line and headers parsed in place; on asyncio's protocol callbacks
(no stream objects, no task per connection).

Chosen over httpx (D214) and aiohttp after measuring the delivery path
(bench/webhooks.py ``--clients``): the POST is the daemon's whole cost of a
delivery, and a general client spends most of it on what a webhook never
uses (cookies, redirects, proxies, header objects, a connection-pool state
machine). This does what the delivery needs and nothing else:

- **Connections per destination**, keyed by (scheme, checked address, port,
  TLS host name): the address :mod:`.guard` checked is the one connected to;
  for https the URL's host is the SNI name and the certificate is checked for
  it. An idle connection is kept ``IDLE_S``; at most ``idle_max`` in all.
- **The answer is bounded**: a status line and headers within ``HEAD_LIMIT``;
  a body with a ``content-length`` up to ``READ_LIMIT`` or chunked within it
  is read and the connection kept, anything else (larger, or delimited by
  the close) ends the connection once the status is known.
- **A kept connection the receiver closed meanwhile** (it said nothing: no
  byte of an answer) is replaced by a new one for the same request, once.
- Failures raise :class:`PostFailure` with the category of D329 and the detail
  for the operator's log; the caller bounds the whole exchange in time.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections import deque
from typing import Any

__all__ = ["Connections", "PostFailure", "READ_LIMIT", "HEAD_LIMIT", "IDLE_S"]

READ_LIMIT = 4096
HEAD_LIMIT = 16384
IDLE_S = 30.0


class PostFailure(Exception):
    def __init__(self, category: str, detail: str):
        super().__init__(detail)
        self.category = category


class _Conn(asyncio.Protocol):
    """One connection; one request at a time (the caller holds it)."""

    __slots__ = ("transport", "buf", "waiter", "closed", "got", "used_at")

    def __init__(self) -> None:
        self.transport: Any = None
        self.buf = bytearray()
        self.waiter: asyncio.Future | None = None
        self.closed = False
        self.got = False  # a byte of the current answer arrived
        self.used_at = 0.0

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buf += data
        self.got = True
        w = self.waiter
        if w is not None and not w.done():
            w.set_result(None)

    def eof_received(self) -> bool:
        self.connection_lost(None)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        w = self.waiter
        if w is not None and not w.done():
            w.set_result(None)

    async def more(self) -> None:
        """Wait for more bytes (or the close)."""
        if self.closed:
            raise PostFailure("protocol", "closed without a complete answer")
        self.waiter = asyncio.get_running_loop().create_future()
        try:
            await self.waiter
        finally:
            self.waiter = None

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    async def exchange(self, request: bytes) -> int:
        """Send ``request``; the answer's status. Leaves the connection
        reusable (``closed`` False) only when the whole answer was read."""
        self.got = False
        self.buf.clear()
        self.transport.write(request)
        while True:
            end = self.buf.find(b"\r\n\r\n")
            while end < 0:
                if len(self.buf) > HEAD_LIMIT:
                    raise PostFailure("protocol", "answer headers too long")
                await self.more()
                end = self.buf.find(b"\r\n\r\n")
            head = bytes(self.buf[:end])
            del self.buf[: end + 4]
            status, keep, length, chunked = _head(head)
            if 100 <= status < 200 and status != 101:
                continue  # an informational answer: the real one follows
            break
        if status in (204, 304) or 100 <= status < 200:
            length, chunked = 0, False
        if chunked:
            done = await self._chunked()
        elif length is not None and length <= READ_LIMIT:
            while len(self.buf) < length:
                await self.more()
            del self.buf[:length]
            done = True
        else:
            done = False  # larger than we read, or delimited by the close
        if not (done and keep) or self.buf:
            self.close()
        return status

    async def _chunked(self) -> bool:
        """Read a chunked body within ``READ_LIMIT``: True when all of it was."""
        pos = 0
        while True:
            nl = self.buf.find(b"\r\n", pos)
            while nl < 0:
                if len(self.buf) > READ_LIMIT + 64:
                    return False
                await self.more()
                nl = self.buf.find(b"\r\n", pos)
            try:
                size = int(bytes(self.buf[pos:nl]).split(b";", 1)[0], 16)
            except ValueError:
                raise PostFailure("protocol", "bad chunk size") from None
            if size == 0:  # the last chunk, then trailers up to an empty line
                end = self.buf.find(b"\r\n\r\n", nl - 2 if nl >= 2 else 0)
                while end < 0 or end < nl - 2:
                    if len(self.buf) > READ_LIMIT + HEAD_LIMIT:
                        return False
                    await self.more()
                    end = self.buf.find(b"\r\n\r\n", max(0, nl - 2))
                del self.buf[: end + 4]
                return True
            pos = nl + 2 + size + 2
            if pos > READ_LIMIT + 64:
                return False
            while len(self.buf) < pos:
                await self.more()


def _head(head: bytes) -> tuple[int, bool, int | None, bool]:
    """(status, keep-alive, content-length or None, chunked) of an answer's head."""
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or len(parts[1]) != 3 or not parts[1].isdigit():
        raise PostFailure("protocol", f"not an HTTP/1.1 answer ({lines[0][:40]!r})")
    status = int(parts[1])
    keep = parts[0] == b"HTTP/1.1"
    length: int | None = None
    chunked = False
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            try:
                length = int(value.strip())
            except ValueError:
                raise PostFailure("protocol", "bad content-length") from None
        elif name == b"transfer-encoding":
            chunked = value.strip().lower().endswith(b"chunked")
        elif name == b"connection":
            v = value.strip().lower()
            keep = b"close" not in v and (keep or b"keep-alive" in v)
    if chunked:
        length = None
    return status, keep, length, chunked


class Connections:
    """Kept-alive connections by destination; ``post`` sends one request."""

    def __init__(self, idle_max: int = 64, verify: ssl.SSLContext | None = None):
        self.idle: dict[tuple, deque[_Conn]] = {}
        self.idle_count = 0
        self.idle_max = idle_max
        self._tls = verify
        self.closing = False

    def tls(self) -> ssl.SSLContext:
        if self._tls is None:
            self._tls = ssl.create_default_context()  # the system's CAs; certificate and host name checked
        return self._tls

    async def post(self, scheme: str, addr: str, port: int, host: str, request: bytes) -> int:
        """Send ``request`` to ``addr``:``port`` (``host``: the TLS name);
        the answer's status. Raises :class:`PostFailure`."""
        key = (scheme, addr, port, host)
        conn = self._take(key)
        if conn is not None:
            try:
                status = await conn.exchange(request)
            except PostFailure:
                if conn.got:
                    conn.close()
                    raise
                conn.close()  # the receiver closed it while idle: a new connection, once
                conn = None
            except BaseException:
                conn.close()
                raise
            else:
                self._keep(key, conn)
                return status
        conn = await self._open(scheme, addr, port, host)
        try:
            status = await conn.exchange(request)
        except BaseException:
            conn.close()
            raise
        self._keep(key, conn)
        return status

    def _take(self, key: tuple) -> _Conn | None:
        q = self.idle.get(key)
        now = time.monotonic()
        while q:
            conn = q.pop()
            self.idle_count -= 1
            if not conn.closed and now - conn.used_at < IDLE_S:
                return conn
            conn.close()
        return None

    def _keep(self, key: tuple, conn: _Conn) -> None:
        if conn.closed or self.closing:
            conn.close()
            return
        conn.used_at = time.monotonic()
        if self.idle_count >= self.idle_max:
            self._drop_oldest()
        self.idle.setdefault(key, deque()).append(conn)
        self.idle_count += 1

    def _drop_oldest(self) -> None:
        oldest = min(self.idle, key=lambda k: self.idle[k][0].used_at if self.idle[k] else 0.0)
        q = self.idle[oldest]
        if q:
            q.popleft().close()
            self.idle_count -= 1
        if not q:
            del self.idle[oldest]

    async def _open(self, scheme: str, addr: str, port: int, host: str) -> _Conn:
        loop = asyncio.get_running_loop()
        tls = scheme == "https"
        try:
            _, conn = await loop.create_connection(
                _Conn, addr, port, ssl=self.tls() if tls else None, server_hostname=host if tls else None,
            )
        except ssl.SSLError as e:
            raise PostFailure("tls", f"{e.__class__.__name__} ({e})") from None
        except OSError as e:
            if tls and ("SSL" in str(e) or "CERTIFICATE" in str(e).upper()):
                raise PostFailure("tls", f"{e.__class__.__name__} ({e})") from None
            raise PostFailure("refused", f"cannot connect ({e.__class__.__name__}: {e})") from None
        return conn

    async def aclose(self) -> None:
        self.closing = True
        for q in self.idle.values():
            for conn in q:
                conn.close()
        self.idle.clear()
        self.idle_count = 0
