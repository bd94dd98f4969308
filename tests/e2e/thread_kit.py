"""Shared helpers for the black-box Thread, assignment and turn tests
(test_thread_*.py, test_turn.py): members joined through real admission grants,
rejections checked against WIRE.md "Failure", turn paging, deadline polling."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from kungfud.client import Client, new_key
from kungfud.wire import ACTION_OPS
from tests.e2e.helpers import check_failure, fake_id, register

__all__ = [
    "Member",
    "agents",
    "new_thread",
    "admit_join",
    "fails",
    "turn_items",
    "opportunity_items",
    "entry",
    "all_entries",
    "response_of",
    "poll",
    "close_all",
    "fake_id",
]


class Member:
    """A registered agent with a live client."""

    def __init__(self, client: Client, agent: str, name: str, key: str | None = None):
        self.c = client
        self.id = agent
        self.name = name
        self.key = key

    async def act(self, op: str, args: dict) -> Any:
        return await self.c.act(op, args)

    async def read(self, op: str, args: dict | None = None) -> Any:
        return await self.c.read(op, args or {})

    async def close(self) -> None:
        await self.c.close()

    def __repr__(self) -> str:
        return f"<{self.name} {self.id}>"


async def agents(url: str, *names: str) -> list[Member]:
    out = []
    for n in names:
        agent, key = await register(url, n)
        c = await Client.connect(url, key)
        c.agent = agent
        out.append(Member(c, agent, n, key))
    return out


async def admit_join(gov: Member, thread: str, who: Member, role: str = "speaker") -> dict:
    grant = await gov.act("thread.admit", {"thread": thread, "role": role})
    return await who.act("thread.join", {"token": grant["token"]})


async def new_thread(gov: Member, *others: tuple[Member, str]) -> str:
    """A thread created by ``gov`` with each (member, role) joined through a grant."""
    t = (await gov.act("thread.create", {"content": {"title": "work"}}))["thread"]
    for who, role in others:
        await admit_join(gov, t, who, role)
    return t


async def fails(who: Member | Client, op: str, args: dict, code: str) -> dict:
    """The request must be rejected with ``code`` (WIRE.md "Failure" shape checked)."""
    c = who.c if isinstance(who, Member) else who
    key = new_key() if op in ACTION_OPS else None
    return check_failure(await c.request(op, args, key=key), code)


async def turn_items(who: Member | Client, limit: int = 100) -> list[dict]:
    """Every turn item, walking all pages."""
    c = who.c if isinstance(who, Member) else who
    items: list[dict] = []
    cursor = None
    for _ in range(1000):
        page = await c.read("turn", {"cursor": cursor, "limit": limit})
        items += page["items"]
        cursor = page["cursor"]
        if cursor is None:
            return items
    raise AssertionError("turn paging did not end")


async def opportunity_items(who: Member) -> list[dict]:
    items: list[dict] = []
    cursor = None
    while True:
        page = await who.read("opportunities", {"cursor": cursor, "limit": 100})
        items += page["items"]
        cursor = page["cursor"]
        if cursor is None:
            return items


async def entry(who: Member, thread: str, n: int, full: bool = False) -> dict:
    """Entry ``n`` as ``thread.entries`` shows it to ``who`` (cursors stay opaque)."""
    [e] = [e for e in await all_entries(who, thread, full) if e["entry"] == n]
    return e


async def all_entries(who: Member, thread: str, full: bool = False) -> list[dict]:
    out: list[dict] = []
    cursor = None
    while True:
        page = await who.read("thread.entries", {"thread": thread, "cursor": cursor, "limit": 100, "full": full})
        out += page["items"]
        cursor = page["cursor"]
        if cursor is None:
            return out


def response_of(e: dict, agent: str) -> dict:
    [r] = [r for r in e["responses"] if r["agent"] == agent]
    return r


async def poll(fn, until, timeout: float = 5.0, every: float = 0.1) -> Any:
    """Call ``fn`` until ``until(value)`` or ``timeout`` seconds; returns the last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = await fn()
        if until(value) or time.monotonic() > deadline:
            return value
        # Waits for a condition, bounded: for what the daemon records on its
        # own (an expiry fact after the deadline clock wakes), with no frame of
        # the caller's to mark it.
        await asyncio.sleep(every)


async def close_all(*members: Member) -> None:
    for m in members:
        await m.close()
