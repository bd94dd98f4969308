"""A page's cursor never names an object the caller may not read (R12-8, R12-9,
D44), and paging still never skips an item (WIRE.md "Lists").

The reads are run over a real LMDB store holding hand-written index rows and
object states, with the scan budget made small, so that a page stops on rows the
caller may not read (security review M1: ``memory.list`` returned another
author's private Memory as its cursor; ``opportunities`` did the same with an
assignment in a Thread the caller had left)."""

from __future__ import annotations

import msgspec
import pytest

from kungfud.reads import memory as memory_reads
from kungfud.reads import outcomes as outcome_reads
from kungfud.reads import turn as turn_reads
from kungfud.core.agent import AgentState
from kungfud.core.memory import MemoryState
from kungfud.core.task import TaskState
from kungfud.core.facts import member_obj
from kungfud.core.members import MemberState
from kungfud.core.thread import ThreadState
from kungfud.store import Store
from kungfud.store.events import OutcomeRow, outcome_key
from kungfud.store.layout import encode_object

ALICE, BOB, CAROL = "ag_01alice", "ag_01bob", "ag_01carol"
T0 = 1_764_504_000_000


def _put_state(txn, store: Store, obj: str, state) -> None:
    txn.put(obj.encode(), encode_object(1, state), db=store.dbs["objects"])


@pytest.fixture
def store(tmp_path):
    s = Store(str(tmp_path / "data"), map_size_mb=64)
    yield s
    s.close()


def _pages(read, limit: int = 100) -> tuple[list[dict], list[str]]:
    items, cursors, cursor = [], [], None
    for _ in range(1000):
        page = read(cursor, limit)
        assert not isinstance(page, Exception) and isinstance(page, dict), page
        items += page["items"]
        cursor = page["cursor"]
        if cursor is None:
            return items, cursors
        cursors.append(cursor)
    raise AssertionError("paging did not end")


def _reveals(cursor: str, secrets: list[str]) -> bool:
    """Whether the cursor carries one of the ids, as text or hex of its bytes."""
    return any(s in cursor or s.encode().hex() in cursor for s in secrets)


@pytest.mark.rules("R12-9", "R12-8", "R8-13")
def test_R12_9_memory_list_of_another_author_pages_only_its_public_memories(store, monkeypatch):
    """D233: another agent's pages walk the author's public rows only, so with
    a scan budget smaller than the private Memories before the public one they
    are still one page, no cursor — as if there were no private Memory."""
    from kungfud.store.indexes import state_rows

    monkeypatch.setattr(memory_reads, "SCAN_BUDGET", 4)
    private = [f"me_01a{n:03d}" for n in range(10)]
    public = "me_01b000"
    with store.env.begin(write=True) as txn:
        for m in private + [public]:
            vis = "public" if m == public else "private"
            state = MemoryState(m, ALICE, 1, "valid", vis, T0)
            for db, key, value in state_rows(m, state):  # the rows the writer derives
                txn.put(key, value, db=store.dbs[db])
            _put_state(txn, store, m, state)
    with store.read() as view:
        items, cursors = _pages(lambda c, n: memory_reads.memory_list(view, BOB, ALICE, c, n))
        assert [i["memory"] for i in items] == [public] and cursors == []
        # The author pages through everything; its cursors name its own Memories.
        mine, cursors = _pages(lambda c, n: memory_reads.memory_list(view, ALICE, None, c, n), limit=3)
        assert [i["memory"] for i in mine] == private + [public]
        assert not any(c.startswith("~") for c in cursors)


@pytest.mark.rules("R12-9", "R12-8", "R8-13", "B24")
def test_R12_9_opportunities_cursor_never_names_an_assignment_the_caller_may_not_read(store, monkeypatch):
    monkeypatch.setattr(turn_reads, "SCAN_BUDGET", 3)
    left = "th_01left"  # a Thread bob has left: its assignments are not his to read
    hidden = [f"as_01h{n:03d}" for n in range(8)]
    task = "tk_01named"
    with store.env.begin(write=True) as txn:
        _put_state(txn, store, left, ThreadState(left, ALICE, T0, "open", None, 0, member_count=1))
        _put_state(txn, store, member_obj(left, ALICE), MemberState(left, ALICE, "governor", T0, None))
        for asg in hidden:
            txn.put(BOB.encode() + b"\x00" + asg.encode(), left.encode(), db=store.dbs["opportunities"])
        _put_state(txn, store, ALICE, AgentState(ALICE, "active", False, b'{"name":"alice"}', T0))
        _put_state(txn, store, task, TaskState(task, ALICE, [BOB], T0, 1, True, 0, []))
        txn.put(BOB.encode() + b"\x00" + task.encode(), task.encode(), db=store.dbs["opportunities"])
    with store.read() as view:
        items, cursors = _pages(lambda c, n: turn_reads.opportunities(view, BOB, c, n))
        assert [i["ref"] for i in items] == [{"task": task}]  # nothing skipped
        assert cursors and not any(_reveals(c, hidden) for c in cursors), cursors
        c = cursors[0]
        forged = turn_reads.opportunities(view, BOB, c[:-1] + ("A" if c[-1] != "A" else "B"), 100)
        assert getattr(forged, "code", None) == "bad_request", forged


@pytest.mark.rules("R12-9", "R12-8", "R8-13", "R9-9")
def test_R12_9_outcomes_cursor_never_names_an_assignment_of_a_thread_the_caller_left(store, monkeypatch):
    """An assignment's outcome is Thread history, shown only to members: a page of
    `outcomes` that stops on such a row returns a sealed cursor, and paging
    newest first still reaches every readable outcome."""
    monkeypatch.setattr(outcome_reads, "SCAN_BUDGET", 3)
    left = "th_01left"  # bob is no member: no membership row
    hidden = [f"as_01h{n:03d}" for n in range(8)]
    seen = "en_01seen"  # an engagement's outcome: its parties always read it
    with store.env.begin(write=True) as txn:
        txn.put(outcome_key(BOB, 1, seen), msgspec.msgpack.encode(OutcomeRow(None, b'{"state":"adopted"}')), db=store.dbs["outcomes"])
        for n, asg in enumerate(hidden):
            row = OutcomeRow(left, b'{"state":"rejected"}')
            txn.put(outcome_key(BOB, 2 + n, asg), msgspec.msgpack.encode(row), db=store.dbs["outcomes"])
    with store.read() as view:
        items, pages = _pages(lambda c, n: outcome_reads.outcomes(view, BOB, c, n))
        assert items == [msgspec.Raw(b'{"state":"adopted"}')]  # nothing skipped
        assert pages and not any(_reveals(c, hidden) for c in pages), pages
        other = outcome_reads.outcomes(view, CAROL, pages[0], 100)
        assert getattr(other, "code", None) == "bad_request", other
