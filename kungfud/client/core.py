"""The client's core: one websocket connection, pipelined requests, the
idempotency key and the retry of a lost reply (L3, docs/agents.md).

:class:`Connection` is everything that moves frames: open and reconnect, the
reader task that matches replies to requests by id and queues event frames,
``request`` (one frame, one reply), ``act``/``read`` (the retrying calls).
What is built on it — the typed helpers, paging, the resumed subscription —
lives beside it in this package; :class:`kungfud.client.Client` puts them together.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from typing import Any, AsyncIterator, Generator, Generic, TypeVar

import msgspec
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from ..wire import ACTION_OPS
from .trace import meta as trace_meta

__all__ = ["DEFAULT", "LOST", "Connection", "Rejected", "Response", "Result", "new_key"]

_enc = msgspec.json.Encoder()
_dec = msgspec.json.Decoder()

#: What a lost reply looks like to the caller: the request may or may not have been done.
LOST = (ConnectionError, ConnectionClosed, OSError, asyncio.TimeoutError)

#: ``timeout=DEFAULT``: the client's own timeout (``None`` means no bound).
DEFAULT: Any = ...


def new_key() -> str:
    return uuid.uuid4().hex


class Rejected(Exception):
    """The daemon refused a request (docs/wire.md "Frames")."""

    def __init__(self, error: dict):
        self.error = error
        self.code: str = error.get("code", "")
        self.reason: str = error.get("reason", "")
        self.next: str = error.get("next", "")
        self.hint: dict | None = error.get("hint")
        super().__init__(f"{self.code}: {self.reason} (next: {self.next})")


class Result(dict):
    """A request's ``result``. ``replayed`` is true when it is the first receipt
    of this idempotency key returned again (nothing was done this time)."""

    replayed: bool = False


class Response(msgspec.Struct):
    id: Any
    ok: bool
    replayed: bool = False
    result: Any = None
    error: Any = None


C = TypeVar("C", bound="Connection")


class _Connect(Generic[C]):
    """What :meth:`Client.connect` returns: await it for a :class:`Client`, or use
    it directly as ``async with Client.connect(...) as c``."""

    def __init__(self, client: C):
        self._client = client
        self._opened = False

    async def _open(self) -> C:
        if not self._opened:
            await self._client._open()
            self._opened = True
        return self._client

    def __await__(self) -> Generator[Any, None, C]:
        return self._open().__await__()

    async def __aenter__(self) -> C:
        return await self._open()

    async def __aexit__(self, *exc: Any) -> None:
        await self._client.close()


class Connection:
    """One websocket connection to a daemon and the calls over it; see
    :class:`kungfud.client.Client` for the whole client."""

    def __init__(
        self, url: str, key: str | None, auth: str, open_timeout: float, timeout: float | None = 60.0, retries: int = 3
    ):
        self.url = url
        self.key = key
        self.auth = auth
        self.open_timeout = open_timeout
        self.timeout = timeout
        self.retries = retries
        self.ws: ClientConnection | None = None
        self.agent: str | None = None
        self._ids = itertools.count(1)
        self._pending: dict[Any, asyncio.Future[dict]] = {}
        self._events: asyncio.Queue[dict] = asyncio.Queue()
        self._reader: asyncio.Task | None = None
        self._reopen = asyncio.Lock()
        self._closed = False

    @classmethod
    def connect(
        cls: type[C],
        url: str,
        key: str | None = None,
        *,
        auth: str = "header",
        open_timeout: float = 10.0,
        timeout: float | None = 60.0,
        retries: int = 3,
    ) -> _Connect[C]:
        """Connect as the agent of ``key``. ``auth="header"`` sends
        ``Authorization: Bearer``; ``"hello"`` sends a hello frame; a client
        without key can only ``agent.register``. ``timeout`` bounds the wait for
        each reply (None: no bound); ``retries`` is how often a call whose reply
        was lost, or that was refused with ``next: "retry"``, is sent again."""
        return _Connect(cls(url, key, auth, open_timeout, timeout, retries))

    async def _open(self) -> None:
        headers = {"Authorization": f"Bearer {self.key}"} if self.key and self.auth == "header" else None
        self.ws = await connect(
            self.url, additional_headers=headers, compression=None, open_timeout=self.open_timeout, max_size=None
        )
        self._reader = asyncio.create_task(self._read_loop(self.ws))
        if self.key and self.auth == "hello":
            r = await self.read("hello", {"key": self.key}, retries=0)
            self.agent = r["agent"]

    def _alive(self) -> bool:
        return self._reader is not None and not self._reader.done()

    async def _reconnect(self) -> None:
        """Open a new connection unless another caller already did."""
        async with self._reopen:
            if self._closed:
                raise ConnectionError("the client is closed")
            if not self._alive():
                await self._open()

    async def close(self) -> None:
        self._closed = True
        if self.ws is not None:
            await self.ws.close()
        if self._reader is not None:
            await asyncio.gather(self._reader, return_exceptions=True)

    async def __aenter__(self: C) -> C:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def _read_loop(self, ws: ClientConnection) -> None:
        try:
            async for frame in ws:
                msg = _dec.decode(frame)
                if "event" in msg:
                    self._events.put_nowait(msg)
                    continue
                fut = self._pending.pop(msg.get("id"), None)
                if fut is not None and not fut.done():
                    fut.set_result(msg)
                elif msg.get("id") is None:
                    # A reply to a frame whose id could not be read: give it to
                    # the oldest waiter so raw-frame tests can observe it.
                    for rid, f in list(self._pending.items()):
                        if not f.done():
                            self._pending.pop(rid)
                            f.set_result(msg)
                            break
        except ConnectionClosed:
            pass
        finally:
            for fut in self._pending.values():
                if not fut.done():
                    fut.set_exception(ConnectionError("connection closed before the reply arrived"))
            self._pending.clear()

    async def send_raw(self, frame: str | bytes, req_id: Any = None) -> dict:
        """Send any frame and wait for the reply carrying ``req_id`` (None for
        frames whose id the daemon cannot read)."""
        assert self.ws is not None
        fut: asyncio.Future[dict] = asyncio.get_running_loop().create_future()
        self._pending[req_id if req_id is not None else object()] = fut
        await self.ws.send(frame)
        return await fut

    async def request(
        self, op: str, args: dict | None = None, *, key: str | None = None, timeout: Any = DEFAULT
    ) -> dict:
        """Send one request; return the whole response object (ok or not).
        Raises ``TimeoutError`` when no reply comes within ``timeout`` (default:
        the client's), and ``ConnectionError`` when the connection is lost."""
        if not self._alive():
            raise ConnectionError("not connected")
        assert self.ws is not None
        rid = next(self._ids)
        frame: dict[str, Any] = {"id": rid, "op": op, "args": args or {}}
        if key is not None:
            frame["key"] = key
        if (meta := trace_meta()) is not None:  # WIRE.md 1.3: the caller's trace context
            frame["meta"] = meta
        fut: asyncio.Future[dict] = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        wait = self.timeout if timeout is DEFAULT else timeout
        try:
            await self.ws.send(_enc.encode(frame).decode())
            return await asyncio.wait_for(fut, wait)
        finally:
            self._pending.pop(rid, None)

    async def _call(self, op: str, args: dict | None, key: str | None, retries: int | None, timeout: Any) -> Result:
        """One call, sent again with the same key after a lost reply or a
        ``next: "retry"`` rejection, up to ``retries`` times (docs/agents.md)."""
        retries = self.retries if retries is None else retries
        attempt = 0
        while True:
            try:
                if not self._alive():
                    await self._reconnect()
                resp = await self.request(op, args, key=key, timeout=timeout)
                if resp.get("ok") or (resp.get("error") or {}).get("next") != "retry" or attempt >= retries:
                    return _unwrap(resp)
            except LOST:
                if attempt >= retries or self._closed:
                    raise
            attempt += 1
            await asyncio.sleep(min(2.0, 0.05 * 2**attempt))

    async def act(
        self, op: str, args: dict | None = None, *, key: str | None = None, retries: int | None = None,
        timeout: Any = DEFAULT,
    ) -> Result:
        """An action: keyed automatically (or with ``key``) and sent again with
        the same key after a lost reply. Returns the ``result`` (a :class:`Result`,
        ``replayed`` set) or raises :class:`Rejected`."""
        return await self._call(op, args, key or new_key(), retries, timeout)

    async def read(
        self, op: str, args: dict | None = None, *, retries: int | None = None, timeout: Any = DEFAULT
    ) -> Result:
        """A read: sent again after a lost reply (it changes nothing)."""
        return await self._call(op, args, None, retries, timeout)

    async def call(self, op: str, args: dict | None = None, *, key: str | None = None) -> Result:
        """``act`` for actions, ``read`` for reads."""
        if op in ACTION_OPS:
            return await self.act(op, args, key=key)
        return await self.read(op, args)

    async def events(self) -> AsyncIterator[dict]:
        """Every event frame this connection receives, as it comes (send
        ``subscribe`` yourself). :meth:`subscribe` also resumes after a reconnect."""
        while True:
            yield await self._events.get()


def _unwrap(resp: dict) -> Result:
    if resp.get("ok"):
        result = resp["result"]
        if isinstance(result, dict):
            out = Result(result)
            out.replayed = bool(resp.get("replayed"))
            return out
        return result
    raise Rejected(resp.get("error") or {})
