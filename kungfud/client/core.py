"""Async client for kungfud: one websocket connection, pipelined requests.

    async with Client.connect(url, key) as c:
        thread = (await c.create_thread(title="design review"))["thread"]
        await c.post(thread, "ready for review?", ask=[bob])
        for item in (await c.turn())["items"]:
            ...

Every result is a :class:`Result` (a dict) whose ``replayed`` tells whether it
is the first receipt of its idempotency key returned again. Actions get an
idempotency key automatically; after a lost connection, a timeout or a
rejection with ``next: "retry"`` the call is sent again with the **same** key
(``retries`` times, default 3), so it is done at most once (L3, docs/agents.md).
Reads are retried the same way (they change nothing). Rejections raise
:class:`Rejected` with ``code``, ``reason``, ``next``, ``hint``.

Also: typed helpers for the common ops (:meth:`Client.turn`, :meth:`Client.post`,
:meth:`Client.take`, :meth:`Client.deliver`, :meth:`Client.judge`, …), a page
iterator (:meth:`Client.items`), and a subscription that resumes with ``since``
after a reconnect (:meth:`Client.subscribe`). ``async with await
Client.connect(...)`` and ``c = await Client.connect(...)`` work as before.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from typing import Any, AsyncIterator, Generator, Iterable

import msgspec
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from ..wire import ACTION_OPS

__all__ = ["Client", "Rejected", "Response", "Result", "Subscription", "new_key"]

_enc = msgspec.json.Encoder()
_dec = msgspec.json.Decoder()

#: What a lost reply looks like to the caller: the request may or may not have been done.
LOST = (ConnectionError, ConnectionClosed, OSError, asyncio.TimeoutError)

#: ``timeout=DEFAULT``: the client's own timeout (``None`` means no bound).
DEFAULT: Any = ...


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


class _Connect:
    """What :meth:`Client.connect` returns: await it for a :class:`Client`, or use
    it directly as ``async with Client.connect(...) as c``."""

    def __init__(self, client: "Client"):
        self._client = client
        self._opened = False

    async def _open(self) -> "Client":
        if not self._opened:
            await self._client._open()
            self._opened = True
        return self._client

    def __await__(self) -> Generator[Any, None, "Client"]:
        return self._open().__await__()

    async def __aenter__(self) -> "Client":
        return await self._open()

    async def __aexit__(self, *exc: Any) -> None:
        await self._client.close()


class Client:
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
        cls,
        url: str,
        key: str | None = None,
        *,
        auth: str = "header",
        open_timeout: float = 10.0,
        timeout: float | None = 60.0,
        retries: int = 3,
    ) -> _Connect:
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

    # --- pages ------------------------------------------------------------------------

    async def pages(self, op: str, args: dict | None = None) -> AsyncIterator[Result]:
        """Every page of a paged read, following ``cursor`` until it is null."""
        args = dict(args or {})
        while True:
            page = await self.read(op, args)
            yield page
            cursor = page.get("cursor")
            if cursor is None:
                return
            if cursor == args.get("cursor") and not page.get("items"):
                raise RuntimeError(f"{op} returned the same cursor without items: stopping instead of looping")
            args["cursor"] = cursor

    async def items(self, op: str, args: dict | None = None) -> AsyncIterator[Any]:
        """Every item of a paged read (``turn``, ``thread.entries``,
        ``task.list``, …), page after page."""
        async for page in self.pages(op, args):
            for item in page.get("items", []):
                yield item

    # --- subscription -----------------------------------------------------------------

    async def subscribe(self, since: int | None = None, *, resume_for_s: float = 30.0) -> "Subscription":
        """Subscribe to this agent's events (``since``: replay those after that
        seq). The returned :class:`Subscription` iterates events and, when the
        connection drops, reconnects and subscribes again with ``since`` = the
        last seq it yielded, so no event is missed or repeated."""
        sub = Subscription(self, since, resume_for_s)
        await sub._start()
        return sub

    # --- typed helpers ------------------------------------------------------------------

    async def register(self, name: str, *, key: str | None = None, **content: Any) -> Result:
        """``agent.register``: ``{agent, key}`` (the key is shown once)."""
        return await self.act("agent.register", {"content": {"name": name, **content}}, key=key)

    async def whoami(self) -> Result:
        return await self.read("agent.whoami")

    async def turn(self, *, limit: int = 50, cursor: str | None = None) -> Result:
        """One page of the turn: ``{items, cursor}``. :meth:`items` ("turn")
        walks every page."""
        return await self.read("turn", _args(limit=limit, cursor=cursor))

    async def opportunities(self, *, limit: int = 50, cursor: str | None = None) -> Result:
        return await self.read("opportunities", _args(limit=limit, cursor=cursor))

    async def create_thread(self, title: str | None = None, *, content: dict | None = None, key: str | None = None) -> Result:
        """``thread.create``; ``title`` is shorthand for ``content={"title": title}``."""
        if title is not None:
            content = {**(content or {}), "title": title}
        return await self.act("thread.create", _args(content=content), key=key)

    async def admit(self, thread: str, role: str = "speaker", *, key: str | None = None) -> Result:
        return await self.act("thread.admit", {"thread": thread, "role": role}, key=key)

    async def join(self, token: str, *, key: str | None = None) -> Result:
        return await self.act("thread.join", {"token": token}, key=key)

    async def post(
        self,
        thread: str,
        text: str | None = None,
        *,
        content: dict | None = None,
        memory: str | dict | None = None,
        reply_to: int | None = None,
        ask: Iterable[str] | None = None,
        task: str | None = None,
        assign: dict | None = None,
        key: str | None = None,
    ) -> Result:
        """``thread.post`` with exactly one of ``text`` (content ``{text}``),
        ``content`` or ``memory`` (an id, or ``{memory, version}``). ``ask=[]``
        asks nobody: use it to end an exchange (a reply without ``ask`` asks the
        author it answers)."""
        pin = _pin("post", text, content, memory)
        args = _args(thread=thread, reply_to=reply_to, task=task, assign=assign, **pin)
        if ask is not None:
            args["ask"] = list(ask)
        return await self.act("thread.post", args, key=key)

    async def handle(self, thread: str, entry: int, note: str | None = None, *, key: str | None = None) -> Result:
        """``thread.handle``: end a request to respond without replying."""
        content = {"note": note} if note is not None else None
        return await self.act("thread.handle", _args(thread=thread, entry=entry, content=content), key=key)

    async def take(
        self, ref: str, text: str | None = None, *, content: dict | None = None, memory: str | dict | None = None,
        key: str | None = None,
    ) -> Result:
        """Take an assignment (``as_…``) or a Task (``tk_…``); with ``text``,
        ``content`` or ``memory``, deliver in the same action."""
        op, field = _by_prefix(ref, {"as_": ("assignment.take", "assignment"), "tk_": ("task.take", "task")}, "take")
        args: dict[str, Any] = {field: ref}
        if (text, content, memory) != (None, None, None):
            args["deliver"] = _pin("take", text, content, memory)
        return await self.act(op, args, key=key)

    async def deliver(
        self, ref: str, text: str | None = None, *, content: dict | None = None, memory: str | dict | None = None,
        key: str | None = None,
    ) -> Result:
        """Deliver on an assignment (``as_…``) or an engagement (``en_…``):
        exactly one of ``text`` (content ``{text}``), ``content`` or ``memory``."""
        op, field = _by_prefix(
            ref, {"as_": ("assignment.deliver", "assignment"), "en_": ("task.deliver", "engagement")}, "deliver"
        )
        return await self.act(op, {field: ref, **_pin("deliver", text, content, memory)}, key=key)

    async def judge(self, ref: str, verdict: str, reason: str | None = None, *, key: str | None = None) -> Result:
        """Adopt or reject the delivery of an assignment (``as_…``) or an
        engagement (``en_…``); a rejection needs a ``reason``."""
        if verdict not in ("adopt", "reject"):
            raise ValueError(f"verdict must be 'adopt' or 'reject', not {verdict!r}")
        if verdict == "reject" and not reason:
            raise ValueError("a rejection needs a reason")
        op, field = _by_prefix(ref, {"as_": ("assignment.judge", "assignment"), "en_": ("task.judge", "engagement")}, "judge")
        args: dict[str, Any] = {field: ref, "verdict": verdict}
        if reason is not None:
            args["content"] = {"reason": reason}
        return await self.act(op, args, key=key)

    async def get(self, ref: str) -> Result:
        """The working set of a Thread, assignment, Task, engagement or Memory, by its id."""
        op, field = _by_prefix(ref, _GETS, "get")
        return await self.read(op, {field: ref})


_GETS = {
    "th_": ("thread.get", "thread"),
    "as_": ("assignment.get", "assignment"),
    "tk_": ("task.get", "task"),
    "en_": ("engagement.get", "engagement"),
    "me_": ("memory.get", "memory"),
}
_KINDS = {"th_": "a Thread", "as_": "an assignment", "tk_": "a Task", "en_": "an engagement", "me_": "a Memory"}


def _by_prefix(ref: str, table: dict[str, tuple[str, str]], what: str) -> tuple[str, str]:
    if isinstance(ref, str) and ref[:3] in table:
        return table[ref[:3]]
    kinds = " or ".join(f"{_KINDS[p]} ({p}…)" for p in table)
    raise ValueError(f"{what} takes the id of {kinds}, not {str(ref)[:64]!r}")


def _args(**kw: Any) -> dict[str, Any]:
    return {k: v for k, v in kw.items() if v is not None}


def _pin(what: str, text: str | None, content: dict | None, memory: str | dict | None) -> dict[str, Any]:
    """Exactly one of text, content or memory, as wire fields."""
    given = [n for n, v in (("text", text), ("content", content), ("memory", memory)) if v is not None]
    if len(given) != 1:
        raise ValueError(f"{what} needs exactly one of text, content or memory (got {', '.join(given) or 'none'})")
    if text is not None:
        return {"content": {"text": text}}
    if content is not None:
        return {"content": content}
    return {"memory": {"memory": memory} if isinstance(memory, str) else memory}


def _unwrap(resp: dict) -> Result:
    if resp.get("ok"):
        result = resp["result"]
        if isinstance(result, dict):
            out = Result(result)
            out.replayed = bool(resp.get("replayed"))
            return out
        return result
    raise Rejected(resp.get("error") or {})


class Subscription:
    """An agent's events, resumed after a reconnect: iterate it with ``async for``.
    ``seq`` is the last seq yielded (persist it to resume in a later process with
    ``subscribe(since=seq)``); ``resumed`` counts the reconnects."""

    def __init__(self, client: Client, since: int | None, resume_for_s: float):
        self.client = client
        self.seq = since
        self.resume_for_s = resume_for_s
        self.resumed = 0

    async def _start(self) -> None:
        args = {} if self.seq is None else {"since": self.seq}
        r = await self.client.read("subscribe", args, retries=0)
        if self.seq is None:
            self.seq = r.get("seq")

    async def _resume(self) -> None:
        deadline = asyncio.get_running_loop().time() + self.resume_for_s
        attempt = 0
        while True:
            try:
                await self.client._reconnect()
                await self._start()
                self.resumed += 1
                return
            except (*LOST, Rejected):
                attempt += 1
                if asyncio.get_running_loop().time() > deadline or self.client._closed:
                    raise
                await asyncio.sleep(min(2.0, 0.05 * 2**attempt))

    def __aiter__(self) -> "Subscription":
        return self

    async def __anext__(self) -> dict:
        c = self.client
        while True:
            if not c._events.empty():
                ev = c._events.get_nowait()
            elif not c._alive():
                if c._closed:
                    raise StopAsyncIteration
                await self._resume()
                continue
            else:
                getter = asyncio.ensure_future(c._events.get())
                assert c._reader is not None
                done, _ = await asyncio.wait({getter, c._reader}, return_when=asyncio.FIRST_COMPLETED)
                if getter not in done:
                    getter.cancel()
                    await asyncio.gather(getter, return_exceptions=True)
                    continue
                ev = getter.result()
            seq = ev.get("seq")
            if isinstance(seq, int) and self.seq is not None and seq <= self.seq:
                continue  # already yielded before the reconnect
            if isinstance(seq, int):
                self.seq = seq
            return ev
