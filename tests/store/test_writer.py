"""The group-committing writer against a real LMDB store (DESIGN.md "Performance
model", docs/storage.md): one action = one nested transaction inside one batch
commit (L2-1), receipts re-checked inside the transaction (L3-2, L3-3, L3-6),
versions re-checked so no decision rests on stale state (L5-1), and nothing is
reported before the batch is durable (L1-4)."""

from __future__ import annotations

import json
import logging

import pytest

from kungfud.store import Committed, Failed, Replayed, Stale, Store, Writer
from kungfud.store.check import compare, expected_indexes
from kungfud.store.layout import decode_fact, from_u64
from tests.store.helpers import (
    FaultPlan,
    Ids,
    commit,
    create_item,
    dump,
    register_item,
    run_batch,
    set_status_item,
    update_item,
)


@pytest.fixture
def store(tmp_path):
    s = Store(str(tmp_path / "data"))
    yield s
    s.close()


def _agent(store: Store, ids: Ids, name: str = "alice", *, admin: bool = False) -> str:
    (out,) = commit(store, [register_item(ids, f"reg-{name}", name, admin=admin)])
    assert isinstance(out, Committed), out
    return json.loads(out.result)["agent"]


def _content(n: int, size: int = 40) -> bytes:
    return json.dumps({"n": n, "body": "x" * size}).encode()


def _new_rows(before: dict, after: dict) -> dict[str, dict[bytes, bytes]]:
    return {db: {k: v for k, v in rows.items() if before[db].get(k) != v} for db, rows in after.items()}


def _gone_rows(before: dict, after: dict) -> dict[str, set[bytes]]:
    return {db: set(rows) - set(after[db]) for db, rows in before.items()}


def _mentions(rows: dict[str, dict[bytes, bytes]], ident: str) -> list[tuple[str, bytes]]:
    """Rows whose key names ``ident`` or whose log fact is about it."""
    needle = ident.encode()
    found = [(db, k) for db, r in rows.items() for k in r if needle in k]
    found += [("log", k) for k, v in rows["log"].items() if needle in v]
    return found


def _memory_of(out) -> str:
    assert isinstance(out, Committed), out
    return json.loads(out.result)["memory"]


def _unavailable(out) -> None:
    assert isinstance(out, Failed), out
    assert out.rejection.code == "unavailable" and out.rejection.next == "retry", out


# --- L2-1: a failing action never takes its batch-mates down ----------------------


@pytest.mark.rules("L2-1", "L1-4")
@pytest.mark.parametrize("point", ["log", "objects", "index", "receipt"])
def test_L2_1_item_failing_mid_write_commits_batch_mates_and_writes_nothing_of_itself(store, point):
    ids = Ids()
    alice = _agent(store, ids)
    before = dump(store)
    fault = FaultPlan(point, item=2)
    w = Writer(store, fault=fault)
    items = [create_item(store, alice, ids, f"k{i}", _content(i)) for i in range(3)]
    doomed = items[1].result["memory"]
    fault.arm()
    try:
        reports = run_batch(w, items, start=True)
    finally:
        w.stop()
    assert fault.fired
    assert w.batches == 1 and w.items == 3, "the three items were meant to share one batch"
    first, failed, third = (r.outcome for r in reports)
    _unavailable(failed)
    kept = [_memory_of(first), _memory_of(third)]

    after = dump(store)
    new = _new_rows(before, after)
    assert _mentions(new, doomed) == [], "the failed item left rows behind"
    assert items[1].scope not in after["receipts"]
    assert not any(_gone_rows(before, after).values()), "a create removed rows"
    # Exactly the two batch-mates' effects, with no gap in the fact sequence.
    seq = from_u64(after["meta"][b"seq"])
    assert seq == from_u64(before["meta"][b"seq"]) + 2
    assert [from_u64(k) for k in after["log"]] == list(range(1, seq + 1))
    assert sorted(decode_fact(v).memory for v in new["log"].values()) == sorted(kept)
    for m in kept:
        assert m.encode() in after["objects"]
        assert alice.encode() + b"\x00" + m.encode() in after["memories"]
    assert {items[0].scope, items[2].scope} <= after["receipts"].keys()
    # Reported only once the commit is visible to any reader (L1-4).
    assert reports[0].receipt_visible and reports[2].receipt_visible
    assert compare(store, expected_indexes(store)) == []

    # The failure stored no receipt, so a retry of the same request executes.
    w2 = Writer(store)
    w2.start()
    try:
        (retry,) = run_batch(w2, [create_item(store, alice, ids, "k1", _content(1))])
    finally:
        w2.stop()
    assert isinstance(retry.outcome, Committed)


@pytest.mark.rules("L2-1", "L1-4")
def test_L2_1_failed_commit_acknowledges_nothing_and_leaves_store_unchanged(store):
    ids = Ids()
    alice = _agent(store, ids)
    (m,) = commit(store, [create_item(store, alice, ids, "m", _content(0))])
    memory = _memory_of(m)
    before = dump(store)
    fault = FaultPlan("commit")
    w = Writer(store, fault=fault)

    def batch():
        return [
            create_item(store, alice, ids, "c1", _content(1)),
            update_item(store, alice, memory, ids, "u1", _content(2)),
            register_item(ids, "reg-bob", "bob"),
        ]

    fault.arm()
    try:
        reports = run_batch(w, batch(), start=True)
        assert fault.fired
        for r in reports:
            _unavailable(r.outcome)
            assert r.receipt_visible is False
        assert dump(store) == before, "a failed commit changed the store"
        assert w.batches == 0

        # The writer keeps serving; nothing was recorded, so the same requests run.
        again = run_batch(w, batch())
    finally:
        w.stop()
    assert all(isinstance(r.outcome, Committed) for r in again), [r.outcome for r in again]
    assert json.loads(again[1].outcome.result) == {"memory": memory, "version": 2}
    assert compare(store, expected_indexes(store)) == []


# --- L5-1: versions re-checked inside the transaction --------------------------------


@pytest.mark.rules("L5-1", "L2-1")
def test_L5_1_update_decided_on_a_moved_version_is_stale_and_writes_nothing(store):
    ids = Ids()
    alice = _agent(store, ids)
    (m,) = commit(store, [create_item(store, alice, ids, "m", _content(0))])
    memory = _memory_of(m)
    # Two updates decided on version 1, written in one batch: the first wins.
    a = update_item(store, alice, memory, ids, "ua", _content(1))
    b = update_item(store, alice, memory, ids, "ub", _content(2))
    late = update_item(store, alice, memory, ids, "uc", _content(3))
    w = Writer(store)
    try:
        ra, rb = run_batch(w, [a, b], start=True)
        assert json.loads(ra.outcome.result) == {"memory": memory, "version": 2}
        assert rb.outcome == Stale(memory)
        assert rb.receipt_visible is False
        before = dump(store)
        (rc,) = run_batch(w, [late])
    finally:
        w.stop()
    assert rc.outcome == Stale(memory)
    assert dump(store) == before
    with store.read() as view:
        version, state = view.obj(memory)
        assert (version, state.latest) == (2, 2)
        assert view.memory_content(memory, 2) == _content(1)
        assert view.memory_content(memory, 3) is None
        assert view.receipt(b.scope) is None and view.receipt(late.scope) is None


@pytest.mark.rules("L5-1", "R4-1")
def test_L5_1_action_decided_before_its_agent_was_deactivated_is_stale(store):
    ids = Ids()
    admin = _agent(store, ids, "root", admin=True)
    alice = _agent(store, ids)
    create = create_item(store, alice, ids, "c", _content(1))  # decided while active
    deactivate = set_status_item(store, admin, alice, "deactivated", ids, "off")
    w = Writer(store)
    try:
        off, late = run_batch(w, [deactivate, create], start=True)
    finally:
        w.stop()
    assert isinstance(off.outcome, Committed)
    assert late.outcome == Stale(alice)
    with store.read() as view:
        assert view.state(alice).status == "deactivated"
        assert list(view.memories_of(alice, None)) == []
        assert view.receipt(create.scope) is None


# --- L3: receipts checked inside the transaction ------------------------------------


@pytest.mark.rules("L3-2", "L3-1")
def test_L3_2_receipt_present_turns_a_duplicate_into_a_replay_of_the_first_result(store):
    ids = Ids()
    alice = _agent(store, ids)
    (first,) = commit(store, [create_item(store, alice, ids, "k", _content(1))])
    before = dump(store)
    # A duplicate decided afresh (a new memory id) must still return the first result.
    dup = create_item(store, alice, ids, "k", _content(1))
    # Two duplicates racing in one batch: the second meets the first's receipt.
    x = create_item(store, alice, ids, "k2", _content(2))
    y = create_item(store, alice, ids, "k2", _content(2))
    w = Writer(store)
    try:
        rd, rx, ry = run_batch(w, [dup, x, y], start=True)
    finally:
        w.stop()
    assert isinstance(first, Committed)
    assert rd.outcome == Replayed(first.result)
    assert isinstance(rx.outcome, Committed)
    assert ry.outcome == Replayed(rx.outcome.result)
    after = dump(store)
    new = _new_rows(before, after)
    assert len(new["log"]) == 1 and list(new["memories"]) == [alice.encode() + b"\x00" + _memory_of(rx.outcome).encode()]
    assert _mentions(new, dup.result["memory"]) == [] and _mentions(new, y.result["memory"]) == []


@pytest.mark.rules("L3-3")
def test_L3_3_same_key_with_a_different_request_is_idempotency_mismatch_without_effect(store):
    ids = Ids()
    alice = _agent(store, ids)
    (first,) = commit(store, [create_item(store, alice, ids, "k", _content(1))])
    before = dump(store)
    other = create_item(store, alice, ids, "k", _content(2))
    x = create_item(store, alice, ids, "k2", _content(3))
    y = create_item(store, alice, ids, "k2", _content(4))  # same batch, different request
    w = Writer(store)
    try:
        ro, rx, ry = run_batch(w, [other, x, y], start=True)
    finally:
        w.stop()
    for r in (ro, ry):
        assert isinstance(r.outcome, Failed), r.outcome
        assert (r.outcome.rejection.code, r.outcome.rejection.next) == ("idempotency_mismatch", "revise")
    assert isinstance(rx.outcome, Committed)
    new = _new_rows(before, dump(store))
    assert len(new["log"]) == 1
    assert _mentions(new, other.result["memory"]) == [] and _mentions(new, y.result["memory"]) == []
    with store.read() as view:
        assert view.receipt(other.scope).result == first.result


@pytest.mark.rules("L3-6", "L3-2")
def test_L3_6_replayed_registration_returns_the_receipt_with_its_secret_nulled(store):
    ids = Ids()
    (first,) = commit(store, [register_item(ids, "reg", "alice")])
    (again,) = commit(store, [register_item(ids, "reg", "alice")])
    got = json.loads(first.result)
    assert got["key"].startswith("kf_")
    assert isinstance(again, Replayed)
    assert json.loads(again.result) == {"agent": got["agent"], "key": None}
    with store.read() as view:
        assert view.count("agent_keys") == 1


# --- a full map: unavailable, nothing written, the writer keeps serving -----------------


def _big(mb: float) -> bytes:
    return json.dumps({"body": "x" * int(mb * 1024 * 1024)}).encode()


@pytest.mark.rules("L2-1", "L4-6")
def test_L2_1_item_too_big_for_the_map_fails_alone_and_the_writer_keeps_serving(tmp_path):
    store = Store(str(tmp_path / "data"), map_size_mb=1)
    try:
        ids = Ids()
        alice = _agent(store, ids)
        before = dump(store)
        small1 = create_item(store, alice, ids, "s1", _content(1))
        huge = create_item(store, alice, ids, "huge", _big(2))
        small2 = create_item(store, alice, ids, "s2", _content(2))
        w = Writer(store)
        try:
            r1, rh, r2 = run_batch(w, [small1, huge, small2], start=True)
            _unavailable(rh.outcome)
            assert "map" in rh.outcome.rejection.reason
            assert isinstance(r1.outcome, Committed) and isinstance(r2.outcome, Committed)
            new = _new_rows(before, dump(store))
            assert _mentions(new, huge.result["memory"]) == [] and huge.scope not in new["receipts"]
            assert len(new["log"]) == 2

            # Later items that fit are still written; the big one still fails alone.
            (later,) = run_batch(w, [create_item(store, alice, ids, "s3", _content(3))])
            (again,) = run_batch(w, [create_item(store, alice, ids, "huge", _big(2))])
            (last,) = run_batch(w, [create_item(store, alice, ids, "s4", _content(4))])
        finally:
            w.stop()
        assert isinstance(later.outcome, Committed) and isinstance(last.outcome, Committed)
        _unavailable(again.outcome)
        with store.read() as view:
            assert len(list(view.memories_of(alice, None))) == 4
        assert compare(store, expected_indexes(store)) == []
    finally:
        store.close()


@pytest.mark.rules("L2-1", "L4-6")
def test_L2_1_filling_the_map_fails_the_item_that_overflows_and_smaller_items_still_fit(tmp_path):
    store = Store(str(tmp_path / "data"), map_size_mb=1)
    try:
        ids = Ids()
        alice = _agent(store, ids)
        w = Writer(store)
        w.start()
        try:
            n = 0
            while True:  # fill with 100 KiB memories until one does not fit
                before = dump(store)
                item = create_item(store, alice, ids, f"fill{n}", _big(0.1))
                (r,) = run_batch(w, [item])
                if not isinstance(r.outcome, Committed):
                    break
                n += 1
                assert n < 20, "a 1 MiB map held 2 MiB of content"
            _unavailable(r.outcome)
            assert dump(store) == before, "the item that overflowed the map left rows behind"
            # A small action still fits in what is left, and is durable.
            (small,) = run_batch(w, [create_item(store, alice, ids, "small", _content(1, size=10))])
        finally:
            w.stop()
        assert n >= 3
        assert isinstance(small.outcome, Committed), small.outcome
        with store.read() as view:
            assert len(list(view.memories_of(alice, None))) == n + 1
        assert compare(store, expected_indexes(store)) == []
    finally:
        store.close()


@pytest.mark.rules("L2-1")
def test_L2_1_storage_full_rejections_are_logged_once_per_burst_with_a_count(tmp_path, caplog):
    """Review L8: a full map used to reject actions without one log line. Now
    the first rejection is logged at WARNING at once, a burst of them adds no
    line, and the next one after the quiet period reports how many there were."""
    store = Store(str(tmp_path / "data"), map_size_mb=1)
    try:
        ids = Ids()
        alice = _agent(store, ids)
        w = Writer(store)
        now = [1000.0]
        w.failures.clock = lambda: now[0]
        caplog.set_level(logging.WARNING, logger="kungfud.store")

        def full_lines() -> list[str]:
            return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "storage is full" in r.getMessage()]

        w.start()
        try:
            for i in range(5):
                (r,) = run_batch(w, [create_item(store, alice, ids, f"huge{i}", _big(2))])
                _unavailable(r.outcome)
            assert len(full_lines()) == 1, full_lines()
            assert "1 action(s) rejected" in full_lines()[0] and "map_size_mb" in full_lines()[0]
            now[0] += 10.5
            (r,) = run_batch(w, [create_item(store, alice, ids, "huge-later", _big(2))])
            _unavailable(r.outcome)
        finally:
            w.stop()
        lines = full_lines()
        assert len(lines) == 2, lines
        assert "5 action(s) rejected as unavailable in the last 10 s" in lines[1], lines[1]
    finally:
        store.close()


# --- L1-1: the writer stores only the fold of the facts it records ------------------


@pytest.mark.rules("L1-1", "L2-1")
@pytest.mark.parametrize("claimed", ["none", "honest", "lying"])
def test_L1_1_the_writer_stores_only_the_fold_of_the_facts_it_records(store, claimed):
    """The writer folds every action's facts itself. A decision carrying another
    state is refused with nothing written (its batch-mate commits) unless the
    stored bytes it claims are those of the fold — then the fold is what is
    stored. Either way the store holds exactly the fold of its facts."""
    import msgspec

    from kungfud.store.layout import encode_object

    ids = Ids()
    alice = _agent(store, ids)
    good = create_item(store, alice, ids, "good", _content(1))
    bad = create_item(store, alice, ids, "bad", _content(2))
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
    before = dump(store)
    bad_out, good_out = commit(store, [bad, good])
    assert _memory_of(good_out) == good_mem
    with store.read() as view:
        if claimed == "honest":
            assert isinstance(bad_out, Committed), bad_out
            assert view.obj(mem) == (1, fold)
        else:
            assert isinstance(bad_out, Failed) and bad_out.rejection.code == "internal", bad_out
            assert view.receipt(bad.scope) is None and view.obj(mem) == (0, None)
            assert _mentions(_new_rows(before, dump(store)), mem) == []
