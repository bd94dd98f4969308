"""An actor's jobs told together, and the receipt read after the decision (D281).

- Jobs that reach an actor in one message (the server's jobs of one loop turn,
  ``Runtime.submit_many``) are decided on one read view, each on top of the
  overlay of the writes the ones before it put in flight (L5-1: in order).
- A retry is answered from its receipt (L3-2, L3-3): the actor reads the receipt
  only when its decision refuses, since a request accepted once and refused now
  is still its first answer; a decision to write is answered by the writer,
  which reads the receipt in the commit's transaction and writes nothing."""

from __future__ import annotations

import json
import threading

import pytest

from kungfud.actors import Runtime
from kungfud.daemon import bootstrap_admin
from kungfud.store import Committed, Failed, Replayed
from kungfud.wire import MemoryCreateArgs, MemoryRefArgs, MemoryUpdateArgs
from tests.actors.test_old_key import _Box, _act


def _together(rt: Runtime, agent: str, calls: list[tuple[str, str, object]]) -> list:
    """Submit ``calls`` (op, key, args) to their one actor in one message."""
    boxes, jobs = [], []
    for op, key, args in calls:
        box = _Box()
        jobs.append(rt.job(agent, op, key, args, box))
        boxes.append(box)
    actors = {rt.route(j) for j in jobs}
    assert len(actors) == 1
    rt.submit_many(jobs, actors.pop())
    return [b.wait() for b in boxes]


@pytest.mark.rules("L5-1", "L3-2")
def test_L5_1_jobs_told_together_are_decided_on_one_view_in_order(rt, monkeypatch):
    admin = bootstrap_admin(rt)
    m = json.loads(_act(rt, admin, "memory.create", "c", MemoryCreateArgs({"v": 0}), None).result)["memory"]
    opened = []
    read = rt.store.read

    def counted():
        opened.append(1)
        return read()

    monkeypatch.setattr(rt.store, "read", counted)
    calls = [("memory.update", f"u{n}", MemoryUpdateArgs(m, {"v": n})) for n in range(1, 9)]
    outs = _together(rt, admin, calls)
    assert all(isinstance(o, Committed) for o in outs), outs
    # Each update decided on the one before it, in order: versions 2..9.
    assert [json.loads(o.result)["version"] for o in outs] == list(range(2, 10))
    assert len(opened) == 1, "one view for the eight jobs of one message"
    # A refusal among them (a second withdraw) does not disturb the rest.
    outs = _together(rt, admin, [
        ("memory.withdraw", "w1", MemoryRefArgs(m)),
        ("memory.withdraw", "w2", MemoryRefArgs(m)),
        ("memory.update", "u-late", MemoryUpdateArgs(m, {"v": "late"})),
    ])
    assert isinstance(outs[0], Committed), outs
    assert isinstance(outs[1], Failed) and isinstance(outs[2], Failed), outs


@pytest.mark.rules("L3-2", "L3-3")
def test_L3_2_a_retry_refused_now_is_answered_from_its_receipt_and_one_accepted_now_writes_nothing(rt):
    admin = bootstrap_admin(rt)
    first = _act(rt, admin, "memory.create", "c", MemoryCreateArgs({"v": 0}), None)
    m = json.loads(first.result)["memory"]
    update = _act(rt, admin, "memory.update", "u", MemoryUpdateArgs(m, {"v": 1}), None)
    assert isinstance(_act(rt, admin, "memory.withdraw", "w", MemoryRefArgs(m), None), Committed)
    # The update would now be refused (withdrawn): its retry is its receipt.
    again = _act(rt, admin, "memory.update", "u", MemoryUpdateArgs(m, {"v": 1}), None)
    assert isinstance(again, Replayed) and again.result == update.result
    # The same key for another request, refused now: a mismatch, not the refusal.
    other = _act(rt, admin, "memory.update", "u", MemoryUpdateArgs(m, {"v": 2}), None)
    assert isinstance(other, Failed) and other.rejection.code == "idempotency_mismatch"
    # A create would be accepted again: the writer answers its receipt, no second Memory.
    again = _act(rt, admin, "memory.create", "c", MemoryCreateArgs({"v": 0}), None)
    assert isinstance(again, Replayed) and again.result == first.result
    other = _act(rt, admin, "memory.create", "c", MemoryCreateArgs({"v": "x"}), None)
    assert isinstance(other, Failed) and other.rejection.code == "idempotency_mismatch"
    # Retries together with new work in one message: each gets its own answer.
    outs = _together(rt, admin, [
        ("memory.create", "c", MemoryCreateArgs({"v": 0})),
        ("memory.create", "c2", MemoryCreateArgs({"v": 2})),
        ("memory.update", "u", MemoryUpdateArgs(m, {"v": 1})),
    ])
    assert isinstance(outs[0], Replayed) and outs[0].result == first.result, outs
    assert isinstance(outs[1], Committed), outs
    assert isinstance(outs[2], Replayed) and outs[2].result == update.result, outs
    with rt.store.read() as view:
        assert len(list(view.memories_of(admin, None))) == 1  # c2 only: m is withdrawn, c was written once


@pytest.mark.rules("L3-1", "L2-1")
def test_a_store_failure_in_the_shared_view_answers_that_job_unavailable_and_the_rest_go_on(rt, monkeypatch):
    """As on PostgreSQL: a read that loses the connection raises inside the
    view, and the backend names it StoreUnavailable as it leaves the view. The
    job that met it is answered ``unavailable`` (never ``internal``); the jobs
    after it read on views of their own and are written."""
    from contextlib import contextmanager

    from kungfud.errors import StoreUnavailable

    admin = bootstrap_admin(rt)
    m = json.loads(_act(rt, admin, "memory.create", "c", MemoryCreateArgs({"v": 0}), None).result)["memory"]
    read = rt.store.read
    opened = []

    class Lost(Exception):
        pass

    class Flaky:
        def __init__(self, view):
            self.view = view

        def obj(self, obj):
            if obj == m:
                raise Lost("connection lost")
            return self.view.obj(obj)

        def __getattr__(self, name):
            return getattr(self.view, name)

    @contextmanager
    def flaky():
        opened.append(1)
        with read() as view:
            try:
                yield Flaky(view) if len(opened) == 1 else view
            except Lost as e:  # what the PostgreSQL backend does with a lost connection
                raise StoreUnavailable("lost") from e

    monkeypatch.setattr(rt.store, "read", flaky)
    outs = _together(rt, admin, [
        ("memory.create", "c1", MemoryCreateArgs({"v": 1})),
        ("memory.update", "u1", MemoryUpdateArgs(m, {"v": 2})),
        ("memory.create", "c2", MemoryCreateArgs({"v": 3})),
        ("memory.update", "u2", MemoryUpdateArgs(m, {"v": 4})),
    ])
    assert isinstance(outs[0], Committed), outs
    assert isinstance(outs[1], Failed) and outs[1].rejection.code == "unavailable", outs
    assert isinstance(outs[2], Committed) and isinstance(outs[3], Committed), outs
    assert len(opened) == 3  # the shared view, then one each for the two jobs after the failure


@pytest.mark.rules("L5-1")
def test_L5_1_one_loop_turn_tells_each_carrier_once_and_every_actor_keeps_its_order(rt, monkeypatch):
    """The server's jobs of one loop turn (``Runtime.submit_turn``, issue 38):
    each carrier thread is told once with the messages of all its actors, and
    each actor still decides its own jobs in the order they came (L5-1)."""
    import pykka

    from kungfud.wire import PostArgs, ThreadCreateArgs

    admin = bootstrap_admin(rt)
    threads = [
        json.loads(_act(rt, admin, "thread.create", f"t{n}", ThreadCreateArgs(), None).result)["thread"]
        for n in range(24)
    ]
    told: list[object] = []  # what this thread (the event loop's, in a daemon) tells the carriers
    here, tell = threading.current_thread(), pykka.ActorRef.tell

    def counted(self, message):
        if threading.current_thread() is here:
            told.append(message)
        return tell(self, message)

    monkeypatch.setattr(pykka.ActorRef, "tell", counted)
    outgoing: dict[str, list] = {}
    boxes = []
    for t in threads:
        for n in range(3):
            box = _Box()
            job = rt.job(admin, "thread.post", f"p-{t}-{n}", PostArgs(t, content={"n": n}), box)
            outgoing.setdefault(rt.route(job), []).append(job)
            boxes.append((t, n, box))
    assert len(outgoing) == 24
    rt.submit_turn(outgoing)
    outs = [(t, n, b.wait()) for t, n, b in boxes]
    assert all(isinstance(o, Committed) for _, _, o in outs), outs
    assert len(told) <= rt.registry.threads < len(outgoing)  # one message per carrier, not per actor
    for t in threads:  # each Thread's posts are its entries 1, 2, 3, in the order sent
        assert [json.loads(o.result)["entry"] for tt, _, o in outs if tt == t] == [1, 2, 3]


@pytest.mark.rules("L5-1")
def test_a_turn_told_after_the_carriers_stopped_is_answered_unavailable(tmp_path):
    from kungfud.store import Store

    store = Store(str(tmp_path / "data"))
    rt = Runtime(store)
    rt.start()
    admin = bootstrap_admin(rt)
    rt.registry.tell(admin, None, {})  # the admin's actor exists before the carriers stop
    for ref in rt.registry._carriers:
        ref.stop()
    box = _Box()
    job = rt.job(admin, "memory.create", "late", MemoryCreateArgs({"v": 1}), box)
    rt.submit_turn({rt.route(job): [job]})
    out = box.wait()
    rt.stop()
    store.close()
    assert isinstance(out, Failed) and out.rejection.code == "unavailable", out
