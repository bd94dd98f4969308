"""``last_seen_at`` is the deployment's, not one node's (WIRE.md "Operating a
deployment", ``admin.agent.list``: ``last_seen_at?``; docs/decisions.md D32
amended by D175–D177): on two LMDB workers (``serve --workers 2``) and on two
PostgreSQL nodes, an agent that talks only to node A shows ``last_seen_at``
in ``admin.agent.list`` read through node B within a bounded time, never
earlier than when A saw it; an agent never seen shows none on either node;
and a node that starts after the agent was seen learns it from the others
(its hello, D177)."""

from __future__ import annotations

import asyncio
import time

import pytest

from kungfud.client import Client
from kungfud.conventions import rfc3339
from tests.e2e.helpers import register
from tests.pg import pg_server  # noqa: F401 (fixture)

KINDS = ["lmdb2", "pg2"]
WITHIN_S = 15.0  # a share is at most a second behind plus the bus; generous under load


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


async def _row(admin: Client, agent: str) -> dict:
    items = (await admin.read("admin.agent.list", {}))["items"]
    (row,) = [it for it in items if it["agent"] == agent]
    return row


async def _seen_through(url: str, admin_key: str, agent: str, within_s: float = WITHIN_S) -> dict | None:
    """The agent's row read through ``url`` once it shows ``last_seen_at``
    (polled until ``within_s`` passed; None if it never did)."""
    async with await Client.connect(url, admin_key) as admin:
        deadline = time.monotonic() + within_s
        while True:
            row = await _row(admin, agent)
            if "last_seen_at" in row or time.monotonic() > deadline:
                return row if "last_seen_at" in row else None
            await asyncio.sleep(0.1)


@pytest.mark.parametrize("kind", KINDS)
async def test_an_agent_seen_only_by_node_a_shows_last_seen_at_through_node_b(make_cluster, kind):
    c = make_cluster(kind)
    a, b = c.urls
    worker, key = await register(a, "worker")
    unseen, _ = await register(a, "unseen")  # registered, never authenticated: never seen
    before = _wall_ms()
    async with await Client.connect(a, key) as w:  # node A sees it: on upgrade and on each request
        await w.read("agent.whoami")
        row = await _seen_through(b, c.admin_key, worker)
    assert row is not None, f"node B never showed when node A saw {worker}"
    assert row["last_seen_at"] >= rfc3339(before)  # not earlier than node A saw it
    assert row["last_seen_at"] <= rfc3339(_wall_ms())
    # The shares that carried it have been sent: the agent never seen is still
    # without last_seen_at through either node.
    for url in (a, b):
        async with await Client.connect(url, c.admin_key) as admin:
            assert "last_seen_at" not in await _row(admin, unseen)


@pytest.mark.parametrize("kind", KINDS)
async def test_later_sightings_move_it_forward_on_the_other_node(make_cluster, kind):
    """Merged by max: a later sighting on A replaces the earlier one on B."""
    c = make_cluster(kind)
    a, b = c.urls
    worker, key = await register(a, "worker")
    async with await Client.connect(a, key) as w:
        await w.read("agent.whoami")
    first = await _seen_through(b, c.admin_key, worker)
    assert first is not None
    await asyncio.sleep(0.05)  # the next sighting is in a later millisecond
    again = _wall_ms()
    async with await Client.connect(a, key) as w:
        await w.read("agent.whoami")
    async with await Client.connect(b, c.admin_key) as admin:
        deadline = time.monotonic() + WITHIN_S
        while (row := await _row(admin, worker))["last_seen_at"] < rfc3339(again) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
    assert row["last_seen_at"] >= rfc3339(again) > first["last_seen_at"]


@pytest.mark.parametrize("kind", KINDS)
async def test_a_node_started_after_the_sighting_learns_it_from_the_others(make_cluster, kind):
    """D177: a node that (re)starts asks the others for their maps (hello)."""
    c = make_cluster(kind)
    a = c.urls[0]
    worker, key = await register(a, "worker")
    before = _wall_ms()
    async with await Client.connect(a, key) as w:
        await w.read("agent.whoami")
    assert await _seen_through(c.urls[1], c.admin_key, worker) is not None  # B knew it
    old = c.kill_node(1)  # node B forgets everything (kill -9) ...
    c.wait_node(1, old)  # ... and starts again; the agent is not seen meanwhile
    row = await _seen_through(c.urls[1], c.admin_key, worker)
    assert row is not None, "the restarted node never learnt what node A saw before it started"
    assert row["last_seen_at"] >= rfc3339(before)
