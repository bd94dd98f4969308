"""``thread.assignments`` is bounded by what a page examines, not by what it
finds (R8-13, D260): over a real LMDB store holding hand-written states, with the
scan budget made small, a stretch of entries without assignments gives short or
empty pages that still carry a cursor, and walking the cursors lists every
assignment once, newest first (R8-10)."""

from __future__ import annotations

import pytest

from kungfud.core.assignment import AssignmentState
from kungfud.core.entry import EntryState
from kungfud.core.facts import entry_obj, member_obj
from kungfud.core.members import MemberState
from kungfud.core.thread import ThreadState
from kungfud.reads import assignments as assignment_reads
from kungfud.store import Store
from kungfud.store.layout import encode_object

ALICE, BOB = "ag_01alice", "ag_01bob"
T0 = 1_764_504_000_000
THREAD = "th_01work"


@pytest.fixture
def store(tmp_path):
    s = Store(str(tmp_path / "data"), map_size_mb=64)
    yield s
    s.close()


def _put(txn, store: Store, obj: str, state) -> None:
    txn.put(obj.encode(), encode_object(1, state), db=store.dbs["objects"])


@pytest.mark.rules("R8-13", "R8-10", "R9-9")
def test_R8_13_a_page_examines_at_most_the_scan_budget_and_the_walk_skips_nothing(store, monkeypatch):
    monkeypatch.setattr(assignment_reads, "SCAN_BUDGET", 3)
    with_assignment = {2: "as_01two", 3: "as_01three", 9: "as_01nine"}
    with store.env.begin(write=True) as txn:
        _put(txn, store, THREAD, ThreadState(THREAD, ALICE, T0, "open", None, 10, member_count=1))
        _put(txn, store, member_obj(THREAD, ALICE), MemberState(THREAD, ALICE, "governor", T0, None))
        for n in range(1, 11):
            asg = with_assignment.get(n)
            _put(txn, store, entry_obj(THREAD, n), EntryState(THREAD, n, ALICE, T0 + n, "me_01pin", 1, [], {}, assignment=asg))
            if asg:
                _put(txn, store, asg, AssignmentState(asg, THREAD, n, ALICE, BOB, b'{"criteria":"x"}', 60, 60, T0 + n))
    with store.read() as view:
        pages, cursor = [], None
        for _ in range(20):
            page = assignment_reads.thread_assignments(view, ALICE, THREAD, None, cursor, 100, T0 + 100)
            pages.append(([i["assignment"] for i in page["items"]], page["cursor"]))
            cursor = page["cursor"]
            if cursor is None:
                break
        # entries 10-8, 7-5, 4-2, 1: three examined a page at most.
        assert pages == [(["as_01nine"], "8"), ([], "5"), (["as_01three", "as_01two"], "2"), ([], None)]
        # the limit stops a page first when it fills
        first = assignment_reads.thread_assignments(view, ALICE, THREAD, None, "4", 1, T0 + 100)
        assert ([i["assignment"] for i in first["items"]], first["cursor"]) == (["as_01three"], "3")
        # §9: a non-member gets the missing Thread's not_found
        denied = assignment_reads.thread_assignments(view, BOB, THREAD, None, None, 100, T0 + 100)
        assert getattr(denied, "code", None) == "not_found"
