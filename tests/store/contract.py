"""The store contract: one abstract test suite every backend runs unchanged
(docs/storage.md "The store interface"; STYLE.md "one store test suite for every
backend").

A backend runs it by subclassing :class:`StoreContract` in a test module that
defines a ``backend`` fixture (LMDB: ``tests/store/test_lmdb_contract.py``).

The fixture's contract: each test gets a fresh, empty store. The fixture yields
an object with (see :class:`Backend` below)
- ``store``: the backend under test, a :class:`kungfud.store.interface.Backend`
  (``read()``, ``events_for``, ``last_seq``, ``begin_write()``, ``storage_error``,
  ``usage``, ``close``); after ``reopen()`` the attribute names the new one;
- ``writer(**hooks)``: a new ``kungfud.store.writer.Writer`` over ``store``, not
  started (hooks: ``fault``, ``clock``, ``on_events``, ``on_deadline``);
- ``reopen()``: close the store and open the same data again (a restart);
- ``rows()``: every row of every table of ``layout.DBS``;
- ``check()``: the derived rows compared with their rebuild from the log
  (``check.compare(store, check.expected_indexes(store))`` works for any backend);
and closes the store (and drops its data) when the test ends.

The tests use only that: the interface (``Backend``, ``Committer``, the ``View``
queries the actors use, the kv layer of ``view.kv`` and ``begin_write().tx``)
plus the fixture's rows, rebuild check and restart. The kv layer's own tests
are ``tests/store/kv_contract.py`` (mixed in).

Guarantees covered: an acknowledged commit is durable and visible (L1-4); one
action is all or nothing and never takes its batch-mates down, a failed commit
acknowledges nothing (L2-1); a storage failure at any write point is
``unavailable`` with nothing written; versions are checked at commit (L5-1);
receipts (L3-2, L3-3, L3-6); the stored state is the fold of the facts (L1-1);
index and deadline rows follow the state; the per-agent event feed is gap-free
and ordered; read views are snapshots (R9-5); the kv layer (get/scan/count,
put/delete/clear, nested transactions, snapshot isolation).
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Protocol

import msgspec
import pytest

from kungfud.store import Committed, Committer, Failed, Item, Outcome, Replayed, Stale
from kungfud.store import codec
from kungfud.store.hooks import put_cursors
from kungfud.store.interface import Backend as StoreBackend
from kungfud.store.layout import DBS, encode_object
from kungfud.testing.faults import NthCallFault
from tests.store.kv_contract import KvContract
from tests.store.helpers import (
    T0,
    FaultPlan,
    Ids,
    create_item,
    drop_item,
    register_item,
    run_batch,
    set_status_item,
    take_item,
    task_item,
    update_item,
)

__all__ = ["Backend", "StoreContract"]


class Backend(Protocol):
    """What a backend's ``backend`` fixture yields to the contract suite."""

    store: StoreBackend

    def writer(self, **hooks: Any) -> Committer:
        """A new committer over ``store``, not started. ``hooks``: ``fault``,
        ``clock``, ``on_events``, ``on_deadline`` (as ``Writer`` takes them)."""

    def reopen(self) -> None:
        """Close the store and open the same data again (a restart)."""

    def rows(self) -> dict[str, dict[bytes, bytes]]:
        """Every row of every table (``layout.DBS``), for before/after comparisons."""

    def check(self) -> list[str]:
        """The derived rows compared with their rebuild from the log: problems."""


# --- helpers over the interface ------------------------------------------------------------


def commit(backend: Backend, items: list[Item], **hooks: Any) -> list[Outcome]:
    """Write ``items`` as one batch on this thread."""
    outcomes: list[Outcome | None] = [None] * len(items)
    for i, item in enumerate(items):
        item.done = lambda outcome, i=i: outcomes.__setitem__(i, outcome)
    backend.writer(**hooks).write_batch(items)
    assert all(o is not None for o in outcomes), outcomes
    return outcomes  # type: ignore[return-value]


@contextmanager
def running(backend: Backend, **hooks: Any) -> Iterator[Committer]:
    w = backend.writer(**hooks)
    w.start()
    try:
        yield w
    finally:
        w.stop()


def agent(backend: Backend, ids: Ids, name: str = "alice", *, admin: bool = False) -> str:
    (out,) = commit(backend, [register_item(ids, f"reg-{name}", name, admin=admin)])
    assert isinstance(out, Committed), out
    return json.loads(out.result)["agent"]


def content(n: int, size: int = 40) -> bytes:
    return json.dumps({"n": n, "body": "x" * size}).encode()


def new_rows(before: dict, after: dict) -> dict[str, dict[bytes, bytes]]:
    return {db: {k: v for k, v in rows.items() if before[db].get(k) != v} for db, rows in after.items()}


def gone_rows(before: dict, after: dict) -> dict[str, set[bytes]]:
    return {db: set(rows) - set(after[db]) for db, rows in before.items()}


def mentions(rows: dict[str, dict[bytes, bytes]], ident: str) -> list[tuple[str, bytes]]:
    """Rows whose key names ``ident`` or whose log fact is about it."""
    needle = ident.encode()
    found = [(db, k) for db, r in rows.items() for k in r if needle in k]
    found += [("log", k) for k, v in rows["log"].items() if needle in v]
    return found


def memory_of(out: Outcome) -> str:
    assert isinstance(out, Committed), out
    return json.loads(out.result)["memory"]


def unavailable(out: Outcome | None) -> None:
    assert isinstance(out, Failed), out
    assert out.rejection.code == "unavailable" and out.rejection.next == "retry", out
    assert "nothing was written" in out.rejection.reason, out


class StoreContract(KvContract):
    """Subclass in a module that defines the ``backend`` fixture (the kv
    layer's tests, tests/store/kv_contract.py, come with it)."""

    # --- L1-4: acknowledged means durable and visible ---------------------------------

    @pytest.mark.rules("L1-4", "L1-2")
    def test_L1_4_an_acknowledged_commit_is_visible_when_reported_and_readable_after_a_restart(self, backend: Backend):
        ids = Ids()
        alice = agent(backend, ids)
        store = backend.store
        with running(backend) as w:
            created = create_item(store, alice, ids, "c", content(1))
            (rc,) = run_batch(w, [created], store=store)
            memory = memory_of(rc.outcome)
            updated = update_item(store, alice, memory, ids, "u", content(2))
            (ru,) = run_batch(w, [updated], store=store)
        assert rc.receipt_visible and ru.receipt_visible, "an outcome was reported before its commit was visible"
        assert isinstance(ru.outcome, Committed)
        backend.reopen()
        store = backend.store
        assert store.last_seq() == ru.outcome.last_seq
        with store.read() as view:
            version, state = view.obj(memory)
            assert (version, state.latest) == (2, 2)
            assert view.memory_content(memory, 1) == content(1) and view.memory_content(memory, 2) == content(2)
            assert view.receipt(created.scope).result == rc.outcome.result  # type: ignore[union-attr, arg-type]
            assert list(view.memories_of(alice, None)) == [memory]
        assert backend.check() == []

    # --- L2-1: one action is all or nothing; a commit is all or nothing ---------------------

    @pytest.mark.rules("L2-1", "L1-4")
    @pytest.mark.parametrize("point", ["log", "objects", "index", "receipt"])
    def test_L2_1_item_failing_mid_write_commits_batch_mates_and_writes_nothing_of_itself(self, backend: Backend, point):
        ids = Ids()
        alice = agent(backend, ids)
        store = backend.store
        before = backend.rows()
        fault = FaultPlan(point, item=2)
        w = backend.writer(fault=fault)
        items = [create_item(store, alice, ids, f"k{i}", content(i)) for i in range(3)]
        doomed = items[1].result["memory"]
        fault.arm()
        try:
            reports = run_batch(w, items, start=True, store=store)
        finally:
            w.stop()
        assert fault.fired
        assert w.batches == 1 and w.items == 3, "the three items were meant to share one batch"
        first, failed, third = (r.outcome for r in reports)
        unavailable(failed)
        kept = [memory_of(first), memory_of(third)]

        after = backend.rows()
        new = new_rows(before, after)
        assert mentions(new, doomed) == [], "the failed item left rows behind"
        assert items[1].scope not in after["receipts"]
        assert not any(gone_rows(before, after).values()), "a create removed rows"
        # Exactly the two batch-mates' effects, with no gap in the fact sequence.
        seq = store.last_seq()
        assert len(after["log"]) == seq == len(before["log"]) + 2
        assert {items[0].scope, items[2].scope} <= after["receipts"].keys()
        with store.read() as view:
            assert all(view.fact(s) is not None for s in range(1, seq + 1))
            assert sorted(view.fact(s).memory for s in (seq - 1, seq)) == sorted(kept)
            assert sorted(view.memories_of(alice, None)) == sorted(kept)
            assert all(view.obj(m)[0] == 1 for m in kept)
        # Reported only once the commit is visible to any reader (L1-4).
        assert reports[0].receipt_visible and reports[2].receipt_visible
        assert backend.check() == []

        # The failure stored no receipt, so a retry of the same request executes.
        (retry,) = commit(backend, [create_item(store, alice, ids, "k1", content(1))])
        assert isinstance(retry, Committed)

    @pytest.mark.rules("L2-1", "L1-4")
    def test_L2_1_failed_commit_acknowledges_nothing_and_leaves_store_unchanged(self, backend: Backend):
        ids = Ids()
        alice = agent(backend, ids)
        store = backend.store
        (m,) = commit(backend, [create_item(store, alice, ids, "m", content(0))])
        memory = memory_of(m)
        before = backend.rows()
        fault = FaultPlan("commit")
        w = backend.writer(fault=fault)

        def batch() -> list[Item]:
            return [
                create_item(store, alice, ids, "c1", content(1)),
                update_item(store, alice, memory, ids, "u1", content(2)),
                register_item(ids, "reg-bob", "bob"),
            ]

        fault.arm()
        try:
            reports = run_batch(w, batch(), start=True, store=store)
            assert fault.fired
            for r in reports:
                unavailable(r.outcome)
                assert r.receipt_visible is False
            assert backend.rows() == before, "a failed commit changed the store"
            assert w.batches == 0

            # The writer keeps serving; nothing was recorded, so the same requests run.
            again = run_batch(w, batch(), store=store)
        finally:
            w.stop()
        assert all(isinstance(r.outcome, Committed) for r in again), [r.outcome for r in again]
        assert json.loads(again[1].outcome.result) == {"memory": memory, "version": 2}  # type: ignore[union-attr]
        assert backend.check() == []

    @pytest.mark.rules("L2-1", "L1-4")
    def test_L2_1_a_storage_failure_at_any_write_point_is_unavailable_and_writes_nothing(self, backend: Backend):
        """Walk a failure through every write of one action that creates,
        moves and removes index rows, feed rows and a deadline (a take, then a
        drop): each is refused with nothing written, then the same action runs."""
        ids = Ids()
        alice, bob = agent(backend, ids), agent(backend, ids, "bob")
        store = backend.store
        (t,) = commit(backend, [task_item(store, alice, ids, "t", [bob])])
        task = json.loads(t.result)["task"]  # type: ignore[union-attr]
        engagement = None
        for make in (
            lambda: take_item(store, bob, task, ids, "take"),
            lambda: drop_item(store, bob, engagement, ids, "drop"),  # type: ignore[arg-type]
        ):
            n = 0
            while True:
                n += 1
                assert n < 100, "the walk never ran past the action's last write"
                before = backend.rows()
                fault = NthCallFault(n, armed=True)
                (out,) = commit(backend, [make()], fault=fault)
                if fault.calls < n:  # past the last write point: the action is written
                    break
                unavailable(out)
                assert backend.rows() == before, f"a failure at write {n} left rows behind"
            assert isinstance(out, Committed), out
            assert n > 4, "an action with facts, objects, index rows and a receipt passes several write points"
            engagement = engagement or json.loads(out.result)["engagement"]
        assert backend.check() == []

    # --- L5-1: versions re-checked at commit ----------------------------------------------------

    @pytest.mark.rules("L5-1", "L2-1")
    def test_L5_1_update_decided_on_a_moved_version_is_stale_and_writes_nothing(self, backend: Backend):
        ids = Ids()
        alice = agent(backend, ids)
        store = backend.store
        (m,) = commit(backend, [create_item(store, alice, ids, "m", content(0))])
        memory = memory_of(m)
        # Two updates decided on version 1, written in one batch: the first wins.
        a = update_item(store, alice, memory, ids, "ua", content(1))
        b = update_item(store, alice, memory, ids, "ub", content(2))
        late = update_item(store, alice, memory, ids, "uc", content(3))
        w = backend.writer()
        try:
            ra, rb = run_batch(w, [a, b], start=True, store=store)
            assert json.loads(ra.outcome.result) == {"memory": memory, "version": 2}  # type: ignore[union-attr]
            assert rb.outcome == Stale(memory)
            assert rb.receipt_visible is False
            before = backend.rows()
            (rc,) = run_batch(w, [late], store=store)
        finally:
            w.stop()
        assert rc.outcome == Stale(memory)
        assert backend.rows() == before
        with store.read() as view:
            version, state = view.obj(memory)
            assert (version, state.latest) == (2, 2)
            assert view.memory_content(memory, 2) == content(1)
            assert view.memory_content(memory, 3) is None
            assert view.receipt(b.scope) is None and view.receipt(late.scope) is None  # type: ignore[arg-type]

    @pytest.mark.rules("L5-1", "R4-1")
    def test_L5_1_action_decided_before_its_agent_was_deactivated_is_stale(self, backend: Backend):
        ids = Ids()
        admin = agent(backend, ids, "root", admin=True)
        alice = agent(backend, ids)
        store = backend.store
        create = create_item(store, alice, ids, "c", content(1))  # decided while active
        deactivate = set_status_item(store, admin, alice, "deactivated", ids, "off")  # type: ignore[arg-type]
        w = backend.writer()
        try:
            off, late = run_batch(w, [deactivate, create], start=True, store=store)
        finally:
            w.stop()
        assert isinstance(off.outcome, Committed)
        assert late.outcome == Stale(alice)
        with store.read() as view:
            assert view.state(alice).status == "deactivated"
            assert list(view.memories_of(alice, None)) == []
            assert view.receipt(create.scope) is None  # type: ignore[arg-type]

    @pytest.mark.rules("L5-1", "L4-3")
    def test_L5_1_an_action_past_its_validity_is_stale_and_writes_nothing(self, backend: Backend):
        ids = Ids()
        alice = agent(backend, ids)
        store = backend.store
        item = create_item(store, alice, ids, "c", content(1))
        item.valid_until = T0 + 10  # a deadline the decision read comes due at T0 + 10
        before = backend.rows()
        (out,) = commit(backend, [item], clock=lambda: T0 + 10)
        assert out == Stale("deadline")
        assert backend.rows() == before
        (out,) = commit(backend, [create_item(store, alice, ids, "c", content(1))], clock=lambda: T0 + 10)
        assert isinstance(out, Committed)

    # --- L3: receipts -----------------------------------------------------------------------------

    @pytest.mark.rules("L3-2", "L3-1")
    def test_L3_2_receipt_present_turns_a_duplicate_into_a_replay_of_the_first_result(self, backend: Backend):
        ids = Ids()
        alice = agent(backend, ids)
        store = backend.store
        (first,) = commit(backend, [create_item(store, alice, ids, "k", content(1))])
        before = backend.rows()
        # A duplicate decided afresh (a new memory id) must still return the first result.
        dup = create_item(store, alice, ids, "k", content(1))
        # Two duplicates racing in one batch: the second meets the first's receipt.
        x = create_item(store, alice, ids, "k2", content(2))
        y = create_item(store, alice, ids, "k2", content(2))
        rd, rx, ry = commit(backend, [dup, x, y])
        assert isinstance(first, Committed)
        assert rd == Replayed(first.result)
        assert isinstance(rx, Committed)
        assert ry == Replayed(rx.result)
        new = new_rows(before, backend.rows())
        assert len(new["log"]) == 1 and list(new["memories"]) == [alice.encode() + b"\x00" + memory_of(rx).encode()]
        assert mentions(new, dup.result["memory"]) == [] and mentions(new, y.result["memory"]) == []

    @pytest.mark.rules("L3-3")
    def test_L3_3_same_key_with_a_different_request_is_idempotency_mismatch_without_effect(self, backend: Backend):
        ids = Ids()
        alice = agent(backend, ids)
        store = backend.store
        (first,) = commit(backend, [create_item(store, alice, ids, "k", content(1))])
        before = backend.rows()
        other = create_item(store, alice, ids, "k", content(2))
        x = create_item(store, alice, ids, "k2", content(3))
        y = create_item(store, alice, ids, "k2", content(4))  # same batch, different request
        ro, rx, ry = commit(backend, [other, x, y])
        for r in (ro, ry):
            assert isinstance(r, Failed), r
            assert (r.rejection.code, r.rejection.next) == ("idempotency_mismatch", "revise")
        assert isinstance(rx, Committed)
        new = new_rows(before, backend.rows())
        assert len(new["log"]) == 1
        assert mentions(new, other.result["memory"]) == [] and mentions(new, y.result["memory"]) == []
        with store.read() as view:
            assert view.receipt(other.scope).result == first.result  # type: ignore[union-attr, arg-type]

    @pytest.mark.rules("L3-6", "L3-2")
    def test_L3_6_replayed_registration_returns_the_receipt_with_its_secret_nulled(self, backend: Backend):
        ids = Ids()
        (first,) = commit(backend, [register_item(ids, "reg", "alice")])
        (again,) = commit(backend, [register_item(ids, "reg", "alice")])
        got = json.loads(first.result)  # type: ignore[union-attr]
        assert got["key"].startswith("kf_")
        assert isinstance(again, Replayed)
        assert json.loads(again.result) == {"agent": got["agent"], "key": None}
        assert len(backend.rows()["agent_keys"]) == 1

    # --- L1-1: the store holds only the fold of the facts it records ---------------------------

    @pytest.mark.rules("L1-1", "L2-1")
    @pytest.mark.parametrize("claimed", ["none", "honest", "lying"])
    def test_L1_1_the_writer_stores_only_the_fold_of_the_facts_it_records(self, backend: Backend, claimed):
        """The writer folds every action's facts itself. A decision carrying
        another state is refused with nothing written (its batch-mate commits)
        unless the stored bytes it claims are those of the fold — then the fold
        is what is stored. Either way the store holds exactly the fold of its
        facts."""
        ids = Ids()
        alice = agent(backend, ids)
        store = backend.store
        good = create_item(store, alice, ids, "good", content(1))
        bad = create_item(store, alice, ids, "bad", content(2))
        (mem,) = [o for o in bad.states if o.startswith("me_")]
        fold = bad.states[mem]
        honest = {o: encode_object(bad.expect.get(o, 0) + 1, s) for o, s in bad.states.items()}
        forged = msgspec.structs.replace(fold, visibility="public")
        bad.states = {**bad.states, mem: forged}
        if claimed == "honest":  # the bytes of the true fold
            bad.encoded = honest
        elif claimed == "lying":  # bytes that match the forged state
            bad.encoded = {**honest, mem: encode_object(1, forged)}
        good_mem = next(o for o in good.states if o.startswith("me_"))
        before = backend.rows()
        bad_out, good_out = commit(backend, [bad, good])
        assert memory_of(good_out) == good_mem
        with store.read() as view:
            if claimed == "honest":
                assert isinstance(bad_out, Committed), bad_out
                assert view.obj(mem) == (1, fold)
            else:
                assert isinstance(bad_out, Failed) and bad_out.rejection.code == "internal", bad_out
                assert view.receipt(bad.scope) is None and view.obj(mem) == (0, None)  # type: ignore[arg-type]
                assert mentions(new_rows(before, backend.rows()), mem) == []

    # --- derived rows follow the state; deadlines --------------------------------------------

    @pytest.mark.rules("R7.3-4", "R8-2", "L1-1")
    def test_index_and_deadline_rows_are_added_and_removed_with_the_state(self, backend: Backend):
        ids = Ids()
        alice, bob = agent(backend, ids), agent(backend, ids, "bob")
        store = backend.store
        (t,) = commit(backend, [task_item(store, alice, ids, "t", [bob])])
        task = json.loads(t.result)["task"]  # type: ignore[union-attr]
        dues: list[int] = []
        before = backend.rows()
        (took,) = commit(backend, [take_item(store, bob, task, ids, "take")], on_deadline=dues.append)
        engagement = json.loads(took.result)["engagement"]  # type: ignore[union-attr]
        taken = new_rows(before, backend.rows())
        (deadline,) = taken["deadlines"].items()
        assert engagement.encode() in deadline[0] and deadline[1] == task.encode()
        assert dues == [T0 + 60_000], "the committer reports the earliest deadline it added"
        assert any(bob.encode() in k and engagement.encode() in k for k in taken["engagements"])
        assert [k for k in taken["obligations"] if k.startswith(bob.encode())], "bob's deliver obligation is indexed"

        before = backend.rows()
        (dropped,) = commit(backend, [drop_item(store, bob, engagement, ids, "drop")], on_deadline=dues.append)
        assert isinstance(dropped, Committed)
        after = backend.rows()
        gone = gone_rows(before, after)
        assert gone["deadlines"] == set(taken["deadlines"]) and after["deadlines"] == {}
        assert gone["obligations"] == set(taken["obligations"])
        assert dues == [T0 + 60_000], "no deadline added, none reported"
        assert backend.check() == []

    # --- the per-agent event feed ----------------------------------------------------------

    @pytest.mark.rules("R8-19", "L1-4")
    def test_the_event_feed_of_an_agent_is_gap_free_ordered_and_what_was_published(self, backend: Backend):
        ids = Ids()
        alice, bob, carol = agent(backend, ids), agent(backend, ids, "bob"), agent(backend, ids, "carol")
        store = backend.store
        published: list[tuple[str, int, bytes]] = []
        items = [task_item(store, alice, ids, f"t{i}", [bob] if i % 2 else [bob, carol]) for i in range(6)]
        commit(backend, items[:3], on_events=published.extend)
        commit(backend, items[3:], on_events=published.extend)
        feed = list(store.events_for(bob, 0))
        assert [seq for seq, _ in feed] == sorted(seq for seq, _ in feed) and len(feed) == 6
        assert [(bob, seq, ev) for seq, ev in feed] == [p for p in published if p[0] == bob]
        assert [json.loads(ev)["event"] for _, ev in feed] == ["opportunity"] * 6
        assert len(list(store.events_for(carol, 0))) == 3
        # Any suffix is exactly the events after it, none skipped.
        for i, (seq, _) in enumerate(feed):
            assert list(store.events_for(bob, seq)) == feed[i + 1 :]
        assert list(store.events_for(alice, 0)) == []
        backend.reopen()
        assert list(backend.store.events_for(bob, 0)) == feed

    @pytest.mark.rules("R8-20")
    def test_every_event_has_its_own_seq_and_open_tasks_are_stored_once(self, backend: Backend):
        """WIRE.md 1.2 (D200, D201): the events of one commit, across agents
        and the open-Task stream, each get their own seq from one sequence,
        the last of which the store keeps; an open Task's offer is one row,
        read for every agent but its author."""
        ids = Ids()
        alice, bob, carol = agent(backend, ids), agent(backend, ids, "bob"), agent(backend, ids, "carol")
        store = backend.store
        published: list[tuple[str, int, bytes]] = []
        items = [task_item(store, alice, ids, "open", None), task_item(store, alice, ids, "named", [bob, carol])]
        commit(backend, items, on_events=published.extend)
        seqs = [seq for _, seq, _ in published]
        assert seqs == sorted(set(seqs)) and len(seqs) == 3, published  # one offer, two opportunities
        assert store.last_event_seq() == seqs[-1] and store.last_seq() <= seqs[-1]
        [(_, offer_seq, offer)] = [p for p in published if p[0] == "*"]
        assert json.loads(offer)["event"] == "task_offered"
        with store.read() as view:
            assert list(view.offers_for(bob, 0)) == [(offer_seq, offer)] == list(view.offers_for(carol, 0))
            assert list(view.offers_for(alice, 0)) == []  # not its author
            assert list(view.offers_for(bob, offer_seq)) == []
        assert [seq for seq, _ in store.events_for(bob, 0)] == [p[1] for p in published if p[0] == bob]
        backend.reopen()
        assert backend.store.last_event_seq() == seqs[-1]

    # --- the one encoding of stored rows -------------------------------------------------------

    @pytest.mark.rules("L1-1", "L1-4")
    def test_every_stored_row_round_trips_byte_for_byte_through_the_one_encoding_of_stored_rows(self, backend: Backend):
        """store/codec.py is the one seam of the stored values' serialization
        (D382): every row of every table this backend stored decodes there and
        encodes back to the very bytes stored, and every table it names as
        structured (the log, objects, receipts, keys, obligations, live rows,
        open-Task offers, outcomes, webhook cursors, ``meta/event_kinds``)
        held a row it decoded into a value."""
        ids = Ids()
        alice, bob = agent(backend, ids), agent(backend, ids, "bob")
        store = backend.store
        (made,) = commit(backend, [create_item(store, alice, ids, "m", content(1))])
        assert isinstance(made, Committed), made
        tasks = commit(backend, [task_item(store, alice, ids, "open", None), task_item(store, alice, ids, "named", [bob])])
        open_task, named = (json.loads(t.result)["task"] for t in tasks)  # type: ignore[union-attr]
        (took,) = commit(backend, [take_item(store, bob, open_task, ids, "take-open")])
        (kept,) = commit(backend, [take_item(store, bob, named, ids, "take-named")])
        engagement = json.loads(took.result)["engagement"]  # type: ignore[union-attr]
        (dropped,) = commit(backend, [drop_item(store, bob, engagement, ids, "drop")])
        assert isinstance(kept, Committed) and isinstance(dropped, Committed), (kept, dropped)
        w = store.begin_write()
        put_cursors(w.tx, {bob: codec.Cursor("wh_1", 2, attempts=1, last_error="timed out")})
        w.commit()
        rows = backend.rows()
        assert set(rows) == set(DBS)
        decoded: set[str] = set()
        for table, stored in rows.items():
            for key, raw in stored.items():
                value = codec.decode_row(table, key, raw)
                assert codec.encode_row(table, key, value) == bytes(raw), (table, key, value)
                if not isinstance(value, bytes):
                    decoded.add(table)
        assert decoded == set(codec.STRUCTURED), set(codec.STRUCTURED) ^ decoded
        assert backend.check() == []

    # --- read views are snapshots --------------------------------------------------------------

    @pytest.mark.rules("R9-5", "R12-10")
    def test_a_read_view_is_a_snapshot_that_later_commits_do_not_change(self, backend: Backend):
        ids = Ids()
        alice = agent(backend, ids)
        store = backend.store
        (m,) = commit(backend, [create_item(store, alice, ids, "m", content(0))])
        memory = memory_of(m)
        with store.read() as old:
            seq = old.last_seq()
            (u,) = commit(backend, [update_item(store, alice, memory, ids, "u", content(1))])
            assert isinstance(u, Committed) and u.last_seq == seq + 1
            assert old.last_seq() == seq and old.obj(memory)[0] == 1
            assert old.memory_content(memory, 2) is None
            with store.read() as new:
                assert new.last_seq() == seq + 1 and new.obj(memory)[0] == 2
        assert store.last_seq() == seq + 1
