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


def _reg(agent: str) -> WebhookState:
    return WebhookState(agent, "http://127.0.0.1:9/hook", ("turn",), b"k" * 32, 0, "wh_1")


def _runner(regs: dict[str, WebhookState]) -> tuple[Deliveries, _Hooks]:
    d = Deliveries(_Runtime(), WebhooksConfig())
    d.hooks = _Hooks(regs)  # type: ignore[assignment]
    d.held = [True] * SHARDS
    return d, d.hooks  # type: ignore[return-value]


async def _settle(d: Deliveries) -> None:
    while d.tasks:
        await asyncio.gather(*d.tasks.values())


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
        assert list(d.tasks) == ["ag_hooked"]  # no task for the other
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
        assert not d.tasks and hooks.reads == []
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
        assert sorted(d.tasks) == ["ag_a", "ag_b"]
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
