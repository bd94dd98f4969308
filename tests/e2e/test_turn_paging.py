"""§8 R8-9/R8-10 as a property over the real daemon: walking the turn page by
page while obligations end and arise between pages never silently omits one
that existed when paging began, never returns one twice, keeps the order of
arising, and never shows one that has already ended.

Each example uses fresh agents on one shared daemon: creator A and speakers X
and Y in one thread, so that ``ask: [X]`` makes X the only responder. Between
pages X replies to or handles some of its pending entries, A retracts some, and
A asks X again (new obligations, which the traversal may or may not show)."""

from __future__ import annotations

import asyncio
from datetime import datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kungfud.client import Client
from tests.e2e.helpers import agent_client

EXITS = ("handle", "reply", "retract")


def ms(stamp: str) -> int:
    assert stamp.endswith("Z") and len(stamp) == len("2026-11-30T12:00:00.000Z"), stamp
    return round(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000)


async def whole_turn(c: Client) -> list[dict]:
    items: list[dict] = []
    cursor = None
    for _ in range(1000):
        page = await c.read("turn", {"cursor": cursor, "limit": 100})
        items += page["items"]
        cursor = page["cursor"]
        if cursor is None:
            return items
    raise AssertionError("turn paging did not end")


class World:
    """One example's agents and thread, and what the test knows of X's turn."""

    def __init__(self, a: Client, x: Client, y: Client, x_id: str, thread: str):
        self.a, self.x, self.y, self.x_id, self.thread = a, x, y, x_id, thread
        self.open_entries: set[int] = set()  # entries on which X's respond obligation is open
        self.ob_of_entry: dict[int, str] = {}  # learned from the turn or from `ended`

    async def ask_x(self, n: int) -> int:
        r = await self.a.act("thread.post", {"thread": self.thread, "content": {"n": n}, "ask": [self.x_id]})
        assert r["responders"] == [self.x_id], r
        self.open_entries.add(r["entry"])
        return r["entry"]

    async def end(self, entry: int, how: str) -> str:
        """End X's respond obligation on ``entry``; returns its obligation id."""
        if how == "handle":
            r = await self.x.act("thread.handle", {"thread": self.thread, "entry": entry})
        elif how == "reply":
            r = await self.x.act("thread.post", {"thread": self.thread, "content": {"re": entry}, "reply_to": entry, "ask": []})
        else:
            r = await self.a.act("thread.retract", {"thread": self.thread, "entry": entry})
        [ob] = [o for o in r["ended"] if o.startswith("ob_")]
        known = self.ob_of_entry.setdefault(entry, ob)
        assert known == ob, (entry, known, ob)
        self.open_entries.discard(entry)
        return ob

    async def close(self) -> None:
        for c in (self.a, self.x, self.y):
            await c.close()


async def setup(url: str) -> World:
    a, _ = await agent_client(url, "asker")
    x, x_id = await agent_client(url, "x")
    y, _ = await agent_client(url, "y")
    thread = (await a.act("thread.create", {"content": {"title": "paging"}}))["thread"]
    for member in (x, y):
        grant = await a.act("thread.admit", {"thread": thread, "role": "speaker"})
        await member.act("thread.join", {"token": grant["token"]})
    return World(a, x, y, x_id, thread)


#: what happens between two pages: obligations to end (an index into the open
#: ones, taken modulo their number, and the exit) and how many new asks of X
STEP = st.tuples(
    st.lists(st.tuples(st.integers(min_value=0, max_value=10**6), st.sampled_from(EXITS)), max_size=3),
    st.integers(min_value=0, max_value=3),
)


async def traverse(url: str, n0: int, limit: int, burst: bool, schedule: list) -> None:
    w = await setup(url)
    if burst:
        await asyncio.gather(*(w.ask_x(i) for i in range(n0)))
    else:
        for i in range(n0):
            await w.ask_x(i)

    start = await whole_turn(w.x)
    assert len(start) == n0 and {i["ref"]["entry"] for i in start} == w.open_entries
    initial = {i["obligation_id"]: i for i in start}
    for i in start:
        assert i["obligation"] == "respond" and i["next"] == "respond"
        assert i["ref"]["thread"] == w.thread
        w.ob_of_entry[i["ref"]["entry"]] = i["obligation_id"]

    ended: set[str] = set()  # obligation ids ended so far
    returned: list[dict] = []
    created = 0
    cursor = None
    for page_no in range(1000):
        page = await w.x.read("turn", {"cursor": cursor, "limit": limit})
        assert set(page) == {"items", "cursor"}, page
        assert len(page["items"]) <= limit, page
        for item in page["items"]:
            ob = item["obligation_id"]
            # never one that has already ended (it ended before this page was asked for)
            assert ob not in ended, (ob, "returned after it ended", page_no)
            # never twice
            assert ob not in {r["obligation_id"] for r in returned}, (ob, "returned twice", page_no)
            assert item["obligation"] == "respond" and item["ref"]["thread"] == w.thread, item
            known = w.ob_of_entry.setdefault(item["ref"]["entry"], ob)
            assert known == ob, item
            if ob in initial:
                assert item == initial[ob]  # the same item, unchanged by paging
            returned.append(item)
        cursor = page["cursor"]
        if cursor is None:
            break
        assert isinstance(cursor, str) and cursor, page
        # change the turn between pages: end some open obligations (returned or
        # not yet), and make X a responder again
        ends, asks = schedule[page_no] if page_no < len(schedule) else ([], 0)
        for pick, how in ends:
            if not w.open_entries:
                break
            entry = sorted(w.open_entries)[pick % len(w.open_entries)]
            ended.add(await w.end(entry, how))
        for _ in range(asks):
            await w.ask_x(1000 + created)
            created += 1
    else:
        raise AssertionError("the traversal did not end")

    ids = [r["obligation_id"] for r in returned]
    assert len(ids) == len(set(ids))
    # R8-10: every obligation open when paging began and not ended during it was returned
    missing = set(initial) - ended - set(ids)
    assert not missing, f"the traversal silently omitted {sorted(missing)}"
    # R8-7: in order of arising, across pages
    stamps = [ms(r["created_at"]) for r in returned]
    assert stamps == sorted(stamps), [r["created_at"] for r in returned]
    # every returned obligation is one X really held
    assert set(ids) <= set(w.ob_of_entry.values())
    # and afterwards the turn is exactly what is still open
    final = await whole_turn(w.x)
    assert {i["ref"]["entry"] for i in final} == w.open_entries
    assert all(i["obligation_id"] not in ended for i in final)
    await w.close()


@pytest.mark.rules("R8-9", "R8-10", "R8-7", "R8-6", "R8-24", "R8-25", "R8-26")
@settings(
    max_examples=15,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    n0=st.integers(min_value=5, max_value=40),
    limit=st.integers(min_value=1, max_value=5),
    burst=st.booleans(),
    schedule=st.lists(STEP, min_size=10, max_size=40),
)
def test_R8_10_complete_traversal_omits_nothing_under_concurrent_change(daemon, n0, limit, burst, schedule):
    """``burst``: the initial asks are sent concurrently, so many obligations
    share a millisecond and their order rests on the tie-break."""
    asyncio.run(asyncio.wait_for(traverse(daemon.url, n0, limit, burst, schedule), timeout=60))


@pytest.mark.rules("R8-9", "R8-10", "R8-7")
async def test_R8_10_traversal_by_one_while_returned_and_unreturned_obligations_end(daemon):
    """An adversarial schedule spelled out: pages of one; after every other page
    the item just returned ends; after every page the second unreturned one ends
    (so the cursor's neighbourhood keeps changing) and a new obligation arises."""
    w = await setup(daemon.url)
    for i in range(12):
        await w.ask_x(i)
    start = await whole_turn(w.x)
    for i in start:
        w.ob_of_entry[i["ref"]["entry"]] = i["obligation_id"]
    order = [i["obligation_id"] for i in start]
    entry_of = {i["obligation_id"]: i["ref"]["entry"] for i in start}
    ended: set[str] = set()
    returned: list[str] = []
    cursor = None
    for page_no in range(1, 100):
        page = await w.x.read("turn", {"cursor": cursor, "limit": 1})
        assert len(page["items"]) <= 1
        for item in page["items"]:
            assert item["obligation_id"] not in ended and item["obligation_id"] not in returned, item
            returned.append(item["obligation_id"])
        cursor = page["cursor"]
        if cursor is None:
            break
        if page_no % 2 and page["items"] and page["items"][-1]["ref"]["entry"] in w.open_entries:
            ended.add(await w.end(page["items"][-1]["ref"]["entry"], "handle"))
        ahead = [ob for ob in order if ob not in returned and ob not in ended]
        if len(ahead) >= 2:
            ended.add(await w.end(entry_of[ahead[1]], "retract"))
        if ahead:
            await w.ask_x(100 + page_no)
    else:
        raise AssertionError("the traversal did not end")
    survivors = [ob for ob in order if ob not in ended]
    assert len(survivors) >= 3, "the schedule should leave some initial obligations standing"
    assert set(survivors) <= set(returned), "a surviving obligation was skipped"
    assert [ob for ob in returned if ob in order] == [ob for ob in order if ob in returned]
    await w.close()
