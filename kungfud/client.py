"""Async client for kungfud: one websocket connection, pipelined requests.

    async with await Client.connect(url, key=agent_key) as c:
        mem = await c.act("memory.create", {"content": {"title": "notes"}})
        turn = await c.read("turn", {})

Actions get an idempotency key automatically; the same key is reused when a call
is retried after a lost connection, so a retry never does the work twice (L3).
Rejections raise :class:`Rejected` with ``code``, ``reason``, ``next``.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from typing import Any, AsyncIterator

import msgspec
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from .wire import ACTION_OPS

__all__ = ["Client", "Rejected", "Response", "new_key"]

_enc = msgspec.json.Encoder()
_dec = msgspec.json.Decoder()


def new_key() -> str:
    return uuid.uuid4().hex


class Rejected(Exception):
    """The daemon refused a request (WIRE.md "Failure")."""

    def __init__(self, error: dict):
        self.error = error
        self.code: str = error.get("code", "")
        self.reason: str = error.get("reason", "")
        self.next: str = error.get("next", "")
        self.hint: dict | None = error.get("hint")
        super().__init__(f"{self.code}: {self.reason} (next: {self.next})")


class Response(msgspec.Struct):
    id: Any
    ok: bool
    replayed: bool = False
    result: Any = None
    error: Any = None


class Client:
    def __init__(self, url: str, key: str | None, auth: str, open_timeout: float):
        self.url = url
        self.key = key
        self.auth = auth
        self.open_timeout = open_timeout
        self.ws: ClientConnection | None = None
        self.agent: str | None = None
        self._ids = itertools.count(1)
        self._pending: dict[Any, asyncio.Future[dict]] = {}
        self._events: asyncio.Queue[dict] = asyncio.Queue()
        self._reader: asyncio.Task | None = None

    @classmethod
    async def connect(
        cls, url: str, key: str | None = None, *, auth: str = "header", open_timeout: float = 10.0
    ) -> "Client":
        """``auth="header"`` sends ``Authorization: Bearer``; ``"hello"`` sends a
        hello frame; a client without key can only ``agent.register``."""
        c = cls(url, key, auth, open_timeout)
        await c._open()
        return c

    async def _open(self) -> None:
        headers = {"Authorization": f"Bearer {self.key}"} if self.key and self.auth == "header" else None
        self.ws = await connect(
            self.url, additional_headers=headers, compression=None, open_timeout=self.open_timeout, max_size=None
        )
        self._reader = asyncio.create_task(self._read_loop(self.ws))
        if self.key and self.auth == "hello":
            r = await self.read("hello", {"key": self.key})
            self.agent = r["agent"]

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()
        if self._reader is not None:
            await asyncio.gather(self._reader, return_exceptions=True)

    async def __aenter__(self) -> "Client":
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

    async def request(self, op: str, args: dict | None = None, *, key: str | None = None) -> dict:
        """Send one request; return the whole response object (ok or not)."""
        assert self.ws is not None
        rid = next(self._ids)
        frame: dict[str, Any] = {"id": rid, "op": op, "args": args or {}}
        if key is not None:
            frame["key"] = key
        fut: asyncio.Future[dict] = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        await self.ws.send(_enc.encode(frame).decode())
        return await fut

    async def act(self, op: str, args: dict | None = None, *, key: str | None = None, retries: int = 0) -> Any:
        """An action: keyed automatically; retried with the same key after a lost
        connection (``retries`` times). Returns ``result`` or raises Rejected."""
        key = key or new_key()
        attempt = 0
        while True:
            try:
                resp = await self.request(op, args, key=key)
                break
            except (ConnectionError, ConnectionClosed, OSError):
                if attempt >= retries:
                    raise
                attempt += 1
                await asyncio.sleep(min(1.0, 0.05 * 2**attempt))
                try:
                    await self._open()
                except OSError:
                    continue
        return _unwrap(resp)

    async def read(self, op: str, args: dict | None = None) -> Any:
        return _unwrap(await self.request(op, args))

    async def call(self, op: str, args: dict | None = None, *, key: str | None = None) -> Any:
        """``act`` for actions, ``read`` for reads."""
        if op in ACTION_OPS:
            return await self.act(op, args, key=key)
        return await self.read(op, args)

    async def events(self) -> AsyncIterator[dict]:
        while True:
            yield await self._events.get()


def _unwrap(resp: dict) -> Any:
    if resp.get("ok"):
        return resp["result"]
    raise Rejected(resp.get("error") or {})
