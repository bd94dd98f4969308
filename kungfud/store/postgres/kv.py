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

from psycopg.pq import TransactionStatus

from ..layout import RETIRED
from .schema import LOCK_WRITER, table

__all__ = ["PgSnapshot", "PgTx", "PgWriteTxn", "WriteFailed"]


class WriteFailed(RuntimeError):
    """The write transaction cannot commit: one of its statements failed."""

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
        self.insert = f"INSERT INTO {t} (key, value) VALUES (%s, %s) ON CONFLICT (key) DO NOTHING"
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

    def _flush(self) -> None:
        """Send the writes not sent yet (a write transaction's; none here)."""

    def get(self, table: str, key: bytes) -> bytes | None:
        self._flush()
        cur = self._cur
        cur.execute(_sql(table).get, (key,))
        row = cur.fetchone()
        return None if row is None else row[0]

    def count(self, table: str) -> int:
        self._flush()
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
            self._flush()
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
    """The planner's and the engine's Tx over the open write transaction.

    Writes are queued and sent together (one pipeline, one round trip) before
    the next read, savepoint release or commit, so an action's rows cost one
    round trip, not one each. A write that fails (a unique violation on the
    log, a lost connection) raises there; the transaction is then failed and
    cannot commit (:class:`PgWriteTxn`), so nothing of it is acknowledged."""

    __slots__ = ("_pending", "_known")

    def __init__(self, cursor: Any, pending: list, known: dict):
        super().__init__(cursor)
        self._pending = pending  # shared by the transaction and its savepoints
        # (table, key) -> value or None, as this transaction last read or wrote
        # it: exact, since the writer lock keeps every other writer out until
        # the end (a savepoint's abort forgets it all).
        self._known = known

    def get(self, table: str, key: bytes) -> bytes | None:
        known = self._known
        k = (table, key)
        if k in known:
            return known[k]
        value = known[k] = PgSnapshot.get(self, table, key)
        return value

    def _flush(self) -> None:
        pending = self._pending
        if not pending:
            return
        ops = pending[:]
        pending.clear()
        cur = self._cur
        if len(ops) == 1:
            cur.execute(*ops[0])
            return
        with cur.connection.pipeline():
            for sql, params in ops:
                cur.execute(sql, params)

    def put(self, table: str, key: bytes, value: bytes) -> None:
        s = _sql(table)
        # The log is append only: a fact is never replaced — a second write of
        # one seq leaves the first (as LMDB's overwrite=False; the kv contract).
        self._pending.append((s.insert if table == "log" else s.put, (key, value)))
        k = (table, key)
        if table == "log" and self._known.get(k, b"") is not None:
            self._known.pop(k, None)  # not known absent: the first fact may be there and stays
            return
        self._known[k] = value

    def delete(self, table: str, key: bytes) -> None:
        self._pending.append((_sql(table).delete, (key,)))
        self._known[(table, key)] = None

    def clear(self, table: str) -> None:
        self._pending.append((_sql(table).clear, None))
        known = self._known
        for k in [k for k in known if k[0] == table]:
            del known[k]


class PgWriteTxn:
    """One write transaction (``savepoint`` None) or a savepoint inside one."""

    __slots__ = ("tx", "_conn", "_depth", "_savepoint", "_done", "_release")

    def __init__(
        self, conn: Any, release: Callable[[Any, bool], None], depth: int = 0, parent: "PgTx | None" = None
    ):
        self._conn = conn
        self._depth = depth
        self._savepoint = f"kf_sp{depth}" if depth else None
        self._release = release  # at the top level's end: store's hook (the connection, whether it ended cleanly)
        self._done = False
        self.tx = PgTx(conn.cursor(binary=True), [], {}) if parent is None else PgTx(
            parent._cur, parent._pending, parent._known
        )

    @classmethod
    def begin(cls, conn: Any, release: Callable[[Any, bool], None]) -> "PgWriteTxn":
        """Open the write transaction: its first statement takes the store's
        writer lock, held until commit or abort (every writer, every node)."""
        txn = cls(conn, release)
        txn.tx._cur.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_WRITER,))
        return txn

    def nested(self) -> "PgWriteTxn":
        child = PgWriteTxn(self._conn, self._release, self._depth + 1, self.tx)
        child.tx._pending.append((f"SAVEPOINT {child._savepoint}", None))  # sent with the next writes
        return child

    def commit(self) -> None:
        """Durable when it returns (top level; ``synchronous_commit = on``)."""
        if self._done:
            raise RuntimeError("the transaction is already finished")
        if self._savepoint is not None:
            self.tx._pending.append((f"RELEASE SAVEPOINT {self._savepoint}", None))
            self.tx._flush()  # its writes fail here (then abort() rolls back to it)
            self._done = True
            return
        self._done = True
        ok = False
        try:
            self.tx._flush()
            if self._conn.info.transaction_status != TransactionStatus.INTRANS:
                # PostgreSQL answers COMMIT of a failed transaction by rolling
                # it back without an error: nothing may be reported committed.
                raise WriteFailed("a statement of this write transaction failed; it was rolled back, nothing was written")
            self._conn.commit()
            ok = True
        finally:
            self._release(self._conn, ok)

    def drop_retired(self, name: str) -> None:
        if name not in RETIRED:
            raise KeyError(f"{name!r} is not a retired table")
        self.tx._pending.append((f"DROP TABLE IF EXISTS kf_{name}", None))  # a fixed identifier

    def abort(self) -> None:
        if self._done:
            return
        self._done = True
        if self._savepoint is not None:
            self.tx._known.clear()  # what it wrote is undone
            try:
                self.tx._flush()  # the savepoint itself may still be queued
            except Exception:
                pass  # a failed write: rolling back to the savepoint undoes it
            self.tx._cur.execute(f"ROLLBACK TO SAVEPOINT {self._savepoint}")
            self.tx._cur.execute(f"RELEASE SAVEPOINT {self._savepoint}")
            return
        self.tx._pending.clear()
        ok = False
        try:
            self._conn.rollback()
            ok = True
        except Exception:
            pass
        finally:
            self._release(self._conn, ok)
