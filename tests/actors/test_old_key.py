"""WIRE.md ``agent.rotate_key``: "the old key stops working at once" (D185).

Every action and read carries the hash of the key its connection
authenticated with; the runtime compares it with the agent's current key in
the same view the answer comes from: an action in its actor (whose read of the
caller is version-checked at the commit, L5), a read and an admission-refused
replay in theirs. A rotated key gets no replay either."""

from __future__ import annotations

import threading

import pytest

from kungfud.actors import KEY_REVOKED, Runtime
from kungfud.daemon import bootstrap_admin
from kungfud.store import Committed, Failed, Replayed
from kungfud.wire import MemoryCreateArgs, RotateKeyArgs, WhoamiArgs


def _key_hash(rt: Runtime, agent: str) -> bytes:
    with rt.store.read() as view:
        return view.state(agent).key_hash


class _Box:
    """A job's reply, awaited."""

    def __init__(self):
        self.done = threading.Event()
        self.outcome = None

    def __call__(self, outcome) -> None:
        self.outcome = outcome
        self.done.set()

    def wait(self):
        assert self.done.wait(10), "no reply"
        return self.outcome


def _job(rt: Runtime, agent: str, op: str, key: str, args, key_hash: bytes | None):
    box = _Box()
    return rt.job(agent, op, key, args, box, key_hash), box


def _act(rt: Runtime, agent: str, op: str, key: str, args, key_hash: bytes | None):
    job, box = _job(rt, agent, op, key, args, key_hash)
    rt.submit(job, rt.route(job))
    return box.wait()


@pytest.mark.rules("R4-3", "L3-2")
def test_a_job_with_a_rotated_key_is_refused_even_with_a_receipt_and_the_current_key_works(rt):
    admin = bootstrap_admin(rt)
    old = _key_hash(rt, admin)
    note = MemoryCreateArgs({"text": "hi"})
    first = _act(rt, admin, "memory.create", "k1", note, old)
    assert isinstance(first, Committed)
    assert isinstance(_act(rt, admin, "memory.create", "k1", note, old), Replayed)  # before: a replay
    assert isinstance(_act(rt, admin, "agent.rotate_key", "r1", RotateKeyArgs(), old), Committed)
    new = _key_hash(rt, admin)
    assert new != old
    # The old key: refused, its receipt notwithstanding (no replay), and nothing new.
    assert _act(rt, admin, "memory.create", "k1", note, old) == Failed(KEY_REVOKED)
    assert _act(rt, admin, "memory.create", "k2", note, old) == Failed(KEY_REVOKED)
    assert KEY_REVOKED.code == "unauthenticated" and KEY_REVOKED.next == "stop"
    # The current key: as before.
    again = _act(rt, admin, "memory.create", "k1", note, new)
    assert isinstance(again, Replayed) and again.result == first.result
    assert isinstance(_act(rt, admin, "memory.create", "k2", note, new), Committed)
    # No key hash (an in-process caller, not a connection): not checked.
    assert isinstance(_act(rt, admin, "memory.create", "k3", note, None), Committed)
    with rt.store.read() as view:
        assert len(list(view.memories_of(admin, None))) == 3  # k1, k2, k3: none by the old key after the rotation


@pytest.mark.rules("R4-3")
def test_reads_subscribe_and_replays_refused_by_admission_check_the_key_in_the_same_view(rt):
    admin = bootstrap_admin(rt)
    old = _key_hash(rt, admin)
    note = MemoryCreateArgs({"text": "hi"})
    assert isinstance(_act(rt, admin, "memory.create", "k1", note, old), Committed)
    assert rt.read("agent.whoami", admin, WhoamiArgs(), key_hash=old)["agent"] == admin
    stale_job, _ = _job(rt, admin, "memory.create", "k1", note, old)
    assert isinstance(rt.answered(stale_job), Replayed)
    assert rt.key_check(admin, old) is None
    assert isinstance(_act(rt, admin, "agent.rotate_key", "r1", RotateKeyArgs(), old), Committed)
    new = _key_hash(rt, admin)
    assert rt.read("agent.whoami", admin, WhoamiArgs(), key_hash=old) == KEY_REVOKED
    assert rt.answered(stale_job) == Failed(KEY_REVOKED)
    assert rt.key_check(admin, old) == KEY_REVOKED and rt.key_check(admin, new) is None  # subscribe
    assert rt.read("agent.whoami", admin, WhoamiArgs(), key_hash=new)["agent"] == admin
    current_job, _ = _job(rt, admin, "memory.create", "k1", note, new)
    assert isinstance(rt.answered(current_job), Replayed)


@pytest.mark.rules("R4-3", "L5-1")
def test_an_action_queued_behind_the_rotation_in_one_actor_is_refused(rt):
    """The sliver on one node: jobs handed to the actor together, the rotation
    first — the action after it is decided on the rotated state (the actor's
    overlay) and refused, never committed with the old key."""
    admin = bootstrap_admin(rt)
    old = _key_hash(rt, admin)
    rotate, rotated = _job(rt, admin, "agent.rotate_key", "r1", RotateKeyArgs(), old)
    create, created = _job(rt, admin, "memory.create", "k1", MemoryCreateArgs({"text": "late"}), old)
    actor = rt.route(rotate)
    assert rt.route(create) == actor  # one agent's actor serializes both
    rt.submit_many([rotate, create], actor)
    assert isinstance(rotated.wait(), Committed)
    assert created.wait() == Failed(KEY_REVOKED)
    with rt.store.read() as view:
        assert list(view.memories_of(admin, None)) == []
