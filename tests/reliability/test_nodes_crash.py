"""L1/L3 and deadlines across nodes under kill -9 (issue 16, "Tests and CI").

Two nodes on one store (two LMDB workers of one supervisor, or two daemons on
one PostgreSQL database; tests/cluster.py) serve the crash loop's keyed workload
(tests/reliability/test_crash_loop.py: its model, lanes, retries, replays and
state checks), agent ``a`` on node ``a mod 2``. Each cycle kills one node with
SIGKILL mid-load (the two in turn, so the node holding the deadline lease dies
in one of any two cycles), and then:

1. a delivery deadline that fell due as the node died is recorded by the
   survivor within 5 s (issue 16 item 5);
2. every request the dead node (or the cut-off lanes) left unacknowledged,
   retried with its key on the survivor, succeeds once: replayed, or for the
   first time (L3-1, L3-2);
3. every acknowledged receipt of the cycle (and a sample of earlier ones)
   replays byte for byte on the survivor (L3-2, L3-4, L1-4), and the state read
   there is exactly the model's (no duplicate, no half-applied action; L1-1, L5-2);
4. the dead node comes back (the supervisor restarts a worker; a PostgreSQL node
   is started again) and ``kungfud check`` passes beside both.

On PostgreSQL, a second test restarts the PostgreSQL server itself under the
same load: every answer in the outage is ``unavailable`` (never ``internal``),
both nodes recover by themselves, and 2-3 above hold.

``KUNGFUD_NODES_CRASH_CYCLES`` sets the cycles per store (default 4).
"""

from __future__ import annotations

import asyncio
import os
import random
import time

import pytest

from kungfud.client import Client

from .conftest import kungfud_check
from .test_crash_loop import CONFIG, LOST, World, _load, _replay, _retry_unacknowledged, _setup, _verify_state

CYCLES = int(os.environ.get("KUNGFUD_NODES_CRASH_CYCLES", "4"))
SEED = int(os.environ.get("KUNGFUD_CRASH_SEED", "20261130"))
DUE_S = 60  # the probe's delivery deadline, passed by moving the shared test clock
FIRE_WITHIN_S = 5.0  # issue 16 item 5: on a surviving node after the owner dies
FIGURES: dict[str, list[float]] = {}


async def _stop_lanes(clients: list[Client], tasks: list[asyncio.Task]) -> None:
    """The lanes still sending (to the survivor) stop here: their connections
    are closed, so each ends as at a kill (its request in flight stays
    unacknowledged, to be retried under its key)."""
    for c in clients:
        try:
            await c.close()
        except LOST:
            pass
    await asyncio.wait_for(asyncio.gather(*tasks), 30)


async def _taken_assignment(url: str) -> tuple[str, str]:
    """A delivery deadline ``DUE_S`` ahead: two agents of their own on a Thread of
    their own (outside the crash model), the second took an assignment.
    Returns (assignment, the taker's key)."""
    async with await Client.connect(url) as anon:
        x = await anon.act("agent.register", {"content": {"name": "probe-x"}})
        y = await anon.act("agent.register", {"content": {"name": "probe-y"}})
    async with await Client.connect(url, x["key"]) as cx, await Client.connect(url, y["key"]) as cy:
        t = (await cx.act("thread.create", {"content": {"title": "deadline probe"}}))["thread"]
        await cy.act("thread.join", {"token": (await cx.act("thread.admit", {"thread": t}))["token"]})
        post = await cx.act(
            "thread.post",
            {"thread": t, "content": {"x": 1}, "assign": {"to": y["agent"], "content": {"criteria": "c"}, "deliver_within_s": DUE_S}},
        )
        await cy.act("assignment.take", {"assignment": post["assignment"]})
    return post["assignment"], y["key"]


async def _fired_within(url: str, key: str, asg: str, limit: float) -> float:
    """Seconds until ``asg`` reads as timed out, with its end recorded, on ``url``."""
    t0 = time.monotonic()
    async with await Client.connect(url, key) as c:
        while True:
            got = await c.read("assignment.get", {"assignment": asg})
            took = time.monotonic() - t0
            if got["state"] == "timed_out" and "ended_at" in got:
                return took
            assert took < limit, f"the deadline of {asg} has not fired from the survivor after {took:.1f} s: {got}"
            await asyncio.sleep(0.05)


@pytest.mark.long_test(40)  # seconds on the shared 2-core machine (D405): handed out first under -n
@pytest.mark.timeout_s(600)
@pytest.mark.parametrize("kind", ["lmdb2", "pg2"])
@pytest.mark.rules("L1-1", "L1-4", "L3-1", "L3-2", "L3-4", "L5-2", "R6.4-13")
async def test_L1_L3_kill_9_one_of_two_nodes_under_keyed_load(make_cluster, kind):
    c = make_cluster(kind, CONFIG, name=f"nodes-{kind}", test_clock=True)
    rng = random.Random(SEED)
    w = World(random.Random(rng.getrandbits(64)))
    fired: list[float] = []
    cycle = -1
    try:
        keys = await _setup(c.url, w)
        for cycle in range(CYCLES):
            victim = cycle % 2
            asg, taker = await _taken_assignment(c.urls[victim])
            clients, tasks, reached, failures = await _load(c.urls, w, keys, cycle, rng.randint(8, 150))
            await asyncio.wait_for(reached.wait(), 60)
            await asyncio.sleep(rng.uniform(0, 0.03))  # where in the load the kill lands
            survivor = c.urls[1 - victim]
            pid = c.kill_node(victim)
            c.advance_clock(DUE_S + 0.5)  # the deadline is due now, its node is dead
            await asyncio.sleep(0.2)  # the survivor's lanes go on meanwhile
            await _stop_lanes(clients, tasks)
            assert not failures, f"a valid request was refused under load: {failures[:3]}"
            fired.append(await _fired_within(survivor, taker, asg, FIRE_WITHIN_S))
            w.stats["unacked"] += len(w.unacked)
            committed, _ = await _retry_unacknowledged(survivor, w, keys)
            w.stats["committed"] += committed
            now = [r for r in w.reqs.values() if r.cycle == cycle]
            older = [r for r in w.reqs.values() if r.cycle < cycle]
            w.stats["replays"] += await _replay(survivor, w, keys, now + w.rng.sample(older, min(120, len(older))))
            await _verify_state(survivor, w, keys)
            c.wait_node(victim, pid)
            r = kungfud_check(c.store_args)
            assert r.returncode == 0, f"kungfud check after kill -9 of node {victim} (cycle {cycle}):\n{r.stdout}{r.stderr}"
        cycle = CYCLES
        w.stats["replays"] += await _replay(c.url, w, keys, list(w.reqs.values()))
        assert c.terminate() == 0
        r = kungfud_check(c.store_args)
        assert r.returncode == 0 and "OK" in r.stdout, r.stdout + r.stderr
    except BaseException as e:
        e.add_note(f"{kind}: seed {SEED}, failed in cycle {cycle} of {CYCLES} (logs: {[str(p) for p in c.log_paths]})")
        raise
    FIGURES[kind] = fired
    s = w.stats
    print(
        f"\nnodes crash {kind}: {CYCLES} kills, {len(w.reqs)} keyed requests, {s['unacked']} unacknowledged at a kill "
        f"({s['committed']} had committed), {s['replays']} replays; deadline fired from the survivor after "
        + ", ".join(f"{x:.2f}" for x in fired) + " s"
    )


async def _serving(urls: list[str], key: str, limit: float = 30.0) -> float:
    """Seconds until every node answers a read again."""
    t0 = time.monotonic()
    for url in urls:
        while True:
            try:
                async with await Client.connect(url, key) as c:
                    got = await c.request("agent.whoami", {})
                if got.get("ok"):
                    break
                assert got["error"]["code"] == "unavailable", got
            except LOST:
                pass
            assert time.monotonic() - t0 < limit, f"{url} did not recover within {limit} s"
            await asyncio.sleep(0.1)
    return time.monotonic() - t0


@pytest.mark.timeout_s(600)
@pytest.mark.rules("L1-4", "L3-1", "L3-2", "L3-4")
async def test_L1_L3_postgresql_restarted_under_load_on_two_nodes_is_unavailable_then_recovered(make_cluster, pg_server):
    c = make_cluster("pg2", CONFIG, name="pg-restart")
    rng = random.Random(SEED + 1)
    w = World(random.Random(rng.getrandbits(64)))
    recovered: list[float] = []
    keys = await _setup(c.url, w)
    for cycle in range(2):
        clients, tasks, reached, failures = await _load(
            c.urls, w, keys, cycle, rng.randint(8, 150), tolerate=frozenset({"unavailable"})
        )
        await asyncio.wait_for(reached.wait(), 60)
        pg_server.stop()  # immediate: as a crash of the database server
        await asyncio.sleep(1.0)  # the lanes meet the store down
        pg_server.start()
        recovered.append(await _serving(c.urls, keys[0]))
        await _stop_lanes(clients, tasks)
        assert not failures, f"under a PostgreSQL restart only `unavailable` may be answered: {failures[:3]}"
        assert c.proc.poll() is None and c.nodes[1].proc.poll() is None, "a node died with its store"
        await _retry_unacknowledged(c.urls[cycle % 2], w, keys)
        now = [r for r in w.reqs.values() if r.cycle == cycle]
        await _replay(c.urls[(cycle + 1) % 2], w, keys, now)
        await _verify_state(c.url, w, keys)
    assert w.stats.get("tolerated", 0) > 0, "no request met the outage: the test did not test it"
    r = kungfud_check(c.store_args)
    assert r.returncode == 0, r.stdout + r.stderr
    print(
        f"\npostgresql restart: {w.stats['tolerated']} answers `unavailable`, none `internal`; "
        f"both nodes serving again {', '.join(f'{x:.2f}' for x in recovered)} s after the server was back"
    )
