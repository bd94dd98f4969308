"""Search's derived index (store/search_index.py): a function of the fact log
(L1-1) that ``kungfud check`` verifies and ``--rebuild`` remakes, caught up from
the log before a search so that an index behind the log (a crash, a copy, a
file lost) loses nothing (L1-4, WIRE.md 1.3 "Search")."""

from __future__ import annotations

import shutil
import sqlite3

import pytest

from kungfud.actors import Runtime
from kungfud.store import Store
from kungfud.store import search_index
from kungfud.store.search_index import FILE, check_index
from tests.reads.test_search import World


@pytest.fixture
def made(tmp_path):
    """A store with Memories, entries, a Task and deliveries, and its runtime."""
    data = tmp_path / "data"
    store = Store(str(data), map_size_mb=256)
    rt = Runtime(store)
    rt.start()
    w = World(rt)
    alice, bob = w.agent("alice"), w.agent("bob")
    th = w.thread(alice, bob)
    for n in range(3):
        w.act(alice, "thread.post", thread=th, content={"text": f"otter {n}", "n": n})
    m = w.act(alice, "memory.create", content={"a": ["otter", {"b": "beaver"}]})["memory"]
    w.act(alice, "memory.update", memory=m, content={"text": "otter v2"})
    task = w.act(alice, "task.create", audience="open", contract={"content": {"output": "otter", "criteria": "x"}})["task"]
    en = w.act(bob, "task.take", task=task)["engagement"]
    w.act(bob, "task.deliver", engagement=en, content={"text": "otter delivered"})
    yield w, store, data, (alice, bob, th)
    rt.stop()
    store.close()


def _reopen(store) -> None:
    """As a new process: the next search opens the index file anew."""
    search_index.index_of(store).close()
    search_index._indexes.clear()


def _check(store, rebuild: bool = False) -> list[str]:
    with store.read() as view:
        return check_index(store, view, rebuild)


@pytest.mark.rules("L1-1")
def test_the_index_equals_its_rebuild_from_the_log(made):
    w, store, data, (alice, bob, th) = made
    kinds = sorted(i["kind"] for i in w.found(alice, "otter"))
    # 3 entries and the 3 Memories their content made, the Memory's version 2, the Task, the delivery.
    assert kinds == ["delivery", "entry", "entry", "entry", "memory", "memory", "memory", "memory", "task"]
    assert _check(store) == []


@pytest.mark.rules("L1-1")
def test_check_reports_a_damaged_index_and_rebuild_remakes_it(made):
    w, store, data, (alice, bob, th) = made
    before = w.found(alice, "otter")
    con = sqlite3.connect(data / FILE)
    con.execute("DELETE FROM docs WHERE key LIKE 'e:%' AND ids LIKE '%\"entry\":2%'")
    con.execute("UPDATE docs SET text = 'forged' WHERE kind = 'task'")
    con.commit()
    con.close()
    problems = _check(store)
    assert any("missing" in p for p in problems) and any("differs" in p for p in problems), problems
    assert any("full-text rows" in p for p in problems), problems  # a words row with no document
    assert _check(store, rebuild=True) != []  # what it found, before remaking
    assert _check(store) == []
    assert [i["entry"] for i in w.found(alice, "otter", **{"in": ["entry"]})] == [i["entry"] for i in before if i["kind"] == "entry"]


@pytest.mark.rules("L1-4")
def test_an_index_behind_the_log_is_caught_up_before_the_search_is_answered(made):
    w, store, data, (alice, bob, th) = made
    assert len(w.found(bob, "otter", thread=th)) == 3
    shutil.copy(data / FILE, data.parent / "old.sqlite")  # the index as of now
    w.act(bob, "thread.post", thread=th, content={"text": "late otter"})
    assert len(w.found(bob, "otter", thread=th)) == 4
    # As if the index's last transactions were lost (a crash; synchronous=NORMAL),
    # or the file went missing: the next search applies what it lacks.
    _reopen(store)
    for suffix in ("-wal", "-shm"):
        (data / (FILE + suffix)).unlink(missing_ok=True)
    shutil.copy(data.parent / "old.sqlite", data / FILE)
    assert [i["entry"] for i in w.found(bob, "late", **{"in": ["entry"]})] == [4]
    _reopen(store)
    (data / FILE).unlink()
    # 4 entries, the delivery (bob is a party), the open Task and bob's two Memories (the delivery's, the late post's).
    assert sorted(i["kind"] for i in w.found(bob, "otter")) == ["delivery", "entry", "entry", "entry", "entry", "memory", "memory", "task"]
    assert _check(store) == []
