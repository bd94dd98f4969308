"""Search's derived index (WIRE.md 1.3 "Search"; docs/decisions.md D348):
SQLite FTS5, a file beside the store's data (``search.sqlite`` in the data
directory), derived from the fact log like every other index (L1-1).

One row per searchable document — a Memory's current version, an entry, a
Task's current contract, a delivery — keyed by what names it, with the
normalized words (:func:`kungfud.core.search.tokens`) in an FTS5 table and the
original text beside them (for the score and the snippet). Nothing here decides
who may read what: the read checks every match against its own snapshot (§9,
reads/search.py), so the index holds no permission and cannot leak one.

It is caught up from the log by fact seq before a search is answered
(:meth:`SearchIndex.catch_up`, over the read's own snapshot), in one SQLite
transaction that records the last seq it applied: a ``kill -9`` anywhere loses
nothing (the next search applies what the index lacks), an acknowledged action
is found by the next search, and several processes on one store (``--workers``)
share the file, one writer at a time (SQLite's lock; applying is idempotent).
``kungfud check`` compares the file with a rebuild from the log; ``--rebuild``
remakes it.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import weakref
from contextlib import contextmanager
from typing import Any, Iterator

from ..core import facts as F
from ..core import task_facts as T
from ..core.search import Term, content_text, tokens
from ..errors import StoreUnavailable
from .open import is_pg_url

__all__ = ["Applier", "SearchIndex", "IndexUnavailable", "index_of", "check_index", "documents", "FILE"]

FILE = "search.sqlite"
_CHUNK = 2000  # facts applied per SQLite transaction while catching up
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(k TEXT PRIMARY KEY, v INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS docs(
    id INTEGER PRIMARY KEY, key TEXT UNIQUE NOT NULL, kind TEXT NOT NULL, thread TEXT,
    ids TEXT NOT NULL, at INTEGER NOT NULL, text TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS docs_thread ON docs(thread);
CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(body, tokenize='unicode61 remove_diacritics 0');
"""
_indexes: "weakref.WeakKeyDictionary[Any, Any]" = weakref.WeakKeyDictionary()


class IndexUnavailable(StoreUnavailable):
    """The search index cannot be used now (its file unreadable or full, SQLite
    without FTS5): ``unavailable``, the detail in the daemon's log."""

    REASON = "search cannot be answered now (its index failed; the daemon's log says why); retry later"


@contextmanager
def _sqlite_errors(path: str) -> Iterator[None]:
    try:
        yield
    except sqlite3.Error as e:
        raise IndexUnavailable(
            f"search index {path}: {e} (`kungfud check` reports it; `kungfud check --rebuild` remakes it)"
        ) from e
_indexes_lock = threading.Lock()


def index_of(store: Any) -> Any:
    """The search index of ``store`` in this process (opened once): PostgreSQL's
    own full-text search for a PostgreSQL store (store/postgres/search.py),
    else SQLite FTS5 in a file beside the LMDB data."""
    with _indexes_lock:
        idx = _indexes.get(store)
        if idx is None:
            idx = _indexes[store] = _open(store)
        return idx


def _open(store: Any) -> Any:
    if _is_pg(store):
        from .postgres.search import PgSearchIndex

        return PgSearchIndex(store)
    return SearchIndex(os.path.join(store.data_dir, FILE))


def _content(raw: bytes | None) -> str:
    if raw is None:
        return ""
    try:
        return content_text(json.loads(raw))
    except ValueError:
        return ""


def documents(view: Any, fact: Any) -> Iterator[tuple[str, str | None, dict | None, int, str, str | None]]:
    """What ``fact`` does to the searchable documents: (key, kind, ids, at,
    text, thread) to write, or (key, None, …) to delete. Pure over the view's
    immutable rows (Memory versions)."""
    at = fact.at
    if isinstance(fact, F.MemoryCreated):
        yield f"m:{fact.memory}", "memory", {"memory": fact.memory, "version": 1}, at, _content(fact.content), None
    elif isinstance(fact, F.MemoryUpdated):
        ids = {"memory": fact.memory, "version": fact.version}
        yield f"m:{fact.memory}", "memory", ids, at, _content(fact.content), None
    elif isinstance(fact, F.MemoryWithdrawn):
        yield f"m:{fact.memory}", None, None, at, "", None
    elif isinstance(fact, F.EntryPosted):
        text = _content(view.memory_content(fact.pin_memory, fact.pin_version))
        yield f"e:{fact.thread}:{fact.entry:016d}", "entry", {"thread": fact.thread, "entry": fact.entry}, at, text, fact.thread
    elif isinstance(fact, (T.TaskCreated, T.TaskRevised)):
        version = fact.version if isinstance(fact, T.TaskRevised) else 1
        yield f"t:{fact.task}", "task", {"task": fact.task, "version": version}, at, _content(fact.contract.content), None
    elif isinstance(fact, F.AssignmentDelivered):
        text = _content(view.memory_content(fact.pin_memory, fact.pin_version))
        ids = {"thread": fact.thread, "assignment": fact.assignment}
        yield f"a:{fact.assignment}", "delivery", ids, at, text, fact.thread
    elif isinstance(fact, T.EngagementDelivered):
        text = _content(view.memory_content(fact.pin_memory, fact.pin_version))
        yield f"g:{fact.engagement}", "delivery", {"task": fact.task, "engagement": fact.engagement}, at, text, None


class Applier:
    """What both engines share: catching up from the log by fact seq, in
    transactions that hold the index's one writer lock and record the last seq
    applied. An engine provides the transaction, the seq row and ``_write``."""

    _applied = 0  # the last seq this process saw applied (a shortcut; the index says)

    def _begin(self) -> None: ...
    def _commit(self) -> None: ...
    def _rollback(self) -> None: ...
    def applied_seq(self) -> int: ...
    def _set_seq(self, seq: int) -> None: ...
    def _write(self, key: str, kind: str | None, ids: dict | None, at: int, text: str, thread: str | None) -> None: ...

    def catch_up(self, view: Any) -> int:
        """Apply the facts of ``view``'s snapshot the index lacks; the seq it now reflects."""
        target = view.last_seq()
        if self._applied >= target:
            return self._applied
        with self._lock:  # type: ignore[attr-defined]
            while True:
                self._begin()  # the index's writer lock: another process's catch-up waits
                try:
                    done = self.applied_seq()
                    stop = min(target, done + _CHUNK)
                    for seq in range(done + 1, stop + 1):
                        fact = view.fact(seq)
                        if fact is not None:
                            for doc in documents(view, fact):
                                self._write(*doc)
                    if stop > done:
                        self._set_seq(stop)
                    self._commit()
                except BaseException:
                    self._rollback()
                    raise
                self._applied = max(done, stop)
                if self._applied >= target:
                    return self._applied


class SearchIndex(Applier):
    """One SQLite FTS5 file; safe to share between threads of one process and
    between processes (SQLite's locking)."""

    def __init__(self, path: str):
        self.path = path
        self._lock = threading.Lock()
        with _sqlite_errors(path):
            self._con = self._open(path)

    def catch_up(self, view: Any) -> int:
        with _sqlite_errors(self.path):
            return super().catch_up(view)

    @staticmethod
    def _open(path: str) -> sqlite3.Connection:
        if path != ":memory:":
            os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))  # owner only, like the store
        con = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA synchronous=NORMAL")  # derived: a lost commit is applied again from the log
        con.executescript(_SCHEMA)
        return con

    def close(self) -> None:
        with self._lock:
            self._con.close()

    def _begin(self) -> None:
        self._con.execute("BEGIN IMMEDIATE")

    def _commit(self) -> None:
        self._con.execute("COMMIT")

    def _rollback(self) -> None:
        if self._con.in_transaction:
            self._con.execute("ROLLBACK")

    def applied_seq(self) -> int:
        row = self._con.execute("SELECT v FROM meta WHERE k='seq'").fetchone()
        return 0 if row is None else row[0]

    def _set_seq(self, seq: int) -> None:
        self._con.execute("INSERT OR REPLACE INTO meta(k, v) VALUES('seq', ?)", (seq,))

    def _write(self, key: str, kind: str | None, ids: dict | None, at: int, text: str, thread: str | None) -> None:
        con = self._con
        row = con.execute("SELECT id FROM docs WHERE key=?", (key,)).fetchone()
        if row is not None:
            con.execute("DELETE FROM fts WHERE rowid=?", (row[0],))
            con.execute("DELETE FROM docs WHERE id=?", (row[0],))
        if kind is None:
            return
        cur = con.execute(
            "INSERT INTO docs(key, kind, thread, ids, at, text) VALUES(?, ?, ?, ?, ?, ?)",
            (key, kind, thread, json.dumps(ids, separators=(",", ":")), at, text),
        )
        con.execute("INSERT INTO fts(rowid, body) VALUES(?, ?)", (cur.lastrowid, " ".join(tokens(text))))

    def matches(self, terms: list[Term], kinds: tuple[str, ...], thread: str | None) -> list[tuple[int, str, str, dict, int]]:
        """Every document matching all ``terms``: (id, key, kind, ids, at), of
        ``kinds``, in ``thread`` when given. Who may read them is the caller's
        business."""
        sql = "SELECT d.id, d.key, d.kind, d.ids, d.at FROM fts JOIN docs d ON d.id = fts.rowid WHERE fts MATCH ?"
        params: list[Any] = [" ".join(t.fts5() for t in terms)]
        sql += f" AND d.kind IN ({','.join('?' * len(kinds))})"
        params += kinds
        if thread is not None:
            sql += " AND d.thread = ?"
            params.append(thread)
        with self._lock, _sqlite_errors(self.path):
            rows = self._con.execute(sql, params).fetchall()
        return [(i, k, kind, json.loads(ids), at) for i, k, kind, ids, at in rows]

    def texts(self, doc_ids: list[int]) -> dict[int, str]:
        """The text of each of ``doc_ids``, by id."""
        out: dict[int, str] = {}
        with self._lock, _sqlite_errors(self.path):
            for i in range(0, len(doc_ids), 500):
                chunk = doc_ids[i : i + 500]
                sql = f"SELECT id, text FROM docs WHERE id IN ({','.join('?' * len(chunk))})"
                out.update(self._con.execute(sql, chunk).fetchall())
        return out

    def snapshot(self) -> tuple[int, dict[str, tuple]]:
        """(the seq applied, every document as (kind, ids, at, text, thread) by
        key), in one read: a daemon beside the check may be catching up."""
        with self._lock:
            self._con.execute("BEGIN")
            try:
                cur = self._con.execute("SELECT key, kind, ids, at, text, thread FROM docs")
                rows = {k: (kind, json.loads(ids), at, text, th) for k, kind, ids, at, text, th in cur}
                return self.applied_seq(), rows
            finally:
                self._con.execute("COMMIT")

    def problems(self) -> list[str]:
        """FTS5's own integrity check, and one full-text row per document."""
        out = []
        with self._lock:
            try:
                self._con.execute("INSERT INTO fts(fts) VALUES('integrity-check')")
            except sqlite3.DatabaseError as e:
                out.append(f"search index: the full-text table is damaged ({e})")
            n_docs = self._con.execute("SELECT count(*) FROM docs").fetchone()[0]
            n_fts = self._con.execute("SELECT count(*) FROM fts").fetchone()[0]
        if n_docs != n_fts:
            out.append(f"search index: {n_docs} documents but {n_fts} full-text rows")
        return out

    def reset(self) -> None:
        """Empty (``kungfud check --rebuild``, before catching up from the start)."""
        with self._lock:
            self._con.executescript("BEGIN IMMEDIATE; DELETE FROM fts; DELETE FROM docs; DELETE FROM meta; COMMIT;")
            self._applied = 0


def _is_pg(store: Any) -> bool:
    return is_pg_url(getattr(store, "url", None))


def _existing(store: Any) -> Any:
    """The store's index if it has one yet (the check never makes one)."""
    if _is_pg(store):
        from .postgres.search import PgSearchIndex

        return PgSearchIndex(store) if PgSearchIndex.exists(store) else None
    path = os.path.join(store.data_dir, FILE)
    return SearchIndex(path) if os.path.exists(path) else None


def check_index(store: Any, view: Any, rebuild: bool) -> list[str]:
    """``kungfud check``: the index against a rebuild from ``view``'s log up to
    the seq the index says it applied (it may lag: a search catches it up).
    With ``rebuild``, it is remade from the whole log. The problems found
    (before a rebuild)."""
    problems: list[str] = []
    try:
        idx = _existing(store)
    except (sqlite3.DatabaseError, IndexUnavailable) as e:
        idx, problems = None, [f"search index: {os.path.join(store.data_dir, FILE)} cannot be read ({e.__cause__ or e})"]
        if rebuild:
            for suffix in ("", "-wal", "-shm"):
                if os.path.exists(os.path.join(store.data_dir, FILE) + suffix):
                    os.remove(os.path.join(store.data_dir, FILE) + suffix)
    try:
        if idx is not None:
            problems = idx.problems()
            upto, stored = idx.snapshot()
            if upto > view.last_seq():
                problems.append(f"search index: applied up to fact {upto}, past the log's last fact {view.last_seq()}")
            expected = _rebuilt(view, upto)
            for key in sorted(set(expected) | set(stored)):
                if expected.get(key) != stored.get(key):
                    what = "missing" if key not in stored else "extra" if key not in expected else "differs"
                    problems.append(f"search index: document {key} {what}")
        if rebuild:
            if idx is None:
                idx = _open(store)
            idx.reset()
            idx.catch_up(view)
    finally:
        if idx is not None:
            idx.close()
    return problems


def _rebuilt(view: Any, upto: int) -> dict[str, tuple]:
    class _Upto:  # the view as of fact ``upto``
        def last_seq(self) -> int:
            return upto

        def __getattr__(self, name: str) -> Any:
            return getattr(view, name)

    idx = SearchIndex(":memory:")
    try:
        idx.catch_up(_Upto())
        return idx.snapshot()[1]
    finally:
        idx.close()
