"""DESIGN.md "actors are virtual": an actor starts on first use from LMDB, stops
after an idle period, and the next job starts a fresh one that sees everything
committed (L1-1: its state is a cache of the facts)."""

from __future__ import annotations

import threading
import time

import msgspec
import pytest

from kungfud.actors import Job, Runtime
from kungfud.actors.messages import SweepDue
from kungfud.core import memory
from kungfud.daemon import bootstrap_admin
from kungfud.store import Committed, Store
from kungfud.store.layout import receipt_scope
from kungfud.wire import MemoryCreateArgs, canonical_hash


def _submit(rt: Runtime, agent: str, key: str, content: bytes) -> Committed:
    done = threading.Event()
    box: list = []
    args = MemoryCreateArgs(msgspec.json.decode(content))
    rt.act(agent, "memory.create", key, args, lambda o: (box.append(o), done.set()))
    assert done.wait(10), "no reply"
    assert isinstance(box[0], Committed), box[0]
    return box[0]


@pytest.mark.rules("L1-1")
def test_actors_start_on_demand_stop_when_idle_and_restart_from_the_store(tmp_path):
    # The idle period passes on the clock handed to reap(now=...), not by
    # waiting: the reaper thread never finds an hour-idle actor during the test.
    idle_s = 3600.0
    store = Store(str(tmp_path / "data"))
    rt = Runtime(store, idle_stop_s=idle_s)
    rt.start()
    try:
        admin = bootstrap_admin(rt)
        assert admin is not None and rt.registry.live() == 0  # nothing started before use
        first = _submit(rt, admin, "k1", b'{"n":1}')
        assert rt.registry.live() == 1
        assert rt.registry.reap(now=time.monotonic()) == 0 and rt.registry.live() == 1  # not idle yet: kept
        (key,) = rt.registry._actors
        later = time.monotonic() + idle_s + 1
        # The reply is sent from the writer thread just before the actor is told
        # the outcome, and reap() skips an actor that is still busy with it.
        # A fence on its carrier's mailbox (FIFO): once it returns, the
        # outcome the actor was told before has been handled.
        for _ in range(100):
            if rt.registry.reap(now=later):
                break
            rt.registry.fence(key)
        assert rt.registry.live() == 0, "the idle actor was not stopped"
        second = _submit(rt, admin, "k2", b'{"n":2}')  # a fresh actor, started from LMDB
        assert second.last_seq > first.last_seq
        with store.read() as view:
            listed = list(view.memories_of(admin, None))
        assert len(listed) == 2
    finally:
        rt.stop()
        store.close()


@pytest.mark.rules("L4-5", "R12-11")
def test_L4_5_no_actor_is_started_for_a_key_that_names_no_object(tmp_path):
    """Review M5: the registry starts an actor (an OS thread) only for a service
    actor or an object that exists, whoever tells it (an action, the deadline
    clock); a job for a missing object is decided by its caller's agent actor."""
    from kungfud.actors.ops import agent_actor
    from kungfud.errors import Rejection
    from kungfud.store import Failed

    store = Store(str(tmp_path / "data"))
    rt = Runtime(store)
    rt.start()
    try:
        admin = bootstrap_admin(rt)
        threads = threading.active_count()
        assert rt.registry.tell("th_0000000000000000000000000z", SweepDue()) is None
        assert rt.registry.tell("tk_0000000000000000000000000z", SweepDue()) is None
        assert rt.registry.live() == 0 and threading.active_count() == threads

        done = threading.Event()
        box: list = []
        args = MemoryCreateArgs({"k": 1})
        # An action the store cannot place with any existing object: a Memory
        # update of a made-up Memory sent to a made-up Thread's key.
        job = Job(
            "memory.update", admin, receipt_scope(admin, "memory.update", "k"), canonical_hash("memory.create", args),
            memory.Update("me_0000000000000000000000000z", b'{"n":1}'), lambda o: (box.append(o), done.set()),
        )
        rt.submit(job, "th_0000000000000000000000000z")
        assert done.wait(10), "no reply"
        assert box == [Failed(Rejection.not_found("memory", "me_0000000000000000000000000z"))], box
        assert set(rt.registry._actors) == {agent_actor(admin)}  # the caller's agent actor only
    finally:
        rt.stop()
        store.close()
