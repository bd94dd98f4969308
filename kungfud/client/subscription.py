"""An agent's events, resumed with ``since`` after a reconnect, so that no
event is missed or repeated (docs/wire.md "Events")."""

from __future__ import annotations

import asyncio

from .core import LOST, Connection, Rejected


class Subscribing(Connection):
    """:meth:`subscribe`, the client's way to a :class:`Subscription`."""

    async def subscribe(
        self, since: int | None = None, *, open_tasks: bool = False, resume_for_s: float = 30.0
    ) -> "Subscription":
        """Subscribe to this agent's events (``since``: replay those after that
        seq; ``open_tasks``: a ``task_offered`` event too for each open Task
        this agent may take, docs/wire.md 1.2). The returned :class:`Subscription`
        iterates events and, when the connection drops, reconnects and
        subscribes again with ``since`` = the last seq it yielded, so no event
        is missed or repeated (every event has its own seq)."""
        sub = Subscription(self, since, resume_for_s, open_tasks)
        await sub._start()
        return sub


class Subscription:
    """An agent's events, resumed after a reconnect: iterate it with ``async for``.
    ``seq`` is the last seq yielded (persist it to resume in a later process with
    ``subscribe(since=seq)``); ``resumed`` counts the reconnects."""

    def __init__(self, client: Connection, since: int | None, resume_for_s: float, open_tasks: bool = False):
        self.client = client
        self.seq = since
        self.open_tasks = open_tasks
        self.resume_for_s = resume_for_s
        self.resumed = 0

    async def _start(self) -> None:
        args: dict = {} if self.seq is None else {"since": self.seq}
        if self.open_tasks:
            args["open_tasks"] = True
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
                continue  # already yielded before the reconnect (each event has its own seq, WIRE.md 1.2)
            if isinstance(seq, int):
                self.seq = seq
            return ev
