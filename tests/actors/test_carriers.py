"""D280: object actors carried by a fixed set of OS threads.

Each Thread, Task and agent shard stays an actor of its own (its own order,
overlay and deadlines), but ``[server] actor_threads`` threads carry them all:
a key always runs on the same carrier, so its commands are still decided one
at a time in the order told (L5); an idle actor is still stopped and started
again from the store (L1-1); the deadline clock still reaches every owner (L4).
"""

from __future__ import annotations

import threading
import time

import msgspec
import pytest

from kungfud.actors import Runtime
from kungfud.actors.registry import THREAD_NAME
from kungfud.store import Committed, Store
from kungfud.wire.ops import OPS
from tests.actors.test_sweep import _Clock, _taken_assignment  # the protocol clock a test moves

HOUR_MS = 3600 * 1000  # _taken_assignment's delivery deadline

def _runtime(tmp_path, threads: int, clock=None) -> Runtime:
    store = Store(str(tmp_path / "data"))
    rt = Runtime(store, actor_threads=threads, **({"clock": clock} if clock else {}))
    rt.start()
    return rt


def _close(rt: Runtime) -> None:
    rt.stop()
    rt.store.close()


def _send(rt: Runtime, agent: str | None, op: str, args: dict, key: str, out: list, done: threading.Event, n: int):
    def reply(outcome) -> None:
        out.append((key, outcome))
        if len(out) >= n:
            done.set()

    rt.act(agent, op, key, msgspec.convert(args, OPS[op].args), reply)


def _act(rt: Runtime, agent: str | None, op: str, args: dict, _n=[0]) -> dict:
    _n[0] += 1
    out: list = []
    done = threading.Event()
    _send(rt, agent, op, args, f"c{_n[0]}", out, done, 1)
    assert done.wait(10), f"no reply to {op}"
    outcome = out[0][1]
    assert isinstance(outcome, Committed), outcome
    return msgspec.json.decode(outcome.result)


def _states_when_expired(rt: Runtime, assignments: list[str], timeout: float = 20.0) -> list[str]:
    """The assignments' states once all are timed out, or when ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while True:
        with rt.store.read() as view:
            states = [view.state(asg).state for asg in assignments]
        if all(st == "timed_out" for st in states) or time.monotonic() > deadline:
            return states
        time.sleep(0.02)


def _carrier_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith(THREAD_NAME)]


@pytest.mark.rules("L5-1")
def test_L5_1_many_live_actors_share_the_configured_threads_and_keep_their_order(tmp_path):
    """60 Threads live at once on 3 threads; 20 posts into each, all sent
    before any is answered, interleaved across Threads: every post commits,
    and each Thread records its posts in the order they were told (one
    actor per Thread, never two of its commands at once)."""
    before = set(_carrier_threads())
    rt = _runtime(tmp_path, threads=3)
    try:
        a = _act(rt, None, "agent.register", {"content": {"name": "alice"}})["agent"]
        threads = [_act(rt, a, "thread.create", {})["thread"] for _ in range(60)]
        out: list = []
        done = threading.Event()
        total = 20 * len(threads)
        for n in range(20):
            for t in threads:
                _send(rt, a, "thread.post", {"thread": t, "content": {"n": n}}, f"{t}/{n:02d}", out, done, total)
        assert done.wait(60), f"{len(out)} of {total} replies"
        assert all(isinstance(o, Committed) for _, o in out), [o for _, o in out if not isinstance(o, Committed)][:3]
        assert rt.registry.live() >= len(threads) + 1  # every Thread, and the agent shard
        carriers = set(_carrier_threads()) - before
        assert len(carriers) == 3, carriers
        assert rt.registry.threads == 3
        # Committed in the order told: the commit seqs of one Thread's posts
        # rise with n (keys sort by n).
        for t in threads:
            seqs = [o.last_seq for key, o in sorted(out) if key.startswith(t + "/")]
            assert len(seqs) == 20 and seqs == sorted(seqs), (t, seqs)
    finally:
        _close(rt)
    assert not set(_carrier_threads()) - before  # stopped with the runtime


@pytest.mark.rules("L4-2", "R6.4-13")
def test_L4_the_clock_expires_deadlines_of_actors_that_share_one_thread(tmp_path):
    """Five Threads on one carrier, each with a taken assignment: when the
    protocol's clock passes their deadline, the deadline clock tells each
    owner, and every assignment is recorded timed out."""
    clock = _Clock()
    rt = _runtime(tmp_path, threads=1, clock=clock)
    try:
        taken = [_taken_assignment(rt)[3] for _ in range(5)]
        clock.now += HOUR_MS + 1000
        rt.clock_thread.wake()
        assert _states_when_expired(rt, taken) == ["timed_out"] * 5
    finally:
        _close(rt)


class _Broken:
    """An actor whose message handling fails outside any job."""

    def on_receive(self, message) -> None:
        raise RuntimeError("broken on purpose")


@pytest.mark.rules("L5-1")
def test_a_failure_outside_a_job_does_not_stop_the_thread_that_carries_others(tmp_path):
    rt = _runtime(tmp_path, threads=1)
    try:
        a = _act(rt, None, "agent.register", {"content": {"name": "alice"}})["agent"]
        (carrier,) = [c for c in rt.registry._carriers if c is not None]
        carrier.tell((_Broken(), "anything"))
        t = _act(rt, a, "thread.create", {})["thread"]  # the same (only) carrier
        assert _act(rt, a, "thread.post", {"thread": t, "content": {"n": 0}})["entry"]
        assert carrier.is_alive()
    finally:
        _close(rt)


@pytest.mark.rules("L1-1")
def test_L1_1_an_idle_actor_stops_and_its_next_command_starts_it_again_on_the_same_thread(tmp_path):
    rt = _runtime(tmp_path, threads=4)
    try:
        a = _act(rt, None, "agent.register", {"content": {"name": "alice"}})["agent"]
        t = _act(rt, a, "thread.create", {})["thread"]
        _act(rt, a, "thread.post", {"thread": t, "content": {"n": 0}})
        first = rt.registry._actors[t][0]
        carrier = first.ref.carrier
        later = time.monotonic() + rt.registry.idle_stop_s + 1
        for _ in range(100):  # the outcome's message may still be queued: fence and retry
            rt.registry.reap(now=later)
            if t not in rt.registry._actors:
                break
            rt.registry.fence(t)
        assert t not in rt.registry._actors
        _act(rt, a, "thread.post", {"thread": t, "content": {"n": 1}})  # decided on what the store holds
        second = rt.registry._actors[t][0]
        assert second is not first and second.ref.carrier is carrier
    finally:
        _close(rt)


@pytest.mark.rules("L4-2", "L1-1")
def test_L4_a_restarted_runtime_rearms_the_deadlines_its_carriers_owned(tmp_path):
    """A daemon stopped with a running deadline and started again (its
    carriers fresh, no actor live) records the expiry when it falls due: the
    clock re-arms from the store's deadline index and tells the owner's new
    actor on whichever carrier its key hashes to."""
    clock = _Clock()
    rt = _runtime(tmp_path, threads=2, clock=clock)
    try:
        asg = _taken_assignment(rt)[3]
    finally:
        rt.stop()  # the store stays open for the next runtime
    clock.now += HOUR_MS + 1000
    again = Runtime(rt.store, actor_threads=3, clock=clock)
    assert again.registry.live() == 0  # nothing live before it starts
    again.start()
    try:
        assert _states_when_expired(again, [asg]) == ["timed_out"]
        assert again.registry.live() >= 1  # the owner's actor, started by the clock's message
    finally:
        _close(again)
