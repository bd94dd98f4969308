"""L1/L3 under kill -9: nothing acknowledged is lost, every retry has one effect.

Eight registered agents, one connection each, send keyed ``memory.create`` and
``memory.update`` requests concurrently (a few in flight per connection) and
record every acknowledged reply. After a seeded number of acknowledgements the
daemon gets SIGKILL in the middle of that load and is restarted on the same data
directory. Then:

(a) every acknowledged request, sent again, replays (``"replayed": true``) with a
    result identical to the first one (L3-2, L3-4, L1-4);
(b) every request that was sent but not acknowledged, retried with its key, has
    exactly one effect: each agent lists exactly one Memory per distinct create
    key it ever sent, and each Memory's latest version is one plus the number of
    distinct update keys sent for it, every version reported once (L3-1, L1-4);
(c) ``kungfud check`` finds the derived indexes equal to the rebuild from the
    log, after the kill and after the final clean stop (L1-1).

The cycle runs three times on the same data directory.
"""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from websockets.exceptions import ConnectionClosed

from kungfud.client import Client

ROOT = Path(__file__).resolve().parents[2]
SEED = 1_764_504_000
AGENTS = 8
IN_FLIGHT = 3  # concurrent senders per connection
CYCLES = 3
LOST = (ConnectionError, ConnectionClosed, OSError)


@dataclass
class Agent:
    name: str
    agent: str
    key: str
    rng: random.Random
    acked: dict[tuple[str, str], tuple[dict, dict]] = field(default_factory=dict)  # (op, key) -> (args, result)
    unacked: dict[tuple[str, str], dict] = field(default_factory=dict)  # (op, key) -> args
    memories: list[str] = field(default_factory=list)  # acknowledged creates, for updates to target
    sent_creates: set[str] = field(default_factory=set)
    sent_updates: dict[str, set[str]] = field(default_factory=dict)  # memory -> update keys

    def ack(self, op: str, key: str, args: dict, result: dict) -> None:
        self.unacked.pop((op, key), None)
        self.acked[(op, key)] = (args, result)
        if op == "memory.create":
            self.memories.append(result["memory"])


async def _requests(c: Client, calls: list[tuple[str, str, dict]]) -> list[dict]:
    """Pipeline ``(op, key, args)`` requests on one connection, staying under the
    per-connection in-flight limit (WIRE.md "Transport", default 64)."""
    gate = asyncio.Semaphore(32)

    async def one(op: str, key: str, args: dict) -> dict:
        async with gate:
            return await c.request(op, args, key=key)

    return await asyncio.gather(*(one(*call) for call in calls))


def _check(daemon) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kungfud", "check", *daemon.store_args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


async def _register(url: str, n: int, rng: random.Random) -> Agent:
    async with await Client.connect(url) as c:
        r = await c.act("agent.register", {"content": {"name": f"durable{n}"}}, key=f"reg-{n}")
    return Agent(f"durable{n}", r["agent"], r["key"], random.Random(rng.random()))


async def _load(
    url: str, agents: list[Agent], cycle: int, kill_after: int
) -> tuple[list[Client], list[asyncio.Task], asyncio.Event]:
    """Start the load: the clients, their sender tasks, and an event set at
    ``kill_after`` acknowledgements. Senders keep going until their connection dies."""
    clients = [await Client.connect(url, a.key) for a in agents]
    reached = asyncio.Event()
    acks = 0

    async def sender(a: Agent, c: Client, lane: int) -> None:
        nonlocal acks
        n = 0
        while True:
            n += 1
            key = f"c{cycle}-l{lane}-{n}"
            if a.memories and a.rng.random() < 0.5:
                op = "memory.update"
                memory = a.rng.choice(a.memories)
                args = {"memory": memory, "content": {"from": key, "pad": "u" * a.rng.randint(0, 1500)}}
                a.sent_updates.setdefault(memory, set()).add(key)
            else:
                op = "memory.create"
                args = {"content": {"from": key, "pad": "c" * a.rng.randint(0, 1500)}}
                a.sent_creates.add(key)
            a.unacked[(op, key)] = args
            try:
                resp = await c.request(op, args, key=key)
            except LOST:
                return  # the daemon died: this one stays unacknowledged
            assert resp["ok"] and resp["replayed"] is False, (op, key, resp)
            a.ack(op, key, args, resp["result"])
            acks += 1
            if acks >= kill_after:
                reached.set()

    tasks = [asyncio.create_task(sender(a, c, lane)) for a, c in zip(agents, clients) for lane in range(IN_FLIGHT)]
    return clients, tasks, reached


async def _replay_acknowledged(url: str, agents: list[Agent]) -> int:
    """(a): every acknowledged request replays its first result unchanged."""
    replayed = 0

    async def one(a: Agent) -> None:
        nonlocal replayed
        async with await Client.connect(url, a.key) as c:
            items = list(a.acked.items())
            resps = await _requests(c, [(op, key, args) for (op, key), (args, _) in items])
            for ((op, key), (_, first)), resp in zip(items, resps):
                assert resp["ok"] and resp["replayed"] is True, (a.name, op, key, resp)
                # Identical: same fields, same values, same order.
                assert list(resp["result"].items()) == list(first.items()), (a.name, op, key, first, resp["result"])
                replayed += 1

    await asyncio.gather(*(one(a) for a in agents))
    return replayed


async def _retry_unacknowledged(url: str, agents: list[Agent]) -> int:
    """(b), first half: retry every sent-but-unacknowledged key; each succeeds."""
    retried = 0

    async def one(a: Agent) -> None:
        nonlocal retried
        async with await Client.connect(url, a.key) as c:
            # Creates first, in any order; then updates, which need their memory.
            for ops in (("memory.create",), ("memory.update",)):
                todo = [(op, key, args) for (op, key), args in a.unacked.items() if op in ops]
                resps = await _requests(c, todo)
                for (op, key, args), resp in zip(todo, resps):
                    assert resp["ok"], (a.name, op, key, resp)
                    a.ack(op, key, args, resp["result"])
                    retried += 1
        assert not a.unacked

    await asyncio.gather(*(one(a) for a in agents))
    return retried


async def _exactly_once(url: str, agents: list[Agent]) -> None:
    """(b), second half: one effect per distinct key, counted from reads."""

    async def one(a: Agent) -> None:
        async with await Client.connect(url, a.key) as c:
            listed: list[dict] = []
            cursor = None
            while True:
                page = await c.read("memory.list", {"cursor": cursor, "limit": 100})
                listed += page["items"]
                cursor = page["cursor"]
                if cursor is None:
                    break
            ids = [m["memory"] for m in listed]
            assert len(ids) == len(set(ids)) == len(a.sent_creates), (a.name, len(ids), len(a.sent_creates))
            created = {a.acked[("memory.create", k)][1]["memory"] for k in a.sent_creates}
            assert set(ids) == created, a.name
            for m in listed:
                keys = a.sent_updates.get(m["memory"], set())
                assert m["latest"] == 1 + len(keys), (a.name, m, len(keys))
                versions = sorted(a.acked[("memory.update", k)][1]["version"] for k in keys)
                assert versions == list(range(2, m["latest"] + 1)), (a.name, m["memory"], versions)

    await asyncio.gather(*(one(a) for a in agents))


@pytest.mark.rules("L1-4", "L3-2", "L1-1", "L3-1", "L3-4", "R0-2")
async def test_L1_4_L3_2_acknowledged_actions_survive_kill_9_and_retries_take_effect_once(daemon):
    rng = random.Random(SEED)
    agents = [await _register(daemon.url, n, rng) for n in range(AGENTS)]
    for cycle in range(CYCLES):
        kill_after = rng.randint(200, 400)
        clients, tasks, reached = await _load(daemon.url, agents, cycle, kill_after)
        await asyncio.wait_for(reached.wait(), 60)
        daemon.kill()  # SIGKILL mid-load: senders are still sending
        await asyncio.gather(*tasks)
        for c in clients:
            await c.close()
        lost = sum(len(a.unacked) for a in agents)
        assert lost > 0, "the kill did not interrupt any request; the test proved nothing"

        r = _check(daemon)
        assert r.returncode == 0, f"kungfud check after kill -9 (cycle {cycle}):\n{r.stdout}{r.stderr}"

        daemon.start()
        assert await _replay_acknowledged(daemon.url, agents) >= kill_after
        assert await _retry_unacknowledged(daemon.url, agents) == lost
        await _replay_acknowledged(daemon.url, agents)  # the retried ones too
        await _exactly_once(daemon.url, agents)

    assert daemon.terminate() == 0
    r = _check(daemon)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "OK" in r.stdout
