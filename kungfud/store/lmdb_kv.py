"""The kv layer (:mod:`kungfud.store.kv`) and the write transaction of the
write engine (:class:`~kungfud.store.interface.WriteTxn`) over LMDB: one LMDB
database per table, one read transaction per :class:`LmdbSnapshot`, one write
transaction (a nested one for ``nested()``) per :class:`LmdbWriteTxn`."""

from __future__ import annotations

import os
from typing import Any, Iterator

import lmdb

from .layout import RETIRED

__all__ = ["LmdbSnapshot", "LmdbTx", "LmdbWriteTxn", "release_mapped"]


class LmdbSnapshot:
    """A :class:`~kungfud.store.kv.Snapshot` over one LMDB transaction and the
    store's databases by table name."""

    __slots__ = ("txn", "dbs")

    def __init__(self, txn: Any, dbs: dict[str, Any]):
        self.txn = txn
        self.dbs = dbs

    def get(self, table: str, key: bytes) -> bytes | None:
        # Positional (key, default, db): py-lmdb parses keywords by name, a
        # third of a small get's cost.
        return self.txn.get(key, None, self.dbs[table])

    def scan(
        self, table: str, start: bytes = b"", stop: bytes | None = None, *, reverse: bool = False, values: bool = True
    ) -> Iterator[tuple[bytes, bytes]]:
        with self.txn.cursor(db=self.dbs[table]) as cur:
            if not reverse:
                if not cur.set_range(start):
                    return
                if values:  # one loop per case: this is every read's inner loop
                    for key, value in cur.iternext(keys=True, values=True):
                        if stop is not None and key >= stop:
                            return
                        yield key, value
                else:
                    for key in cur.iternext(keys=True, values=False):
                        if stop is not None and key >= stop:
                            return
                        yield key, b""
                return
            # The first key at or past ``stop``, then one back; the table's last
            # key when nothing is past it.
            ok = cur.last() if stop is None or not cur.set_range(stop) else cur.prev()
            while ok:
                key = cur.key()
                if key < start:
                    return
                yield key, (cur.value() if values else b"")
                ok = cur.prev()

    def count(self, table: str) -> int:
        return self.txn.stat(self.dbs[table])["entries"]


class LmdbTx(LmdbSnapshot):
    """A :class:`~kungfud.store.kv.Tx` over one LMDB write transaction (or
    nested transaction)."""

    __slots__ = ()

    def put(self, table: str, key: bytes, value: bytes) -> None:
        # The log is append only: a fact is never replaced. Positional
        # (key, value, dupdata, overwrite, append, db), as in get.
        self.txn.put(key, value, False, table != "log", False, self.dbs[table])

    def delete(self, table: str, key: bytes) -> None:
        self.txn.delete(key, db=self.dbs[table])

    def clear(self, table: str) -> None:
        self.txn.drop(self.dbs[table], delete=False)


class SparseSnapshot(LmdbSnapshot):
    """A read-only store's snapshot that lacks some tables: added without a
    format step (``layout.ADDED_EMPTY``, D212), or by a format the store is
    not yet migrated to. They read as empty."""

    __slots__ = ()

    def get(self, table: str, key: bytes) -> bytes | None:
        return super().get(table, key) if table in self.dbs else None

    def scan(self, table: str, start: bytes = b"", stop: bytes | None = None, *, reverse: bool = False,
             values: bool = True) -> Iterator[tuple[bytes, bytes]]:
        if table not in self.dbs:
            return iter(())
        return super().scan(table, start, stop, reverse=reverse, values=values)

    def count(self, table: str) -> int:
        return super().count(table) if table in self.dbs else 0


class LmdbWriteTxn:
    """A :class:`~kungfud.store.interface.WriteTxn`: an LMDB write transaction
    (LMDB's writer lock excludes every other writer of the environment, in any
    process, until it ends); ``nested()`` is a nested transaction of it."""

    __slots__ = ("env", "txn", "tx")

    def __init__(self, env: Any, dbs: dict[str, Any], parent: Any = None):
        self.env = env
        self.txn = env.begin(write=True, parent=parent)
        self.tx = LmdbTx(self.txn, dbs)

    def nested(self) -> "LmdbWriteTxn":
        return LmdbWriteTxn(self.env, self.tx.dbs, self.txn)

    def commit(self) -> None:
        self.txn.commit()  # sync + metasync: durable when it returns

    def abort(self) -> None:
        self.txn.abort()

    def drop_retired(self, name: str) -> None:
        if name not in RETIRED:
            raise KeyError(f"{name!r} is not a retired table")
        try:
            db = self.env.open_db(name.encode(), txn=self.txn, create=False)
        except lmdb.NotFoundError:
            return
        self.txn.drop(db, delete=True)


def release_mapped(path: str) -> None:
    """Drop this process's resident pages of the LMDB file ``path``, which
    LMDB reads through a shared mapping: they stay in the kernel's page cache
    and a later read maps them again, so nothing read changes; a long scan
    (``kungfud check``) then holds in its resident memory only what it read
    since (D367). Linux only; elsewhere nothing."""
    global _libc
    if _libc is None:
        try:
            import ctypes
            import ctypes.util

            libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
            libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
            _libc = libc
        except (OSError, AttributeError):
            _libc = False
    if not _libc:
        return
    target = os.path.realpath(path)
    try:
        with open("/proc/self/maps") as f:
            spans = [line.split(None, 1)[0] for line in f if line.rstrip("\n").endswith(target)]
    except OSError:
        return
    for span in spans:
        lo, hi = (int(x, 16) for x in span.split("-"))
        _libc.madvise(lo, hi - lo, _MADV_DONTNEED)


_libc: Any = None
_MADV_DONTNEED = 4
