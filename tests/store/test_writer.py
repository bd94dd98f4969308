"""What only the LMDB backend does: a full map (L2-1, L4-6) and how storage
failures are logged. Everything a backend must guarantee — all or nothing per
action and per commit, receipts, versions, the fold, feeds, snapshots — is the
store contract (tests/store/contract.py), run for LMDB by
tests/store/test_lmdb_contract.py."""

from __future__ import annotations

import json
import logging
import threading

import pytest

from kungfud.store import Committed, Store, Writer
from kungfud.store.check import compare, expected_indexes
from tests.store.contract import content, mentions, new_rows, unavailable
from tests.store.helpers import Ids, commit, create_item, dump, register_item, reporting, run_batch


@pytest.fixture
def store(tmp_path):
    s = Store(str(tmp_path / "data"))
    yield s
    s.close()


def _agent(store: Store, ids: Ids, name: str = "alice", *, admin: bool = False) -> str:
    (out,) = commit(store, [register_item(ids, f"reg-{name}", name, admin=admin)])
    assert isinstance(out, Committed), out
    return json.loads(out.result)["agent"]


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
        small1 = create_item(store, alice, ids, "s1", content(1))
        huge = create_item(store, alice, ids, "huge", _big(2))
        small2 = create_item(store, alice, ids, "s2", content(2))
        w = Writer(store)
        try:
            r1, rh, r2 = run_batch(w, [small1, huge, small2], start=True)
            unavailable(rh.outcome)
            assert "map" in rh.outcome.rejection.reason
            assert isinstance(r1.outcome, Committed) and isinstance(r2.outcome, Committed)
            new = new_rows(before, dump(store))
            assert mentions(new, huge.result["memory"]) == [] and huge.scope not in new["receipts"]
            assert len(new["log"]) == 2

            # Later items that fit are still written; the big one still fails alone.
            (later,) = run_batch(w, [create_item(store, alice, ids, "s3", content(3))])
            (again,) = run_batch(w, [create_item(store, alice, ids, "huge", _big(2))])
            (last,) = run_batch(w, [create_item(store, alice, ids, "s4", content(4))])
        finally:
            w.stop()
        assert isinstance(later.outcome, Committed) and isinstance(last.outcome, Committed)
        unavailable(again.outcome)
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
            unavailable(r.outcome)
            assert dump(store) == before, "the item that overflowed the map left rows behind"
            # A small action still fits in what is left, and is durable.
            (small,) = run_batch(w, [create_item(store, alice, ids, "small", content(1, size=10))])
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
                unavailable(r.outcome)
            assert len(full_lines()) == 1, full_lines()
            assert "1 action(s) rejected" in full_lines()[0] and "map_size_mb" in full_lines()[0]
            now[0] += 10.5
            (r,) = run_batch(w, [create_item(store, alice, ids, "huge-later", _big(2))])
            unavailable(r.outcome)
        finally:
            w.stop()
        lines = full_lines()
        assert len(lines) == 2, lines
        assert "5 action(s) rejected as unavailable in the last 10 s" in lines[1], lines[1]
    finally:
        store.close()


# --- group commit: what arrives while the writer waits joins its commit -----------------


@pytest.mark.rules("L1-4")
def test_L1_4_actions_queued_while_the_writer_waits_for_the_write_lock_join_its_commit(store):
    """Another node's commit holds the write lock (here: ``begin_write`` held
    back). Actions queued meanwhile are written in the same commit as the one
    the writer took first, and each is reported only once that commit is
    durable (its receipt visible to a new reader)."""
    ids = Ids()
    alice = _agent(store, ids)
    items = [create_item(store, alice, ids, f"k{i}", content(i)) for i in range(3)]
    waiting, release = threading.Event(), threading.Event()
    begin_write = store.begin_write

    def held_back():
        waiting.set()
        assert release.wait(10)
        return begin_write()

    store.begin_write = held_back  # type: ignore[method-assign]
    w = Writer(store)
    w.start()
    try:
        done = reporting(items, store)
        w.submit(items[0])
        assert waiting.wait(10)  # the writer holds items[0] and waits for the lock
        w.submit(items[1])
        w.submit(items[2])
        release.set()
        for rep in done:
            assert rep.event.wait(15)
    finally:
        w.stop()
    assert [type(rep.outcome) for rep in done] == [Committed] * 3
    assert all(rep.receipt_visible for rep in done)
    assert w.batches == 1 and w.items == 3
