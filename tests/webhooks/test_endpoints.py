"""The delivery runner's set of agents with an endpoint (D272), without a
daemon: a wake-up of an agent without one starts no task and reads nothing;
a registration written (here or on another node: ``changed``) is read and
served; a read that finds no endpoint removes the agent, unless a
registration written while it read makes the runner read again."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from kungfud.actors.hooks import Cursor, Due
from kungfud.config import WebhooksConfig
from kungfud.core.webhook import WebhookState
from kungfud.webhooks.delivery import SHARDS, Deliveries


class _Lease:
    def try_acquire(self) -> bool:
        return True

    def release(self) -> None:
        pass


class _Nodes:
    def lease_for(self, name: str, n: int) -> _Lease:
        return _Lease()


class _Runtime:
    nodes = _Nodes()
    store = None
    shared = False


class _Hooks:
    """The runner's store calls, from a dict of registrations; counts reads."""

    def __init__(self, regs: dict[str, WebhookState]):
        self.regs = regs
        self.reads: list[str] = []
        self.gate: threading.Event | None = None  # set: the next state read waits for it

    def agents(self) -> tuple[list[str], list[str]]:
        return sorted(self.regs), []

    def state(self, agent: str):
        self.reads.append(agent)
        reg = self.regs.get(agent)
        gate, self.gate = self.gate, None
        if gate is not None:
            gate.wait(5)
        return reg, None

    def events_after(self, agent, after, limit, kinds):
        return [], None, after

    def due(self, wanted, limit):
        """As the real one (actors/hooks.py), from ``state`` and ``events_after``."""
        out = {}
        for agent, pending in wanted.items():
            reg, cursor = self.state(agent)
            if reg is None or reg.url is None:
                out[agent] = Due(reg, None, [], 0, False)
                continue
            if pending is not None and pending.hook == reg.hook:
                cursor = pending
            cursor = cursor or Cursor(reg.hook, reg.since)
            page, _first_at, reached = self.events_after(agent, cursor.delivered, limit, reg.events)
            out[agent] = Due(reg, cursor, page, reached, False)
        return out


def _reg(agent: str) -> WebhookState:
    return WebhookState(agent, "http://127.0.0.1:9/hook", ("turn",), b"k" * 32, 0, "wh_1")


def _runner(regs: dict[str, WebhookState]) -> tuple[Deliveries, _Hooks]:
    d = Deliveries(_Runtime(), WebhooksConfig())
    d.hooks = _Hooks(regs)  # type: ignore[assignment]
    d.held = [True] * SHARDS
    return d, d.hooks  # type: ignore[return-value]


async def _settle(d: Deliveries) -> None:
    while d.tasks or d._round is not None:  # the delivery tasks, and the read round that starts them
        await asyncio.gather(*d.tasks.values(), *([d._round] if d._round is not None else []))


@pytest.mark.rules("R8-20")
def test_a_wake_up_of_an_agent_without_an_endpoint_reads_nothing():
    async def go():
        d, hooks = _runner({"ag_hooked": _reg("ag_hooked")})
        d.wake(["ag_plain"])  # before the first sweep: every woken agent is read
        await _settle(d)
        assert hooks.reads == ["ag_plain"]
        await d._sweep(range(SHARDS))
        assert d.endpoints == {"ag_hooked"}
        hooks.reads.clear()
        d.wake(["ag_plain", "ag_hooked"])
        assert d._due == {"ag_hooked"}  # queued for the next read; nothing for the other
        await _settle(d)
        assert hooks.reads == ["ag_hooked"]
        d._pool.shutdown()

    asyncio.run(go())


@pytest.mark.rules("R8-20")
def test_a_registration_written_is_read_and_served_and_a_cleared_one_dropped():
    async def go():
        d, hooks = _runner({})
        await d._sweep(range(SHARDS))
        hooks.regs["ag_new"] = _reg("ag_new")
        d.changed(["ag_new"])  # this node's commit, or another's through the bus
        await _settle(d)
        assert "ag_new" in d.endpoints and hooks.reads == ["ag_new"]
        del hooks.regs["ag_new"]  # cleared: the next read finds none and forgets it
        d.changed(["ag_new"])
        await _settle(d)
        assert "ag_new" not in d.endpoints
        hooks.reads.clear()
        d.wake(["ag_new"])
        assert not d.tasks and not d._due and hooks.reads == []
        d._pool.shutdown()

    asyncio.run(go())


@pytest.mark.rules("R8-20")
def test_a_registration_written_while_a_read_found_none_is_not_lost():
    async def go():
        d, hooks = _runner({})
        await d._sweep(range(SHARDS))
        d.changed(["ag_x"])  # e.g. a clear: its read will find no endpoint...
        hooks.gate = gate = threading.Event()
        await asyncio.sleep(0.05)  # ...and is under way
        hooks.regs["ag_x"] = _reg("ag_x")  # a set committed meanwhile, after the read's snapshot
        d.changed(["ag_x"])
        gate.set()
        await _settle(d)
        assert "ag_x" in d.endpoints  # the runner read again and kept it
        assert hooks.reads == ["ag_x", "ag_x"]
        d._pool.shutdown()

    asyncio.run(go())


@pytest.mark.rules("R8-20")
def test_an_open_task_offered_wakes_every_agent_with_an_endpoint():
    """WIRE.md 1.2: a ``task_offered`` event is stored once, in the open-Task
    stream (published under ``*``), and merged into each agent's feed by the
    read; an agent whose webhook takes that kind hears it at once, not at the
    next sweep."""
    from kungfud.actors import OPEN_TASKS

    async def go():
        d, hooks = _runner({"ag_a": _reg("ag_a"), "ag_b": _reg("ag_b")})
        await d._sweep(range(SHARDS))
        hooks.reads.clear()
        d.wake([OPEN_TASKS])
        assert d._due == {"ag_a", "ag_b"}
        await _settle(d)
        assert sorted(hooks.reads) == ["ag_a", "ag_b"]
        d._pool.shutdown()

    asyncio.run(go())


@pytest.mark.rules("R8-20")
def test_a_registration_set_while_a_failed_post_is_recorded_is_used_without_the_pause(monkeypatch):
    """A webhook set again right after its old endpoint failed — while the
    runner was still writing the failure — is used at once: the wake-up that
    came during the write ends the pause before it starts (it was lost, and the
    new endpoint waited out the old one's 60 s pause; seen once in CI, lmdb2)."""
    import kungfud.webhooks.delivery as delivery

    posted: list[str] = []

    async def fake_post(self, reg, msg_id, body, span=None):
        posted.append(reg.url)
        return "http_status 5xx" if reg.url.endswith("/bad") else None

    monkeypatch.setattr(delivery.Deliveries, "_post", fake_post)

    async def go():
        loop = asyncio.get_running_loop()
        d = Deliveries(_Runtime(), WebhooksConfig(retry_pauses_s=(60,)))
        good = WebhookState("ag_x", "http://127.0.0.1:9/good", ("turn",), b"k" * 32, 0, "wh_2")

        class Hooks(_Hooks):
            def events_after(self, agent, after, limit, kinds):
                return ([(7, b'{"event":"turn","data":{}}')] if after < 7 else []), None, max(after, 7)

            def write(self, cursors):  # the failure recorded; the set commits meanwhile
                self.regs["ag_x"] = good
                loop.call_soon_threadsafe(d.changed, ["ag_x"])
                time.sleep(0.2)  # the wake-up is handled before this write returns

        bad = WebhookState("ag_x", "http://127.0.0.1:9/bad", ("turn",), b"k" * 32, 0, "wh_1")
        d.hooks = Hooks({"ag_x": bad})  # type: ignore[assignment]
        d.held = [True] * SHARDS
        d.wake(["ag_x"])
        for _ in range(100):
            if posted[-1:] == [good.url]:
                break
            await asyncio.sleep(0.02)
        assert posted == [bad.url, good.url], posted
        for t in d.tasks.values():
            t.cancel()
        d._pool.shutdown()

    asyncio.run(go())


@pytest.mark.rules("R8-20")
def test_an_acknowledgement_written_while_the_next_read_runs_sends_nothing_twice(monkeypatch):
    """In one fan-out an event was POSTed twice with nothing failing (issue 38,
    D393): a wake-up during a POST made the runner read again; the batch of
    acknowledged cursors was written and dropped from memory while that read
    ran, and the read — begun before the write — returned the old stored
    position, so delivery resumed behind what was acknowledged. The position
    not yet written is now taken before the read begins."""
    import kungfud.webhooks.delivery as delivery

    posted: list[int] = []

    async def fake_post(self, reg, msg_id, body, span=None):
        posted.append(int(msg_id.rsplit(".", 1)[1]))
        return None

    monkeypatch.setattr(delivery.Deliveries, "_post", fake_post)

    class Store(_Hooks):
        """Events and cursors as a store keeps them; ``due`` reads the stored
        cursor when it begins, then may be held (``gate``) as a slow read is."""

        def __init__(self, regs):
            super().__init__(regs)
            self.events: list[int] = [1, 2, 3]
            self.cursors: dict[str, Cursor] = {}
            self.started = threading.Event()

        def due(self, wanted, limit):
            out = {}
            for agent, pending in wanted.items():
                reg = self.regs[agent]
                stored = self.cursors.get(agent)  # the read's snapshot, taken now
                gate, self.gate = self.gate, None
                if gate is not None:
                    self.started.set()
                    gate.wait(5)
                cursor = pending if pending is not None and pending.hook == reg.hook else stored
                cursor = cursor or Cursor(reg.hook, reg.since)
                page = [(s, b'{"event":"turn","data":{}}') for s in self.events if s > cursor.delivered]
                out[agent] = Due(reg, cursor, page, page[-1][0] if page else cursor.delivered, False)
            return out

        def write(self, cursors):
            self.cursors.update(cursors)

    async def go():
        d = Deliveries(_Runtime(), WebhooksConfig())
        hooks = d.hooks = Store({"ag_x": _reg("ag_x")})  # type: ignore[assignment]
        d.held = [True] * SHARDS
        d.wake(["ag_x"])
        await _settle(d)
        assert posted == [1, 2, 3] and d.acked["ag_x"].delivered == 3  # acknowledged, not yet written
        hooks.events.append(4)
        hooks.gate = gate = threading.Event()
        d.wake(["ag_x"])  # event 4: this read begins before the batch below is written ...
        while not hooks.started.is_set():
            await asyncio.sleep(0.01)
        await d._write_acked()  # ... the batch is written and leaves memory meanwhile ...
        assert "ag_x" not in d.acked and hooks.cursors["ag_x"].delivered == 3
        gate.set()  # ... and the read returns the position it began with
        await _settle(d)
        assert posted == [1, 2, 3, 4], posted  # each once
        d._pool.shutdown()

    asyncio.run(go())


@pytest.mark.rules("R8-20")
def test_one_wake_of_more_agents_than_a_round_reads_each_once_and_posts_each_event_once(monkeypatch):
    """D392: the agents one commit wakes are read together, ``ROUND`` to a
    read; each agent with an event is read once and gets its POST once (no
    second read to find nothing), the others none."""
    import kungfud.webhooks.delivery as delivery

    posted: list[str] = []

    async def fake_post(self, reg, msg_id, body, span=None):
        posted.append(msg_id)
        return None

    monkeypatch.setattr(delivery.Deliveries, "_post", fake_post)
    n = delivery.ROUND * 2 + 7
    agents = [f"ag_{i:05d}" for i in range(n)]
    calls: list[int] = []

    class Hooks(_Hooks):
        def events_after(self, agent, after, limit, kinds):
            page = [(5, b'{"event":"turn","data":{}}')] if after < 5 and agent != agents[0] else []
            return page, None, max(after, 5) if page else after

        def due(self, wanted, limit):
            calls.append(len(wanted))
            return super().due(wanted, limit)

    async def go():
        d = Deliveries(_Runtime(), WebhooksConfig())
        hooks = d.hooks = Hooks({a: _reg(a) for a in agents})  # type: ignore[assignment]
        d.held = [True] * SHARDS
        await d._sweep(range(SHARDS))
        hooks.reads.clear()
        calls.clear()
        d.wake(agents)
        await _settle(d)
        assert sorted(posted) == sorted(f"{a}.5" for a in agents[1:])  # each once; none for the first
        assert sorted(hooks.reads) == sorted(agents)  # each read once
        assert max(calls) <= delivery.ROUND and sum(calls) == n
        d._pool.shutdown()

    asyncio.run(go())


def test_the_oldest_undelivered_gauge_dates_a_stuck_event_by_when_it_was_recorded(monkeypatch):
    """``kungfud_webhook_oldest_undelivered_seconds`` (docs/operations.md):
    an event whose POST keeps failing shows its age since it was recorded;
    the date is read once per lease turn, not per agent per page (D392)."""
    import kungfud.webhooks.delivery as delivery
    from kungfud.actors.runtime import wall_ms

    async def failing(self, reg, msg_id, body, span=None):
        return "http_status 5xx"

    monkeypatch.setattr(delivery.Deliveries, "_post", failing)

    class Hooks(_Hooks):
        dated: list[int] = []

        def events_after(self, agent, after, limit, kinds):
            return ([(9, b'{"event":"turn","data":{}}')] if after < 9 else []), None, max(after, 9)

        def recorded_at(self, seq):
            self.dated.append(seq)
            return wall_ms() - 5_000

        def write(self, cursors):
            pass

    async def go():
        d = Deliveries(_Runtime(), WebhooksConfig(retry_pauses_s=(60,)))
        hooks = d.hooks = Hooks({"ag_x": _reg("ag_x")})  # type: ignore[assignment]
        d.held = [True] * SHARDS
        d.wake(["ag_x"])
        while not d.oldest:
            await asyncio.sleep(0.01)
        assert d.oldest_age_s() == 0.0  # not dated yet
        await d._date_oldest()
        await d._date_oldest()  # the same event: not read again
        assert 4.5 < d.oldest_age_s() < 60 and hooks.dated == [9]
        for t in d.tasks.values():
            t.cancel()
        d._pool.shutdown()

    asyncio.run(go())
