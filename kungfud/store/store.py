"""The LMDB environment and consistent read views.

One :class:`View` is one read transaction: a permission check and the content it
guards come from the same state (R9-5, R12-10). Writes go only through
:class:`~kungfud.store.writer.Writer`.
"""

from __future__ import annotations

import errno
import fcntl
import os
from contextlib import contextmanager
from typing import Any, Iterator

import lmdb

from ..core.atoms import state_type
from .layout import DBS, FORMAT, Receipt, decode_fact, decode_object, from_u64, u32
import msgspec

__all__ = ["Store", "StoreLocked", "View"]

_receipt_dec = msgspec.msgpack.Decoder(Receipt)
_events_dec = msgspec.msgpack.Decoder(list[bytes])


class StoreLocked(RuntimeError):
    """Another process holds the data directory."""


class Store:
    """Owns the data directory: an exclusive lock file and the LMDB environment."""

    def __init__(self, data_dir: str, *, map_size_mb: int = 10240, readonly: bool = False, lock: bool = True):
        self.data_dir = data_dir
        os.makedirs(data_dir, mode=0o700, exist_ok=True)
        self._lock_fd: int | None = None
        if lock:
            self._lock_fd = os.open(os.path.join(data_dir, "kungfud.lock"), os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                os.close(self._lock_fd)
                self._lock_fd = None
                if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise StoreLocked(
                        f"data directory {data_dir} is in use by another kungfud process"
                    ) from None
                raise
        path = os.path.join(data_dir, "lmdb")
        os.makedirs(path, mode=0o700, exist_ok=True)
        # sync+metasync: a commit is durable when it returns (DESIGN.md "Durability").
        # writemap off: nested transactions need it, and a stray write cannot
        # corrupt the map.
        self.env = lmdb.open(
            path,
            map_size=map_size_mb * 1024 * 1024,
            max_dbs=len(DBS) + 4,
            max_readers=1024,
            sync=True,
            metasync=True,
            writemap=False,
            readonly=readonly,
            lock=True,
        )
        self.dbs: dict[str, Any] = {}
        if readonly:
            for name in DBS:
                self.dbs[name] = self.env.open_db(name.encode(), create=False)
        else:
            with self.env.begin(write=True) as txn:
                for name in DBS:
                    self.dbs[name] = self.env.open_db(name.encode(), txn=txn)
                meta = self.dbs["meta"]
                fmt = txn.get(b"format", db=meta)
                if fmt is None:
                    txn.put(b"format", FORMAT, db=meta)
                elif fmt != FORMAT:
                    raise RuntimeError(f"data directory {data_dir} has storage format {fmt!r}; this kungfud reads {FORMAT!r}")

    def close(self) -> None:
        self.env.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    @contextmanager
    def read(self) -> Iterator["View"]:
        with self.env.begin(buffers=False) as txn:
            yield View(txn, self.dbs)

    def map_usage(self) -> tuple[int, int]:
        info = self.env.info()
        stat = self.env.stat()
        return (info["last_pgno"] + 1) * stat["psize"], info["map_size"]


class View:
    """Reads over one transaction (read-only, or the writer's own)."""

    __slots__ = ("txn", "dbs")

    def __init__(self, txn: Any, dbs: dict[str, Any]):
        self.txn = txn
        self.dbs = dbs

    def last_seq(self) -> int:
        raw = self.txn.get(b"seq", db=self.dbs["meta"])
        return from_u64(raw) if raw else 0

    def version(self, obj: str) -> int:
        raw = self.txn.get(obj.encode(), db=self.dbs["objects"])
        return 0 if raw is None else decode_object(raw, state_type(obj))[0]

    def obj(self, obj: str) -> tuple[int, Any]:
        """(version, state); (0, None) for an object that does not exist."""
        raw = self.txn.get(obj.encode(), db=self.dbs["objects"])
        if raw is None:
            return 0, None
        return decode_object(raw, state_type(obj))

    def state(self, obj: str) -> Any:
        return self.obj(obj)[1]

    def receipt(self, scope: bytes) -> Receipt | None:
        raw = self.txn.get(scope, db=self.dbs["receipts"])
        return None if raw is None else _receipt_dec.decode(raw)

    def agent_for_key_hash(self, key_hash: bytes) -> str | None:
        raw = self.txn.get(key_hash, db=self.dbs["agent_keys"])
        return None if raw is None else raw.decode()

    def thread_for_token(self, token_hash: bytes) -> str | None:
        raw = self.txn.get(token_hash, db=self.dbs["tokens"])
        return None if raw is None else raw.decode()

    def events_for(self, agent: str, after: int) -> Iterator[tuple[int, bytes]]:
        """(seq, event JSON) of ``agent``'s feed with seq > ``after``, in order."""
        from .layout import u64

        prefix = agent.encode() + b"\x00"
        with self.txn.cursor(db=self.dbs["events"]) as cur:
            if not cur.set_range(prefix + u64(after + 1)):
                return
            for key, value in cur:
                if not key.startswith(prefix):
                    return
                seq = from_u64(key[len(prefix):])
                for event in _events_dec.decode(value):
                    yield seq, event

    def fact(self, seq: int) -> Any:
        from .layout import u64

        raw = self.txn.get(u64(seq), db=self.dbs["log"])
        return None if raw is None else decode_fact(raw)

    def memory_content(self, memory: str, version: int) -> bytes | None:
        raw = self.txn.get(memory.encode() + b"\x00" + u32(version), db=self.dbs["versions"])
        if raw is None:
            return None
        return self.fact(from_u64(raw)).content

    def memories_of(self, author: str, after: str | None) -> Iterator[str]:
        """Memory ids of ``author`` still listed, in creation order, after ``after``."""
        prefix = author.encode() + b"\x00"
        start = prefix + (after.encode() + b"\x01" if after else b"")
        with self.txn.cursor(db=self.dbs["memories"]) as cur:
            if not cur.set_range(start):
                return
            for key in cur.iternext(values=False):
                if not key.startswith(prefix):
                    return
                yield key[len(prefix):].decode()

    def agents(self, after: str | None) -> Iterator[str]:
        """Every agent id, in id order (= creation order: ids are time-ordered),
        after ``after``. Agents are the ``ag_…`` objects without a sub-object
        suffix (``ag_….threads``)."""
        start = after.encode() + b"\x00" if after else b"ag_"
        with self.txn.cursor(db=self.dbs["objects"]) as cur:
            if not cur.set_range(start):
                return
            for key in cur.iternext(values=False):
                if not key.startswith(b"ag_"):
                    return
                if b"." not in key:
                    yield key.decode()
