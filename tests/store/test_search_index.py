"""Search's derived index (store/search_index.py: SQLite FTS5 beside LMDB;
store/postgres/search.py: PostgreSQL's full-text search): a function of the
fact log (L1-1) that ``kungfud check`` verifies and ``--rebuild`` remakes,
caught up from the log before a search so that an index behind the log (a
crash, a lost file, lost rows) loses nothing (L1-4, WIRE.md 1.3 "Search")."""

from __future__ import annotations

import sqlite3
import time

import psycopg
import pytest

from kungfud.actors import Runtime
from kungfud.store import Store, search_docs, search_index
from kungfud.store.postgres import PgStore
from kungfud.store.search_index import FILE, check_index
from tests.pg import pg_server  # noqa: F401 — the session fixture
from tests.reads.test_search import World


class Engine:
    """The index under test, and how a test damages or rewinds it by hand."""

    def __init__(self, kind: str, store, data):
        self.kind, self.store, self.data = kind, store, data

    def sql(self, *statements: str) -> list:
        out = []
        if self.kind == "lmdb":
            con = sqlite3.connect(self.data / FILE)
            for s in statements:
                out.append(con.execute(s).fetchall())
            con.commit()
            con.close()
        else:
            with psycopg.connect(self.store.url, autocommit=True) as con:
                for s in statements:
                    cur = con.execute(s)
                    out.append(cur.fetchall() if cur.description else [])
        return out

    def seq(self) -> int:
        table = "meta" if self.kind == "lmdb" else "kf_search_seq"
        return self.sql(f"SELECT v FROM {table} WHERE k = 'seq'")[0][0][0]

    def rewind(self, seq: int, late: str) -> None:
        """As if the index's transactions after ``seq`` were lost: its seq back,
        the documents they wrote gone."""
        reopen(self.store)
        if self.kind == "lmdb":
            self.sql(f"UPDATE meta SET v = {seq}", f"DELETE FROM fts WHERE rowid IN (SELECT id FROM docs WHERE key = '{late}')",
                     f"DELETE FROM docs WHERE key = '{late}'")
        else:
            self.sql(f"UPDATE kf_search_seq SET v = {seq}", f"DELETE FROM kf_search WHERE key = '{late}'")

    def lose(self) -> None:
        """As if the whole index were lost (the file deleted; the tables dropped)."""
        reopen(self.store)
        if self.kind == "lmdb":
            (self.data / FILE).unlink()
        else:
            self.sql("DROP TABLE kf_search", "DROP TABLE kf_search_seq")


def reopen(store) -> None:
    """As a new process: the next search opens the index anew."""
    search_index.index_of(store).close()
    search_index._indexes.clear()


@pytest.fixture(params=["lmdb", "pg"])
def made(request, tmp_path):
    """A store with Memories, entries, a Task and deliveries, and its runtime."""
    data = tmp_path / "data"
    if request.param == "lmdb":
        store = Store(str(data), map_size_mb=256)
    else:
        store = PgStore(request.getfixturevalue("pg_server").new_database(), str(data))
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
    yield w, Engine(request.param, store, data), (alice, bob, th)
    reopen(store)
    rt.stop()
    store.close()


def _check(engine: Engine, rebuild: bool = False) -> list[str]:
    with engine.store.read() as view:
        return check_index(engine.store, view, rebuild)


@pytest.mark.rules("L1-1")
def test_the_index_equals_its_rebuild_from_the_log(made):
    w, engine, (alice, bob, th) = made
    assert _check(engine) == []  # no index yet: nothing to compare
    kinds = sorted(i["kind"] for i in w.found(alice, "otter"))
    # 3 entries and the 3 Memories their content made, the Memory's version 2, the Task, the delivery.
    assert kinds == ["delivery", "entry", "entry", "entry", "memory", "memory", "memory", "memory", "task"]
    assert _check(engine) == []


@pytest.mark.rules("L1-1")
def test_check_reports_a_damaged_index_and_rebuild_remakes_it(made):
    w, engine, (alice, bob, th) = made
    before = w.found(alice, "otter")
    entry2 = f"e:{th}:{2:016d}"
    if engine.kind == "lmdb":
        engine.sql(f"DELETE FROM docs WHERE key = '{entry2}'", "UPDATE docs SET text = 'forged' WHERE kind = 'task'")
        damaged_words = "full-text rows"  # a words row with no document
    else:
        engine.sql(
            f"DELETE FROM kf_search WHERE key = '{entry2}'",
            "UPDATE kf_search SET body = 'forged' WHERE kind = 'task'",
            "UPDATE kf_search SET words = to_tsvector('simple', 'forged') WHERE kind = 'delivery'",
        )
        damaged_words = "not its text's"
    problems = _check(engine)
    assert f"search index: document {entry2} missing" in problems, problems
    assert any("differs" in p for p in problems) and any(damaged_words in p for p in problems), problems
    assert _check(engine, rebuild=True) == problems  # what it found, before remaking
    assert _check(engine) == []
    reopen(engine.store)
    assert w.found(alice, "otter") == before


@pytest.mark.rules("L1-4")
def test_an_index_behind_the_log_is_caught_up_before_the_search_is_answered(made):
    w, engine, (alice, bob, th) = made
    assert len(w.found(bob, "otter", thread=th)) == 3
    seq = engine.seq()
    w.act(bob, "thread.post", thread=th, content={"text": "late otter"})
    assert len(w.found(bob, "otter", thread=th)) == 4
    engine.rewind(seq, f"e:{th}:{4:016d}")
    assert len(w.found(bob, "otter", thread=th)) == 3 + 1  # the next search applies what it lacks
    assert [i["entry"] for i in w.found(bob, "late", **{"in": ["entry"]})] == [4]
    engine.lose()
    # 4 entries, the delivery (bob is a party), the open Task and bob's two Memories (the delivery's, the late post's).
    assert sorted(i["kind"] for i in w.found(bob, "otter")) == ["delivery", "entry", "entry", "entry", "entry", "memory", "memory", "task"]
    assert _check(engine) == []


@pytest.mark.rules("L1-1")
def test_an_unreadable_index_file_is_unavailable_reported_by_check_and_remade_by_rebuild(tmp_path):
    data = tmp_path / "data"
    store = Store(str(data), map_size_mb=64)
    rt = Runtime(store)
    rt.start()
    try:
        w = World(rt)
        alice = w.agent("alice")
        w.act(alice, "memory.create", content={"text": "quagga"})
        (data / FILE).write_bytes(b"not a database at all" * 100)
        with pytest.raises(search_index.IndexUnavailable) as e:  # the server answers it `unavailable`
            w.search(alice, "quagga")
        assert e.value.rejection().code == "unavailable" and "retry" in e.value.rejection().reason
        engine = Engine("lmdb", store, data)
        (problem,) = _check(engine, rebuild=True)
        assert problem.startswith(f"search index: {data / FILE} cannot be read")
        assert _check(engine) == []
        reopen(store)
        assert [i["kind"] for i in w.found(alice, "quagga")] == ["memory"]
    finally:
        reopen(store)
        rt.stop()
        store.close()


@pytest.mark.rules("L1-4")
def test_a_long_backlog_is_applied_by_a_thread_while_searches_are_answered_unavailable(made, monkeypatch):
    w, engine, (alice, bob, th) = made
    monkeypatch.setattr("kungfud.store.search_docs.BACKLOG", 5)
    monkeypatch.setattr("kungfud.store.search_docs.CHUNK", 3)
    for n in range(10):
        w.act(bob, "thread.post", thread=th, content={"text": f"numbat {n}"})
    with pytest.raises(search_docs.IndexBehind) as e:  # the server answers it `unavailable`, retry
        w.search(bob, "numbat")
    r = e.value.rejection()
    assert r.code == "unavailable" and r.next == "retry" and "being brought up to date" in r.reason
    deadline = time.monotonic() + 30
    while True:
        page = w.search(bob, "numbat", **{"in": ["entry"]}) if _caught_up(engine.store) else None
        if page is not None:
            break
        assert time.monotonic() < deadline, "the index was not built"
        time.sleep(0.05)
    assert len(page["items"]) == 10
    assert _check(engine) == []


def _caught_up(store) -> bool:
    with store.read() as view:
        return view.last_seq() - search_index.index_of(store)._applied <= 5


@pytest.mark.rules("L1-1", "R12-9")
def test_an_index_of_another_log_is_rebuilt_not_trusted(tmp_path):
    """A data directory restored from a backup keeps the newer search.sqlite
    beside it (backup copies the LMDB environment only): its last applied fact
    is not this log's, so the next search empties and rebuilds it."""
    stores, worlds = [], []
    for name in ("a", "b"):
        store = Store(str(tmp_path / name), map_size_mb=64)
        rt = Runtime(store)
        rt.start()
        stores.append((store, rt))
        worlds.append(World(rt))
    try:
        wa, wb = worlds
        alice = wa.agent("alice")
        wa.act(alice, "memory.create", content={"text": "dugong"})
        assert len(wa.found(alice, "dugong")) == 1
        bob = wb.agent("bob")
        for n in range(5):
            wb.act(bob, "memory.create", content={"text": f"manatee {n}"})
        assert len(wb.found(bob, "manatee")) == 5  # b's index is further along than a's log
        for store, _ in stores:
            reopen(store)
        for suffix in ("", "-wal", "-shm"):
            (tmp_path / "a" / (FILE + suffix)).unlink(missing_ok=True)
        import shutil

        shutil.copy(tmp_path / "b" / FILE, tmp_path / "a" / FILE)
        wa.act(alice, "memory.create", content={"text": "dugong two"})
        for n in range(6):  # a's log now reaches past the copied index's last fact
            wa.act(alice, "memory.create", content={"text": f"filler {n}"})
        assert wa.found(alice, "manatee") == []
        assert sorted(i["snippet"] for i in wa.found(alice, "dugong")) == ["dugong", "dugong two"]
        assert _check(Engine("lmdb", stores[0][0], tmp_path / "a")) == []
    finally:
        for store, rt in stores:
            reopen(store)
            rt.stop()
            store.close()
