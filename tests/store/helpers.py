"""Builders for store tests: real LMDB in a temp dir, the real Writer, and Items
assembled from the core's own decisions the way the actors assemble them
(kungfud/actors/object_actor.py ``_handle``, kungfud/daemon.py ``bootstrap_admin``)."""

from __future__ import annotations

import itertools
import json
import threading
from typing import Any, Callable

from kungfud.core import agent as agent_core
from kungfud.core import deactivation
from kungfud.core import engagement as engagement_core
from kungfud.core import memory as memory_core
from kungfud.core import task as task_core
from kungfud.core import work
from kungfud.core.context import Ctx, Limits
from kungfud.core.facts import Decision
from kungfud.errors import Rejection
from kungfud.store import Committer, Item, Outcome, Recorder, Store, Writer
from kungfud.store.layout import DBS, receipt_scope
from kungfud.testing.faults import InjectedFault  # the writer logs it without a traceback

__all__ = [
    "T0",
    "InjectedFault",
    "FaultPlan",
    "Ids",
    "dump",
    "decided",
    "task_item",
    "take_item",
    "drop_item",
    "register_item",
    "create_item",
    "update_item",
    "set_status_item",
    "reporting",
    "run_batch",
    "commit",
]

T0 = 1_764_504_000_000  # 2025-11-30T12:00:00.000Z
# Map-size tests need content past the wire's 256 KiB limit; the core takes the
# limit from the context, so the store sees what a larger configured limit allows.
BIG = Limits(max_content_bytes=64 * 1024 * 1024)


class FaultPlan:
    """A ``fault`` hook that raises once: at the first call of ``point`` while the
    ``item``-th item (1-based, counted from arming) is written, or at the batch
    commit for ``point="commit"``.

    The Writer calls ``fault("log")`` once per fact before writing it; every item
    here has one fact, so the count of "log" calls says which item is written."""

    def __init__(self, point: str, item: int = 1):
        self.point = point
        self.item = item
        self.armed = False
        self.fired = False
        self._items = 0

    def arm(self) -> None:
        self.armed, self.fired, self._items = True, False, 0

    def __call__(self, point: str) -> None:
        if not self.armed or self.fired:
            return
        if point == "log":
            self._items += 1
        if point == self.point and (point == "commit" or self._items == self.item):
            self.fired = True
            raise InjectedFault(f"injected fault at {point!r} of item {self.item}")


class Ids:
    """Deterministic ids in the daemon's shape (prefix + 26 base32 chars)."""

    def __init__(self) -> None:
        self._n = itertools.count(1)

    def __call__(self, prefix: str) -> str:
        return f"{prefix}{next(self._n):026d}"


_secrets = itertools.count(1)


def _ctx(caller: agent_core.AgentState | None, ids: Ids) -> Ctx:
    return Ctx(now=T0, caller=caller, new_id=ids, new_secret=lambda: f"kf_test{next(_secrets)}", limits=BIG)


def _item(decision: Decision | Rejection, scope: bytes | None, req_hash: bytes, expect: dict[str, int]) -> Item:
    assert isinstance(decision, Decision), decision
    expect = dict(expect)
    for obj in decision.states:
        expect.setdefault(obj, 0)  # created by this action: must not exist yet
    return Item(
        scope=scope,
        req_hash=req_hash,
        facts=decision.facts,
        states=decision.states,
        expect=expect,
        result=decision.result,
        done=lambda outcome: None,  # replaced by run_batch
    )


def decided(store: Store, caller: str | None, decide: Callable[[Any, Ctx], Any], command: Any, ids: Ids,
            scope: bytes | None, req_hash: bytes, *, now: int = T0) -> Item:
    """An Item for ``decide(command, ctx)`` on the store's current states, with
    the version of every object the decision read (as the actors record it)."""
    expect: dict[str, int] = {}
    with store.read() as view:

        def get(obj: str) -> Any:
            version, state = view.obj(obj)
            expect.setdefault(obj, version)
            return state

        caller_state = get(caller) if caller else None
        ctx = Ctx(now=now, caller=caller_state, new_id=ids, new_secret=lambda: f"kf_test{next(_secrets)}", limits=BIG, get=get)
        d = decide(command, ctx)
    return _item(d, scope, req_hash, expect)


CONTRACT = b'{"output":"o","criteria":"c"}'


def task_item(store: Store, caller: str, ids: Ids, key: str, audience: list[str] | None) -> Item:
    """``task.create`` (deliver within 60 s) for ``audience`` (None: open)."""
    cmd = task_core.CreateTask(audience, task_core.ContractSpec(CONTRACT, deliver_within_s=60))
    scope = receipt_scope(caller, "task.create", key)
    return decided(store, caller, task_core.decide_create, cmd, ids, scope, f"task:{audience}".encode())


def take_item(store: Store, caller: str, task: str, ids: Ids, key: str, *, now: int = T0) -> Item:
    """``task.take`` without a delivery: a taken engagement with a deadline."""
    scope = receipt_scope(caller, "task.take", key)
    return decided(store, caller, engagement_core.decide_take, work.Take(task), ids, scope,
                   f"take:{task}".encode(), now=now)


def drop_item(store: Store, caller: str, engagement: str, ids: Ids, key: str) -> Item:
    scope = receipt_scope(caller, "task.drop", key)
    return decided(store, caller, engagement_core.decide_drop, work.Drop(engagement), ids, scope,
                   f"drop:{engagement}".encode())


def register_item(ids: Ids, key: str, name: str = "agent", *, admin: bool = False) -> Item:
    """``agent.register``; ``admin`` as the daemon's bootstrap makes its first agent."""
    content = json.dumps({"name": name}).encode()
    d = agent_core.decide_register(agent_core.Register(content, admin=admin), _ctx(None, ids), bootstrap=admin)
    return _item(d, receipt_scope(None, "agent.register", key), b"register:" + content, {})


def set_status_item(store: Store, caller: str, target: str, status: str, ids: Ids, key: str) -> Item:
    """``admin.agent.set_status`` decided on the store's current states."""
    with store.read() as view:
        cv, cstate = view.obj(caller)
        tv, tstate = view.obj(target)
    d = deactivation.decide_set_status(tstate, agent_core.SetStatus(target, status), _ctx(cstate, ids))  # type: ignore[arg-type]
    scope = receipt_scope(caller, "admin.agent.set_status", key)
    return _item(d, scope, f"status:{target}:{status}".encode(), {caller: cv, target: tv})


def create_item(store: Store, caller: str, ids: Ids, key: str, content: bytes, *, req_hash: bytes | None = None) -> Item:
    """``memory.create`` decided on the caller's current account state."""
    with store.read() as view:
        version, state = view.obj(caller)
    d = memory_core.decide_create(memory_core.CreateMemory(content), _ctx(state, ids))
    scope = receipt_scope(caller, "memory.create", key)
    return _item(d, scope, req_hash or b"create:" + content, {caller: version})


def update_item(store: Store, caller: str, memory: str, ids: Ids, key: str, content: bytes) -> Item:
    """``memory.update`` decided on the state the store holds now."""
    with store.read() as view:
        cv, cstate = view.obj(caller)
        mv, mstate = view.obj(memory)
    d = memory_core.decide_update(mstate, memory_core.Update(memory, content), _ctx(cstate, ids))
    scope = receipt_scope(caller, "memory.update", key)
    return _item(d, scope, b"update:" + memory.encode() + b":" + content, {caller: cv, memory: mv})


class Reported:
    """What one item's ``done`` saw: the outcome, and whether a fresh read
    transaction opened at that moment already showed the item's receipt."""

    def __init__(self) -> None:
        self.outcome: Outcome | None = None
        self.receipt_visible: bool | None = None
        self.event = threading.Event()


def reporting(items: list[Item], reader: Recorder) -> list[Reported]:
    """Give each item a ``done`` that records its outcome and whether ``reader``
    already showed its receipt at that moment."""
    reports = []
    for item in items:
        rep = Reported()

        def done(outcome: Outcome, rep: Reported = rep, scope: bytes | None = item.scope) -> None:
            if scope is not None:
                with reader.read() as view:
                    rep.receipt_visible = view.receipt(scope) is not None
            rep.outcome = outcome
            rep.event.set()

        item.done = done
        reports.append(rep)
    return reports


def run_batch(
    writer: Committer, items: list[Item], *, start: bool = False, timeout: float = 15.0, store: Recorder | None = None
) -> list[Reported]:
    """Submit ``items`` and wait for every outcome. With ``start``, the writer is
    started only after all are queued, so they drain as one batch. ``store``
    (default: the writer's) is read as each outcome is reported."""
    reports = reporting(items, store or writer.store)  # type: ignore[attr-defined]
    for item in items:
        writer.submit(item)
    if start:
        writer.start()
    for rep in reports:
        assert rep.event.wait(timeout), "the writer never reported an item"
    return reports


def commit(store: Store, items: list[Item]) -> list[Outcome]:
    """Write ``items`` as one batch with a throwaway writer (setup steps of a
    test), on this thread."""
    outcomes: list[Outcome | None] = [None] * len(items)
    for i, item in enumerate(items):
        item.done = lambda outcome, i=i: outcomes.__setitem__(i, outcome)
    Writer(store).write_batch(items)
    assert all(o is not None for o in outcomes), outcomes
    return outcomes  # type: ignore[return-value]


def dump(store: Store) -> dict[str, dict[bytes, bytes]]:
    """Every row of every database, for before/after comparisons."""
    with store.env.begin() as txn:
        return {name: dict(txn.cursor(db=store.dbs[name])) for name in DBS}
