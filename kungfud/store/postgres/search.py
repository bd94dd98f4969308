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
from typing import Any

import psycopg

from ...core.search import Term, tokens
from ...errors import StoreUnavailable
from ..search_index import Applier

__all__ = ["PgSearchIndex", "LOCK_SEARCH"]

#: Held by a catch-up transaction (and the schema's creation): "kfd" + a number, as schema.py's.
LOCK_SEARCH = 0x6B6664_0010
_SCHEMA = """
CREATE TABLE IF NOT EXISTS kf_search_seq (k text PRIMARY KEY, v bigint NOT NULL);
CREATE TABLE IF NOT EXISTS kf_search (
    id bigserial PRIMARY KEY, key text UNIQUE NOT NULL, kind text NOT NULL, thread text,
    ids text NOT NULL, at bigint NOT NULL, body text NOT NULL, words tsvector NOT NULL);
CREATE INDEX IF NOT EXISTS kf_search_words ON kf_search USING gin (words);
CREATE INDEX IF NOT EXISTS kf_search_thread ON kf_search (thread);
"""


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
                    conn.execute(_SCHEMA)
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

    def _begin(self) -> None:
        self._run("SELECT pg_advisory_xact_lock(%s)", (LOCK_SEARCH,))  # starts the transaction

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

    def _write(self, key: str, kind: str | None, ids: dict | None, at: int, text: str, thread: str | None) -> None:
        self._run("DELETE FROM kf_search WHERE key = %s", (key,))
        if kind is None:
            return
        self._run(
            "INSERT INTO kf_search (key, kind, thread, ids, at, body, words) "
            "VALUES (%s, %s, %s, %s, %s, %s, to_tsvector('simple', %s))",
            (key, kind, thread, json.dumps(ids, separators=(",", ":")), at, text, " ".join(tokens(text))),
        )

    def matches(self, terms: list[Term], kinds: tuple[str, ...], thread: str | None) -> list[tuple[int, str, str, dict, int]]:
        sql = "SELECT id, key, kind, ids, at FROM kf_search WHERE words @@ to_tsquery('simple', %s) AND kind = ANY(%s)"
        params: list[Any] = [tsquery(terms), list(kinds)]
        if thread is not None:
            sql += " AND thread = %s"
            params.append(thread)
        with self._lock:
            try:
                rows = self._run(sql, params).fetchall()
            finally:
                self._rollback()  # nothing to keep: no transaction left open between reads
        return [(i, k, kind, json.loads(ids), at) for i, k, kind, ids, at in rows]

    def texts(self, doc_ids: list[int]) -> dict[int, str]:
        with self._lock:
            try:
                return dict(self._run("SELECT id, body FROM kf_search WHERE id = ANY(%s)", (doc_ids,)).fetchall())
            finally:
                self._rollback()

    def snapshot(self) -> tuple[int, dict[str, tuple]]:
        with self._lock:
            try:
                self._c().isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
                cur = self._run("SELECT key, kind, ids, at, body, thread FROM kf_search")
                rows = {k: (kind, json.loads(ids), at, body, th) for k, kind, ids, at, body, th in cur}
                return self.applied_seq(), rows
            finally:
                self._rollback()
                self._c().isolation_level = psycopg.IsolationLevel.READ_COMMITTED

    def problems(self) -> list[str]:
        """Every row's words are its text's (a row written outside the index is found)."""
        with self._lock:
            try:
                rows = self._run("SELECT key, body, words::text FROM kf_search ORDER BY key").fetchall()
                out = []
                for i in range(0, len(rows), 1000):
                    chunk = rows[i : i + 1000]
                    want = self._run(
                        "SELECT to_tsvector('simple', w)::text FROM unnest(%s::text[]) WITH ORDINALITY AS u(w, n) ORDER BY n",
                        ([" ".join(tokens(body)) for _, body, _ in chunk],),
                    ).fetchall()
                    for (key, _, words), (expect,) in zip(chunk, want):
                        if expect != words:
                            out.append(f"search index: document {key} has words that are not its text's")
                return out
            finally:
                self._rollback()

    def reset(self) -> None:
        with self._lock:
            try:
                self._begin()
                self._run("DELETE FROM kf_search")
                self._run("DELETE FROM kf_search_seq")
                self._commit()
            except BaseException:
                self._rollback()
                raise
            self._applied = 0
