"""Search's derived index (WIRE.md 1.3 "Search"; docs/decisions.md D348):
SQLite FTS5, a file beside the store's data (``search.sqlite`` in the data
directory), derived from the fact log like every other index (L1-1). What it
holds and how it is caught up: :mod:`kungfud.store.search_docs`.

One ``docs`` row per searchable document — its key, ids, time, text and scope —
and an FTS5 row of its normalized words (:func:`kungfud.core.search.tokens`)
with the same rowid. Nothing here decides who may read what: the scope only
narrows the query, and the read checks every match against its own snapshot
(§9, reads/search.py).

It is caught up from the log by fact seq before a search is answered, in SQLite
transactions that record the last seq applied: a ``kill -9`` anywhere loses
nothing (the next search applies what the index lacks), an acknowledged action
is found by the next search, and several processes on one store (``--workers``)
share the file, one writer at a time (SQLite's lock; applying is idempotent).
``kungfud check`` compares it with a rebuild from the log; ``--rebuild``
remakes it. :func:`index_of` also opens the PostgreSQL engine
(store/postgres/search.py) for a PostgreSQL store.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import weakref
from contextlib import contextmanager
from typing import Any, Iterator

import msgspec

from ..core.search import Term, tokens
from ..errors import StoreUnavailable
from .interface import is_pg_url
from .search_docs import Applier, Doc

__all__ = ["SearchIndex", "IndexUnavailable", "index_of", "check_index", "FILE"]

FILE = "search.sqlite"
_FORMAT = 4  # of the file; another is remade (it is derived). 4: no docs(thread) index (every query starts from
# the full-text match and reads docs by rowid), FTS5 without per-row lengths (D417)
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(k TEXT PRIMARY KEY, v INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS docs(
    id INTEGER PRIMARY KEY, key TEXT UNIQUE NOT NULL, kind TEXT NOT NULL, ids TEXT NOT NULL, at INTEGER NOT NULL,
    text TEXT NOT NULL, thread TEXT, owner TEXT, public INTEGER NOT NULL, parties TEXT, pin TEXT, seq INTEGER NOT NULL);
CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(body, tokenize='unicode61 remove_diacritics 0', columnsize=0);
"""
_COLUMNS = "key, kind, ids, at, text, thread, owner, public, parties, pin, seq"
_INSERT = f"INSERT INTO docs(id, {_COLUMNS}) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
class _LazySqlite:
    """``sqlite3`` (~2 MiB of a daemon's memory) imported by the first search,
    not at start: a daemon nobody searches never loads it (idle RSS, issue 38
    §3). Every use below is an attribute of it, looked up when it runs."""

    def __getattr__(self, name: str) -> Any:
        import sqlite3

        return getattr(sqlite3, name)


sqlite3 = _LazySqlite()

_indexes: "weakref.WeakKeyDictionary[Any, Any]" = weakref.WeakKeyDictionary()
_indexes_lock = threading.Lock()


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


_ids = msgspec.json.Decoder(dict).decode
_enc = msgspec.json.Encoder().encode


def _doc(row: tuple) -> Doc:
    key, kind, ids, at, text, thread, owner, public, parties, pin, seq = row
    return Doc(key, kind, json.loads(ids), at, text, thread, owner, bool(public), parties, pin, seq)


class SearchIndex(Applier):
    """One SQLite FTS5 file; safe to share between threads of one process and
    between processes (SQLite's locking)."""

    def __init__(self, path: str):
        self.path = path
        self._lock = threading.Lock()
        with _sqlite_errors(path):
            self._con = self._open(path)

    @staticmethod
    def _open(path: str) -> sqlite3.Connection:
        if path != ":memory:":
            os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))  # owner only, like the store
        con = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA synchronous=NORMAL")  # derived: a lost commit is applied again from the log
        con.execute("BEGIN IMMEDIATE")
        try:
            con.execute("CREATE TABLE IF NOT EXISTS meta(k TEXT PRIMARY KEY, v INTEGER NOT NULL)")
            row = con.execute("SELECT v FROM meta WHERE k='format'").fetchone()
            if row is None or row[0] != _FORMAT:  # a file of another format: remade from the log
                for table in ("fts", "docs", "meta"):
                    con.execute(f"DROP TABLE IF EXISTS {table}")
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        con.execute(statement)
                con.execute("INSERT INTO meta(k, v) VALUES('format', ?)", (_FORMAT,))
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        return con

    def close(self) -> None:
        with self._lock:
            self._con.close()

    def catch_up(self, view: Any, reader: Any = None) -> int:
        with _sqlite_errors(self.path):
            return super().catch_up(view, reader)

    # --- the engine's part of the catch-up (search_docs.Applier) ---

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

    def _get_fp(self) -> int | None:
        row = self._con.execute("SELECT v FROM meta WHERE k='fp'").fetchone()
        return None if row is None else row[0]

    def _set_fp(self, fp: int) -> None:
        self._con.execute("INSERT OR REPLACE INTO meta(k, v) VALUES('fp', ?)", (fp,))

    def _wipe(self) -> None:
        self._con.execute("DELETE FROM fts")
        self._con.execute("DELETE FROM docs")

    def _get_stored(self, key: str) -> Doc | None:
        row = self._con.execute(f"SELECT {_COLUMNS} FROM docs WHERE key=?", (key,)).fetchone()
        return None if row is None else _doc(row)

    def _delete_stored(self, key: str) -> None:
        row = self._con.execute("SELECT id FROM docs WHERE key=?", (key,)).fetchone()
        if row is not None:
            self._con.execute("DELETE FROM fts WHERE rowid=?", (row[0],))
            self._con.execute("DELETE FROM docs WHERE id=?", (row[0],))

    def _insert(self, docs: list[tuple[Doc, str]]) -> None:
        """Two ``executemany`` (documents, then their words under the same
        rowids, numbered here after the last row)."""
        con = self._con
        first = (con.execute("SELECT max(id) FROM docs").fetchone()[0] or 0) + 1
        rows = [
            (i, d.key, d.kind, _enc(d.ids).decode(), d.at, d.text, d.thread, d.owner, int(d.public), d.parties, d.pin, d.seq)
            for i, (d, _) in enumerate(docs, first)
        ]
        try:
            con.executemany(_INSERT, rows)
        except sqlite3.IntegrityError:  # a key written before after all: written anew
            for d, _ in docs:
                self._delete_stored(d.key)
            return self._insert(docs)
        con.executemany("INSERT INTO fts(rowid, body) VALUES(?, ?)", [(i, words) for i, (_, words) in enumerate(docs, first)])

    def _set_public_stored(self, key: str, public: bool) -> None:
        self._con.execute("UPDATE docs SET public=? WHERE key=?", (int(public), key))

    # --- what a search asks ---

    def matches(
        self, terms: list[Term], kinds: tuple[str, ...], caller: str, threads: list[str], upto: int,
        thread: str | None, before: int | None, limit: int,
    ) -> list[tuple[int, str, dict, int, str | None]]:
        """The documents written by fact ``upto`` or before that match all
        ``terms``, of ``kinds``, within the caller's scope — in one of
        ``threads``, or in no Thread and public, the caller's own or naming the
        caller among its parties — and in ``thread`` when given: (id, kind,
        ids, at, pin), the last written first, from just before the row
        ``before``, at most ``limit``. A superset of what the caller may read."""
        sql = (
            "SELECT d.id, d.kind, d.ids, d.at, d.pin FROM fts JOIN docs d ON d.id = fts.rowid WHERE fts MATCH ?"
            f" AND d.kind IN ({','.join('?' * len(kinds))}) AND d.seq <= ?"
            " AND (d.thread IN (SELECT value FROM json_each(?))"
            " OR (d.thread IS NULL AND (d.public = 1 OR d.owner = ? OR instr(d.parties, ?) > 0)))"
        )
        params = [" ".join(t.fts5() for t in terms), *kinds, upto, json.dumps(threads), caller, f" {caller} "]
        if thread is not None:
            sql += " AND d.thread = ?"
            params.append(thread)
        if before is not None:
            sql += " AND fts.rowid < ?"
            params.append(before)
        sql += " ORDER BY fts.rowid DESC LIMIT ?"
        params.append(limit)
        with self._lock, _sqlite_errors(self.path):
            rows = self._con.execute(sql, params).fetchall()
        return [(i, kind, _ids(ids), at, pin) for i, kind, ids, at, pin in rows]

    def _by_id(self, sql: str, doc_ids: list[int]) -> dict[int, str]:
        out: dict[int, str] = {}
        with self._lock, _sqlite_errors(self.path):
            for i in range(0, len(doc_ids), 500):
                chunk = doc_ids[i : i + 500]
                out.update(self._con.execute(sql.format(",".join("?" * len(chunk))), chunk).fetchall())
        return out

    def words(self, doc_ids: list[int]) -> dict[int, str]:
        """The normalized words of each of ``doc_ids`` (space-separated), by id."""
        return self._by_id("SELECT rowid, body FROM fts WHERE rowid IN ({})", doc_ids)

    def texts(self, doc_ids: list[int]) -> dict[int, str]:
        """The text of each of ``doc_ids``, by id."""
        return self._by_id("SELECT id, text FROM docs WHERE id IN ({})", doc_ids)

    # --- the check ---

    def snapshot(self) -> tuple[int, Iterator[tuple[str, Doc]]]:
        """(the seq applied, every document ascending by key), in one read: a
        daemon beside the check may be catching up. The documents are read
        as they are iterated (D366), the read held open until the iterator
        ends or is closed."""
        self._lock.acquire()
        try:
            self._con.execute("BEGIN")
            upto = self.applied_seq()
        except BaseException:
            self._lock.release()
            raise

        def rows() -> Iterator[tuple[str, Doc]]:
            try:
                for r in self._con.execute(f"SELECT {_COLUMNS} FROM docs ORDER BY key"):
                    yield r[0], _doc(r)
            finally:
                self._con.execute("COMMIT")
                self._lock.release()

        return upto, rows()

    def problems(self) -> list[str]:
        """FTS5's own integrity check, and each document's words row holding its text's words."""
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
            out += [
                f"search index: document {k} has words that are not its text's"
                for k, t, b in self._con.execute(
                    "SELECT d.key, d.text, f.body FROM docs d LEFT JOIN fts f ON f.rowid = d.id ORDER BY d.key"
                )
                if b != " ".join(tokens(t))
            ]
        return out


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
            try:
                if upto > view.last_seq():
                    problems.append(f"search index: applied up to fact {upto}, past the log's last fact {view.last_seq()}")
                with _rebuilt(view, upto) as expected:
                    for what, key in _differences(expected, stored):
                        problems.append(f"search index: document {key} {what}")
            finally:
                stored.close()
        if rebuild:
            if idx is None:
                idx = _open(store)
            idx.reset()
            idx.catch_up(view)
    finally:
        if idx is not None:
            idx.close()
    return problems


@contextmanager
def _rebuilt(view: Any, upto: int) -> Iterator[Iterator[tuple[str, Doc]]]:
    """The documents of a rebuild from ``view``'s log up to fact ``upto``,
    ascending by key, made in a temporary file (D366: not in memory)."""

    class _Upto:  # the view as of fact ``upto``
        def last_seq(self) -> int:
            return upto

        def __getattr__(self, name: str) -> Any:
            return getattr(view, name)

    where = tempfile.mkdtemp(prefix="kungfud-check-search-")
    idx = SearchIndex(os.path.join(where, FILE))
    try:
        # A scratch file, removed at the end: no durability wanted.
        idx._con.execute("PRAGMA synchronous=OFF")
        idx._con.execute("PRAGMA journal_mode=OFF")
        idx.catch_up(_Upto())
        _, docs = idx.snapshot()
        try:
            yield docs
        finally:
            docs.close()
    finally:
        idx.close()
        shutil.rmtree(where, ignore_errors=True)


def _differences(expected: Iterator[tuple[str, Doc]], stored: Iterator[tuple[str, Doc]]) -> Iterator[tuple[str, str]]:
    """("missing" | "extra" | "differs", key) where two ascending streams of documents disagree."""
    end = None
    e, s = next(expected, end), next(stored, end)
    while e is not None or s is not None:
        if s is None or (e is not None and e[0] < s[0]):
            yield "missing", e[0]  # type: ignore[index]
            e = next(expected, end)
        elif e is None or s[0] < e[0]:
            yield "extra", s[0]
            s = next(stored, end)
        else:
            if e[1] != s[1]:
                yield "differs", e[0]
            e, s = next(expected, end), next(stored, end)
