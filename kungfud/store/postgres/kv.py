"""The key-value seam (:mod:`kungfud.store.kv`) over SQL: a read snapshot, a
write transaction and its savepoints (docs/storage.md "PostgreSQL").

- :class:`PgSnapshot` reads inside one REPEATABLE READ, READ ONLY transaction:
  every query of one ``read()`` sees the same committed state. ``scan`` pages
  lazily by key (``key >= start AND key < stop ORDER BY key LIMIT n``, then on
  after the last key), so a caller that stops early never loads a table.
- :class:`PgTx` is the same over the open write transaction (READ COMMITTED,
  the writer's advisory lock held), plus ``put`` / ``delete`` / ``clear``.
- :class:`PgWriteTxn` begins, nests (a SAVEPOINT), commits and aborts.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

from .schema import LOCK_WRITER, table

__all__ = ["PgSnapshot", "PgTx", "PgWriteTxn"]

_FIRST_PAGE = 16
_MAX_PAGE = 1000


class _Sql:
    """The statements of one table, built once (table names are fixed identifiers)."""

    __slots__ = ("get", "count", "put", "insert", "delete", "clear", "pages")

    def __init__(self, name: str):
        t = table(name)
        self.get = f"SELECT value FROM {t} WHERE key = %s"
        self.count = f"SELECT count(*) FROM {t}"
        self.put = f"INSERT INTO {t} (key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"
        self.insert = f"INSERT INTO {t} (key, value) VALUES (%s, %s)"
        self.delete = f"DELETE FROM {t} WHERE key = %s"
        self.clear = f"DELETE FROM {t}"
        # (reverse, values, lower op, has upper bound) -> a page query
        self.pages: dict[tuple[bool, bool, str, bool], str] = {}
        for reverse in (False, True):
            for values in (False, True):
                for low in (">=", ">"):
                    for upper in (False, True):
                        cond = f"key {low} %s" + (" AND key < %s" if upper else "")
                        cols = "key, value" if values else "key"
                        order = "DESC" if reverse else "ASC"
                        self.pages[(reverse, values, low, upper)] = (
                            f"SELECT {cols} FROM {t} WHERE {cond} ORDER BY key {order} LIMIT %s"
                        )


_SQL: dict[str, _Sql] = {}


def _sql(name: str) -> _Sql:
    s = _SQL.get(name)
    if s is None:
        s = _SQL[name] = _Sql(name)
    return s


class PgSnapshot:
    """One consistent read over an open transaction of ``conn``."""

    __slots__ = ("_cur",)

    def __init__(self, cursor: Any):
        self._cur = cursor

    def get(self, table: str, key: bytes) -> bytes | None:
        cur = self._cur
        cur.execute(_sql(table).get, (key,))
        row = cur.fetchone()
        return None if row is None else row[0]

    def count(self, table: str) -> int:
        cur = self._cur
        cur.execute(_sql(table).count)
        return cur.fetchone()[0]

    def scan(
        self, table: str, start: bytes = b"", stop: bytes | None = None, *, reverse: bool = False, values: bool = True
    ) -> Iterator[tuple[bytes, bytes]]:
        """Rows with ``start <= key < stop`` (``stop`` None: to the table's end),
        ascending, or descending with ``reverse``; fetched a page at a time."""
        pages = _sql(table).pages
        cur = self._cur
        n = _FIRST_PAGE
        low, lo, hi = ">=", start, stop
        while True:
            params: tuple = (lo,) if hi is None else (lo, hi)
            cur.execute(pages[(reverse, values, low, hi is not None)], (*params, n))
            rows = cur.fetchall()
            for row in rows:
                yield (row[0], row[1]) if values else (row[0], b"")
            if len(rows) < n:
                return
            if not reverse:
                low, lo = ">", rows[-1][0]  # on after the last key
            else:
                hi = rows[-1][0]  # on before the last key (key < it)
            n = min(n * 4, _MAX_PAGE)


class PgTx(PgSnapshot):
    """The planner's and the engine's Tx over the open write transaction."""

    __slots__ = ()

    def put(self, table: str, key: bytes, value: bytes) -> None:
        s = _sql(table)
        # The log is append only: a fact is never replaced — a second write of
        # one seq fails (unique violation), it does not overwrite.
        self._cur.execute(s.insert if table == "log" else s.put, (key, value))

    def delete(self, table: str, key: bytes) -> None:
        self._cur.execute(_sql(table).delete, (key,))

    def clear(self, table: str) -> None:
        self._cur.execute(_sql(table).clear)


class PgWriteTxn:
    """One write transaction (``savepoint`` None) or a savepoint inside one."""

    __slots__ = ("tx", "_conn", "_depth", "_savepoint", "_done", "_release")

    def __init__(self, conn: Any, release: Callable[[Any, bool], None], depth: int = 0):
        self._conn = conn
        self._depth = depth
        self._savepoint = f"kf_sp{depth}" if depth else None
        self._release = release  # at the top level's end: store's hook (the connection, whether it ended cleanly)
        self._done = False
        self.tx = PgTx(conn.cursor())

    @classmethod
    def begin(cls, conn: Any, release: Callable[[Any, bool], None]) -> "PgWriteTxn":
        """Open the write transaction: its first statement takes the store's
        writer lock, held until commit or abort (every writer, every node)."""
        txn = cls(conn, release)
        txn.tx._cur.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_WRITER,))
        return txn

    def nested(self) -> "PgWriteTxn":
        child = PgWriteTxn(self._conn, self._release, self._depth + 1)
        child.tx._cur.execute(f"SAVEPOINT {child._savepoint}")
        return child

    def commit(self) -> None:
        """Durable when it returns (top level; ``synchronous_commit = on``)."""
        if self._done:
            raise RuntimeError("the transaction is already finished")
        self._done = True
        if self._savepoint is not None:
            self.tx._cur.execute(f"RELEASE SAVEPOINT {self._savepoint}")
            return
        ok = False
        try:
            self._conn.commit()
            ok = True
        finally:
            self._release(self._conn, ok)

    def abort(self) -> None:
        if self._done:
            return
        self._done = True
        if self._savepoint is not None:
            self.tx._cur.execute(f"ROLLBACK TO SAVEPOINT {self._savepoint}")
            self.tx._cur.execute(f"RELEASE SAVEPOINT {self._savepoint}")
            return
        ok = False
        try:
            self._conn.rollback()
            ok = True
        except Exception:
            pass
        finally:
            self._release(self._conn, ok)
