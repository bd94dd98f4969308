"""The feed on a store other nodes commit to (server/feed.py, D137), driven
deterministically: a local commit announced before another node's lower seq
is visible cannot overtake it, since delivery reads the store in seq order;
each subscriber gets only what is above its own floor, once; a page cut at
LIVE_PAGE continues on the next loop turn."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import pytest

from kungfud.nodes import Nodes, NoBus, SoleLease
from kungfud.server import feed as feed_mod
from kungfud.server.feed import Feed


class FakeStore:
    """The event feed as a store holds it: agent -> [(seq, event)], and the newest seq."""

    def __init__(self):
        self.rows: dict[str, list[tuple[int, bytes]]] = {}
        self.top = 0
        self.reads = 0

    def commit(self, seq: int, *agents: str) -> None:
        for a in agents:
            self.rows.setdefault(a, []).append((seq, b'{"event":"turn","data":{"n":%d}}' % seq))
        self.top = max(self.top, seq)

    def events_after(self, floors, limit):
        self.reads += 1
        out = {}
        for (agent, open_tasks), after in floors.items():
            assert not open_tasks
            page = [r for r in self.rows.get(agent, []) if r[0] > after]
            out[(agent, open_tasks)] = (page[:limit], len(page) > limit, page[:limit][-1][0] if page else after)
        return self.top, out


class FakeConn:
    def __init__(self, floor: int):
        self.floor = floor
        self.open_tasks = False
        self.a2a = False  # subscribe {a2a: true} (wire.md 1.3): off, as a plain subscriber
        self.closed = False
        self.outbox = asyncio.Queue()
        self.got: list[int] = []

    def send(self, data: bytes) -> None:
        self.got.append(json.loads(data)["seq"])


def _feed(store: FakeStore) -> Feed:
    rt = SimpleNamespace(nodes=Nodes(NoBus(), SoleLease(), shared=True), events_after=store.events_after)
    return Feed(rt, SimpleNamespace(events_sent=0, slow_subscribers_dropped=0))  # type: ignore[arg-type]


async def _turn() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


@pytest.mark.rules("R8-20")
async def test_a_local_commit_never_overtakes_another_nodes_lower_seq():
    store = FakeStore()
    feed = _feed(store)
    c = FakeConn(floor=9)
    feed.subscribers["ag_a"] = {c}
    # Another node commits seq 10 for ag_a; its announcement has not come yet.
    store.commit(10, "ag_a")
    # This node commits seq 11 and publishes it at once.
    store.commit(11, "ag_a")
    feed.publish([("ag_a", 11, b'{"event":"turn","data":{"n":11}}')])
    await _turn()
    assert c.got == [10, 11]
    assert c.floor == 11
    feed.wake(["ag_a"])  # the late announcement of 10: nothing again
    await _turn()
    assert c.got == [10, 11]


@pytest.mark.rules("R8-20")
async def test_each_subscriber_gets_what_is_above_its_own_floor_once_and_wakes_coalesce():
    store = FakeStore()
    feed = _feed(store)
    old, new = FakeConn(floor=0), FakeConn(floor=2)
    feed.subscribers["ag_a"] = {old, new}
    for seq in (1, 2, 3):
        store.commit(seq, "ag_a", "ag_b")
    for seq in (1, 2, 3):
        feed.wake(["ag_a"])
    feed.wake(None)
    await _turn()
    assert store.reads == 1  # one read for every wake of one loop turn
    assert old.got == [1, 2, 3] and new.got == [3]
    assert old.floor == new.floor == 3


@pytest.mark.rules("R8-20")
async def test_a_long_backlog_goes_a_page_per_turn_without_gap(monkeypatch):
    monkeypatch.setattr(feed_mod, "LIVE_PAGE", 4)
    store = FakeStore()
    feed = _feed(store)
    c = FakeConn(floor=0)
    feed.subscribers["ag_a"] = {c}
    for seq in range(1, 11):
        store.commit(seq, "ag_a")
    store.commit(11, "ag_b")
    feed.wake(["ag_a"])
    await asyncio.sleep(0)
    assert c.got == [1, 2, 3, 4] and c.floor == 4
    await _turn()
    await _turn()
    assert c.got == list(range(1, 11)) and c.floor == 11
