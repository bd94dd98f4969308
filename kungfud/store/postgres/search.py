"""Search's derived index on a PostgreSQL store: PostgreSQL's own full-text
search (docs/decisions.md D349), beside the store's tables in its database.

``kf_search`` holds one row per searchable document (as the SQLite index,
store/search_index.py) with a ``tsvector`` of its words under a GIN index, and
``kf_search_seq`` the last fact seq applied. The words are normalized here
(:func:`kungfud.core.search.tokens`: case folded, accents dropped) and given
to the ``simple`` configuration — no stemming, no stop words, no dependency on
the ``unaccent`` extension being installed — so matching is the same on every
node and as on LMDB. Every node catches the one index up from the one log
before a search, under an advisory lock (one writer at a time; applying is
idempotent by seq), so what any node acknowledged is found by the next search
on any node.
"""

from __future__ import annotations

import json
import threading
from typing import Any, Iterator

import psycopg

from ...core.search import Term, tokens
from ...errors import StoreUnavailable
from ..search_docs import Applier, Doc

__all__ = ["PgSearchIndex", "LOCK_SEARCH", "tsquery"]

#: Held by a catch-up transaction (and the schema's creation): "kfd" + a number, as schema.py's.
LOCK_SEARCH = 0x6B6664_0010
_FORMAT = 3  # of the tables; others are remade (they are derived)
_SCHEMA = """
CREATE TABLE IF NOT EXISTS kf_search_seq (k text PRIMARY KEY, v bigint NOT NULL);
CREATE TABLE IF NOT EXISTS kf_search (
    id bigserial PRIMARY KEY, key text UNIQUE NOT NULL, kind text NOT NULL, ids text NOT NULL, at bigint NOT NULL,
    body text NOT NULL, thread text, owner text, public boolean NOT NULL, parties text, pin text, seq bigint NOT NULL,
    norm text NOT NULL, words tsvector NOT NULL);
CREATE INDEX IF NOT EXISTS kf_search_words ON kf_search USING gin (words);
CREATE INDEX IF NOT EXISTS kf_search_thread ON kf_search (thread);
"""
_COLUMNS = "key, kind, ids, at, body, thread, owner, public, parties, pin, seq"


def tsquery(terms: list[Term]) -> str:
    """``terms`` as a ``to_tsquery`` text: all must match (``&``), a phrase's
    words adjacent (``<->``), a prefix ``:*``. Words are letters and digits."""
    parts = []
    for t in terms:
        words = [f"'{w}'" for w in t.words]
        if t.prefix:
            words[-1] += ":*"
        parts.append("(" + " <-> ".join(words) + ")")
    return " & ".join(parts)


def _doc(row: tuple) -> Doc:
    key, kind, ids, at, body, thread, owner, public, parties, pin, seq = row
    return Doc(key, kind, json.loads(ids), at, body, thread, owner, bool(public), parties, pin, seq)


class PgSearchIndex(Applier):
    """The index in the store's database, over one connection of its own."""

    def __init__(self, store: Any):
        self.store = store
        self._lock = threading.Lock()
        self._conn: psycopg.Connection | None = None

    @staticmethod
    def exists(store: Any) -> bool:
        conn = store._connect(write=False)
        try:
            return bool(conn.execute("SELECT to_regclass('kf_search') IS NOT NULL").fetchone()[0])
        finally:
            conn.close()

    def _c(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed or self._conn.broken:
            conn = self.store._connect(write=True)
            try:
                with conn.transaction():
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_SEARCH,))
                    conn.execute("CREATE TABLE IF NOT EXISTS kf_search_seq (k text PRIMARY KEY, v bigint NOT NULL)")
                    row = conn.execute("SELECT v FROM kf_search_seq WHERE k = 'format'").fetchone()
                    if row is None or row[0] != _FORMAT:  # tables of another format: remade from the log
                        conn.execute("DROP TABLE IF EXISTS kf_search")
                        conn.execute("DELETE FROM kf_search_seq")
                        conn.execute(_SCHEMA)
                        conn.execute("INSERT INTO kf_search_seq (k, v) VALUES ('format', %s)", (_FORMAT,))
            except psycopg.Error as e:
                conn.close()
                raise StoreUnavailable(f"cannot prepare the search index on PostgreSQL ({e})") from e
            self._conn = conn
        return self._conn

    def _run(self, sql: str, params: Any = None) -> Any:
        try:
            return self._c().execute(sql, params)
        except (psycopg.OperationalError, psycopg.InterfaceError) as e:
            if self._conn is not None:
                self._conn.close()
            raise StoreUnavailable("lost the connection to PostgreSQL (search index)") from e

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()

    # --- the engine's part of the catch-up (search_docs.Applier) ---

    def _begin(self) -> None:
        self._run("SELECT pg_advisory_xact_lock(%s)", (LOCK_SEARCH,))  # starts the transaction

    def _end(self) -> None:
        self._rollback()

    def _commit(self) -> None:
        self._c().commit()

    def _rollback(self) -> None:
        if self._conn is not None and not self._conn.closed:
            self._conn.rollback()

    def applied_seq(self) -> int:
        row = self._run("SELECT v FROM kf_search_seq WHERE k = 'seq'").fetchone()
        return 0 if row is None else row[0]

    def _set_seq(self, seq: int) -> None:
        self._run(
            "INSERT INTO kf_search_seq (k, v) VALUES ('seq', %s) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v", (seq,)
        )

    def _get_fp(self) -> int | None:
        row = self._run("SELECT v FROM kf_search_seq WHERE k = 'fp'").fetchone()
        return None if row is None else row[0]

    def _set_fp(self, fp: int) -> None:
        self._run(
            "INSERT INTO kf_search_seq (k, v) VALUES ('fp', %s) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v", (fp,)
        )

    def _wipe(self) -> None:
        self._run("DELETE FROM kf_search")

    def _get(self, key: str) -> Doc | None:
        row = self._run(f"SELECT {_COLUMNS} FROM kf_search WHERE key = %s", (key,)).fetchone()
        return None if row is None else _doc(row)

    def _delete(self, key: str) -> None:
        self._run("DELETE FROM kf_search WHERE key = %s", (key,))

    def _put(self, d: Doc, new: bool = False) -> None:
        self._delete(d.key)  # a new row: rows are in log order (the read's last tie-break); one statement either way
        norm = " ".join(tokens(d.text))
        self._run(
            f"INSERT INTO kf_search ({_COLUMNS}, norm, words) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, to_tsvector('simple', %s))",
            (d.key, d.kind, json.dumps(d.ids, separators=(",", ":")), d.at, d.text, d.thread, d.owner, d.public,
             d.parties, d.pin, d.seq, norm, norm),
        )

    def _set_public(self, key: str, public: bool) -> None:
        self._run("UPDATE kf_search SET public = %s WHERE key = %s", (public, key))

    # --- what a search asks ---

    def _read(self, sql: str, params: Any) -> list:
        with self._lock:
            try:
                return self._run(sql, params).fetchall()
            finally:
                self._rollback()  # nothing to keep: no transaction left open between reads

    def matches(
        self, terms: list[Term], kinds: tuple[str, ...], caller: str, threads: list[str], upto: int,
        thread: str | None, before: int | None, limit: int,
    ) -> list[tuple[int, str, dict, int, str | None]]:
        """As :meth:`kungfud.store.search_index.SearchIndex.matches`."""
        sql = (
            "SELECT id, kind, ids, at, pin FROM kf_search WHERE words @@ to_tsquery('simple', %s) AND kind = ANY(%s)"
            " AND seq <= %s"
            " AND (thread = ANY(%s) OR (thread IS NULL AND (public OR owner = %s OR position(%s in parties) > 0)))"
        )
        params: list[Any] = [tsquery(terms), list(kinds), upto, threads, caller, f" {caller} "]
        if thread is not None:
            sql += " AND thread = %s"
            params.append(thread)
        if before is not None:
            sql += " AND id < %s"
            params.append(before)
        sql += " ORDER BY id DESC LIMIT %s"
        params.append(limit)
        return [(i, kind, json.loads(ids), at, pin) for i, kind, ids, at, pin in self._read(sql, params)]

    def words(self, doc_ids: list[int]) -> dict[int, str]:
        return dict(self._read("SELECT id, norm FROM kf_search WHERE id = ANY(%s)", (doc_ids,)))

    def texts(self, doc_ids: list[int]) -> dict[int, str]:
        return dict(self._read("SELECT id, body FROM kf_search WHERE id = ANY(%s)", (doc_ids,)))

    # --- the check ---

    def snapshot(self) -> tuple[int, Iterator[tuple[str, Doc]]]:
        """(the seq applied, every document ascending by key in byte order, as
        SQLite's rebuild orders them), in one REPEATABLE READ transaction read
        through a server-side cursor as it is iterated (D366)."""
        self._lock.acquire()
        try:
            conn = self._c()
            conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            upto = self.applied_seq()
        except BaseException:
            self._done_reading()
            raise

        def rows() -> Iterator[tuple[str, Doc]]:
            try:
                with conn.cursor(name="kf_check_search") as cur:
                    cur.itersize = 2000
                    cur.execute(f'SELECT {_COLUMNS} FROM kf_search ORDER BY key COLLATE "C"')
                    for r in cur:
                        yield r[0], _doc(r)
            finally:
                self._done_reading()

        return upto, rows()

    def _done_reading(self) -> None:
        try:
            self._rollback()
            if self._conn is not None and not self._conn.closed:
                self._conn.isolation_level = psycopg.IsolationLevel.READ_COMMITTED
        finally:
            self._lock.release()

    def problems(self) -> list[str]:
        """Every row's normalized words and ``tsvector`` are its text's (a row
        written outside the index is found), a thousand rows at a time."""
        with self._lock:
            try:
                out = []
                with self._c().cursor(name="kf_check_words") as cur:
                    cur.execute("SELECT key, body, norm, words::text FROM kf_search ORDER BY key")
                    while chunk := cur.fetchmany(1000):
                        norms = [" ".join(tokens(body)) for _, body, _, _ in chunk]
                        want = self._run(
                            "SELECT to_tsvector('simple', w)::text FROM unnest(%s::text[]) WITH ORDINALITY AS u(w, n) ORDER BY n",
                            (norms,),
                        ).fetchall()
                        for (key, _, norm, words), n, (expect,) in zip(chunk, norms, want):
                            if n != norm or expect != words:
                                out.append(f"search index: document {key} has words that are not its text's")
                return out
            finally:
                self._rollback()

    def reset(self) -> None:
        with self._lock:
            try:
                self._begin()
                self._run("DELETE FROM kf_search")
                self._run("DELETE FROM kf_search_seq WHERE k = 'seq'")
                self._commit()
            except BaseException:
                self._rollback()
                raise
            self._applied = 0
