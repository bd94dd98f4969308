"""The deadline sweep before each action of a Thread's actor (L4-3, D191).

An actor that owns deadlines records every expiry due at ``now`` before it
decides an action, so the deadline wins over an action that arrives after it
but before the deadline clock recorded it (L4-3). When nothing is due, the
action decides on the sweep's reads of the same snapshot: one read
transaction per action, not one for the sweep and another for the action.

In-process, on a protocol clock the test moves: the deadline clock sleeps on
the protocol's time, so after a jump only the actor's sweep can record the
expiry before the action is decided.
"""

from __future__ import annotations

import contextlib
import threading

import msgspec
import pytest

from kungfud.actors import Runtime
from kungfud.store import Committed, Failed, Store
from kungfud.wire.ops import OPS

T0 = 1_800_000_000_000  # ms


class _Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def world(tmp_path):
    clock = _Clock()
    store = Store(str(tmp_path / "data"))
    rt = Runtime(store, clock=clock)
    rt.start()
    yield rt, clock
    rt.stop()
    store.close()


def _act(rt: Runtime, agent: str | None, op: str, args: dict, _n=[0]):
    _n[0] += 1
    done, out = threading.Event(), []

    def reply(outcome) -> None:
        out.append(outcome)
        done.set()

    rt.act(agent, op, f"k{_n[0]}", msgspec.convert(args, OPS[op].args), reply)
    assert done.wait(10), f"no reply to {op}"
    return out[0]


def _ok(outcome) -> dict:
    assert isinstance(outcome, Committed), outcome
    return msgspec.json.decode(outcome.result)


def _thread_of_two(rt: Runtime) -> tuple[str, str, str]:
    a = _ok(_act(rt, None, "agent.register", {"content": {"name": "alice"}}))["agent"]
    b = _ok(_act(rt, None, "agent.register", {"content": {"name": "bob"}}))["agent"]
    t = _ok(_act(rt, a, "thread.create", {}))["thread"]
    token = _ok(_act(rt, a, "thread.admit", {"thread": t}))["token"]
    _ok(_act(rt, b, "thread.join", {"token": token}))
    return a, b, t


def _taken_assignment(rt: Runtime) -> tuple[str, str, str, str]:
    """Alice assigns to Bob, who takes it: its delivery is due in an hour."""
    a, b, t = _thread_of_two(rt)
    asg = _ok(_act(rt, a, "thread.post", {
        "thread": t, "content": {"text": "please"},
        "assign": {"to": b, "content": {"criteria": "x"}, "deliver_within_s": 3600},
    }))["assignment"]
    _ok(_act(rt, b, "assignment.take", {"assignment": asg}))
    return a, b, t, asg


@pytest.mark.rules("L4-3", "R6.4-13")
def test_L4_3_the_sweep_records_a_passed_deadline_before_the_action_it_would_lose_to(world):
    rt, clock = world
    a, b, t, asg = _taken_assignment(rt)
    clock.now += 2 * 3600 * 1000  # the delivery deadline passed; nothing has recorded it yet
    refused = _act(rt, b, "assignment.deliver", {"assignment": asg, "content": {"v": 1}})
    assert isinstance(refused, Failed) and refused.rejection.code == "conflict", refused
    with rt.store.read() as view:
        assert view.state(asg).state == "timed_out"
    # The Thread's next action decides on the expiry the sweep wrote.
    _ok(_act(rt, a, "thread.post", {"thread": t, "content": {"text": "after"}}))


@pytest.mark.rules("L4-3")
def test_an_action_with_nothing_due_reads_one_snapshot(world):
    """D191: the sweep and the action share one read transaction."""
    rt, clock = world
    a, b, t, asg = _taken_assignment(rt)  # a running deadline, not due
    reads = []
    real = rt.store.read

    @contextlib.contextmanager
    def counted():
        if threading.current_thread().name.startswith("kungfud-actors"):  # not the deadline clock's
            reads.append(threading.current_thread().name)
        with real() as view:
            yield view

    rt.store.read = counted  # type: ignore[method-assign]
    try:
        _ok(_act(rt, a, "thread.post", {"thread": t, "content": {"text": "more"}, "ask": [b]}))
    finally:
        rt.store.read = real  # type: ignore[method-assign]
    assert len(reads) == 1, reads
    with rt.store.read() as view:
        assert view.state(asg).state == "taken"
