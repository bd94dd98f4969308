"""What the lead and the worker share: the loop of docs/agents.md, driven by events.

Each agent keeps one small JSON file: the seq of the last event it handled (so a
restart subscribes with ``since`` and misses nothing) and its own notes. On every
batch of events it re-reads its turn, because the events only wake it: the turn
says what it owes now. An action refused with ``next: "stop"`` is work that has
finished or gone meanwhile: it is skipped, not retried.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Awaitable, Callable

from kungfud.client import Client, Rejected

URL = os.environ.get("KUNGFU_URL", "ws://127.0.0.1:8740/v1")


class State(dict):
    """The agent's notes, saved atomically (a crash leaves the old file or the new one)."""

    def __init__(self, path: str):
        self.path = Path(path)
        super().__init__(json.loads(self.path.read_text()) if self.path.exists() else {"seq": None})

    def save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self, indent=1))
        os.replace(tmp, self.path)


def log(who: str, text: str) -> None:
    print(f"{who}: {text}", flush=True)


async def unless_finished(who: str, what: str, action: Awaitable) -> dict | None:
    """Do ``action``; None when the work has finished or gone meanwhile (a rejection
    whose ``next`` is ``stop``: taken by another, already judged, deadline passed)."""
    try:
        return await action
    except Rejected as e:
        if e.next != "stop":
            raise
        log(who, f"skipped {what}: {e.code}")
        return None


Work = Callable[[Client, list[dict]], Awaitable[None]]
Done = Callable[[Client], Awaitable[bool]]


async def run(who: str, key: str, state: State, work: Work, done: Done, idle: float = 1.5) -> None:
    """Subscribe from the saved seq; call ``work(client, events)`` once at start
    (recovery: the turn is always enough) and again after each batch of events,
    saving the seq of the batch's last event once it is handled; return when
    ``done(client)`` says so after ``idle`` seconds without an event."""
    async with await Client.connect(URL, key) as c:
        sub = await c.subscribe(since=state["seq"])
        if state["seq"] is None:
            state["seq"] = sub.seq  # nothing to replay: start from the newest event
            state.save()
        events: asyncio.Queue[dict] = asyncio.Queue()

        async def read() -> None:
            async for event in sub:
                events.put_nowait(event)

        reader = asyncio.create_task(read())
        try:
            batch: list[dict] = []
            while True:
                await work(c, batch)
                if batch:
                    state["seq"] = batch[-1]["seq"]
                    state.save()
                try:
                    batch = [await asyncio.wait_for(events.get(), idle)]
                except asyncio.TimeoutError:
                    if reader.done():
                        reader.result()  # the subscription failed for good: say why
                    if await done(c):
                        return
                    batch = []
                    continue
                while not events.empty():  # everything that arrived meanwhile: one pass
                    batch.append(events.get_nowait())
        finally:
            reader.cancel()
