"""Fair POST slots (kungfud/webhooks/slots.py; D330; reviews/security.md round
4 finding 1: 96 receivers answering in 9.5 s moved a bystander's delivery from
0 s to 56 s through one FIFO pool of 16). Without a daemon, on real asyncio
time scaled down: receivers that answer slowly keep their own deliveries
waiting, never another origin's."""

from __future__ import annotations

import asyncio
import time

import pytest

from kungfud.webhooks.slots import Slots


async def _busy(slots: Slots, origin: str, hold_s: float, stop: asyncio.Event, counts: dict) -> None:
    """One agent whose receiver answers after ``hold_s``, with events without end."""
    while not stop.is_set():
        async with slots.slot(origin):
            counts[origin] = counts.get(origin, 0) + 1
            await asyncio.sleep(hold_s)


async def _victim_wait(slots: Slots) -> float:
    t0 = time.monotonic()
    async with slots.slot("http://victim:80"):
        return time.monotonic() - t0


def _attack(origins: list[str], per_origin: int, hold_s: float = 3.0, slow_s: float = 0.2) -> tuple[float, Slots, dict]:
    async def go():
        slots = Slots(16, slow_s=slow_s)
        stop, counts = asyncio.Event(), {}
        agents = [asyncio.ensure_future(_busy(slots, o, hold_s, stop, counts)) for o in origins for _ in range(per_origin)]
        await asyncio.sleep(0.05)  # every slot the attackers may take is taken
        waited = await _victim_wait(slots)
        in_flight = slots.fast_used + slots.slow_used
        stop.set()
        for a in agents:
            a.cancel()
        await asyncio.gather(*agents, return_exceptions=True)
        return waited, in_flight, counts

    return asyncio.run(go())


@pytest.mark.rules("R8-20")
def test_R12_11_many_slow_agents_on_one_receiver_leave_every_other_origin_a_slot_at_once():
    """The review's shape: 96 agents share one receiver that answers just
    inside the limit. They hold at most the per-origin cap; the victim's
    receiver is served at once (before: after every one of the 96)."""
    waited, in_flight, _ = _attack(["http://slow:8080"], 96)
    assert waited < 1.0, waited  # hold_s is 3 s: a victim behind even one slow POST waits that long
    assert in_flight <= 16


@pytest.mark.rules("R8-20")
def test_R12_11_slow_receivers_on_many_origins_are_moved_to_the_slow_pool_and_the_victim_is_served():
    """48 origins, each slow: each POST gives its fast slot back after
    ``slow_s`` (0.2 s here), and a slow origin then waits for the smaller
    slow pool one POST at a time; the victim waits for a few turns of the
    fast pool, not for the slow answers (3 s each)."""
    waited, _, counts = _attack([f"http://slow{i}:8080" for i in range(48)], 2)
    assert waited < 2.0, waited


def test_slow_origins_hold_one_slot_each_and_the_slow_pool_at_most():
    async def go():
        slots = Slots(16, slow_s=0.05)
        stop, counts = asyncio.Event(), {}
        agents = [asyncio.ensure_future(_busy(slots, f"http://s{i % 20}:1", 1.0, stop, counts)) for i in range(80)]
        await asyncio.sleep(0.6)  # past slow_s: every origin is slow; the first POSTs are still running
        slow_now = [o for o in slots.origins if slots.is_slow(o)]
        await asyncio.sleep(0.6)  # the first answers came: only slow-pool grants since
        held = {o: st.in_flight for o, st in slots.origins.items()}
        stop.set()
        for a in agents:
            a.cancel()
        await asyncio.gather(*agents, return_exceptions=True)
        return slots, slow_now, held

    slots, slow_now, held = asyncio.run(go())
    assert len(slow_now) == 20
    assert sum(held.values()) <= slots.slow_total + slots.fast_total
    assert slots.fast_used == 0 and slots.slow_used == 0  # every slot given back, cancelled or not


def test_a_prompt_origin_is_never_slow_and_keeps_the_per_origin_cap():
    async def go():
        slots = Slots(16, slow_s=0.5)
        stop, counts = asyncio.Event(), {}
        agents = [asyncio.ensure_future(_busy(slots, "http://fast:1", 0.01, stop, counts)) for _ in range(10)]
        peak = 0
        for _ in range(20):
            await asyncio.sleep(0.01)
            peak = max(peak, slots.origins["http://fast:1"].in_flight)
        stop.set()
        await asyncio.gather(*agents, return_exceptions=True)
        return slots, peak, counts

    slots, peak, counts = asyncio.run(go())
    assert not slots.is_slow("http://fast:1") and peak <= slots.per_origin and counts["http://fast:1"] > 20


@pytest.mark.rules("R8-20")
def test_R8_20_many_ports_of_one_host_are_one_host_and_leave_other_hosts_their_slots():
    """An attacker's receivers on 48 ports of one host: 48 fresh origins, but
    one host, which holds at most half the fast slots, so another host's
    receiver is served at once, before any of them turns slow."""
    waited, _, _ = _attack([f"http://evil:{8000 + i}" for i in range(48)], 2, slow_s=5.0)
    assert waited < 1.0, waited
