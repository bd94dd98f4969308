"""The LMDB backend (:class:`LmdbBackend`, an :class:`~kungfud.store.interface.Backend`):
the data directory, its lock file and the LMDB environment, one database per
table of :data:`~kungfud.store.layout.DBS`. Reads are a
:class:`~kungfud.store.view.View` over an LMDB read transaction; an older
storage format is migrated by whoever opens it (:mod:`~kungfud.store.open`).
"""

from __future__ import annotations

import errno
import fcntl
import os
from contextlib import contextmanager
from typing import Any, Iterator

import lmdb

from .integrity import NOT_NEW_TRACES, StoreDamaged, StoreLocked, check_env, check_file
from .interface import SnapshotTail
from .layout import ADDED_EMPTY, DBS, FORMAT
from .lmdb_kv import LmdbSnapshot, LmdbWriteTxn, SparseSnapshot, release_mapped
from .view import View

__all__ = ["LmdbBackend"]


def _format_behind(fmt: bytes | None, data_dir: str) -> bytes | None:
    """The stored format if it is older than :data:`FORMAT` (to migrate), None
    if it is this one; a newer or unknown one is refused (D92)."""
    if fmt is None or fmt == FORMAT:
        return None
    if fmt.isdigit() and int(fmt) < int(FORMAT):
        return fmt
    raise StoreDamaged(
        f"data directory {data_dir} has storage format {fmt.decode(errors='replace')}, newer than format "
        f"{FORMAT.decode()} that this kungfud reads: run the kungfud that wrote it (or a newer one)"
    )


def _owner_only(path: str) -> None:
    """LMDB's files under ``path`` made 0600: ``mode`` applies to new files
    only, and stores made before it were 0644 (inside a 0700 directory)."""
    for name in ("data.mdb", "lock.mdb"):
        try:
            os.chmod(os.path.join(path, name), 0o600)
        except OSError:
            pass  # a file this user does not own: LMDB reports anything that matters


class LmdbBackend(SnapshotTail):
    """The LMDB backend: owns the data directory, an exclusive lock file and the
    LMDB environment (one database per table of ``layout.DBS``). Opened as it
    is: :class:`~kungfud.store.open.Store` (``open_store``) migrates an older
    format once, right after opening (D92); ``migrate_from`` says which."""

    def __init__(self, data_dir: str, *, map_size_mb: int = 10240, readonly: bool = False, lock: bool = True):
        self.data_dir = data_dir
        if os.path.lexists(data_dir) and not os.path.isdir(data_dir):
            raise StoreDamaged(f"data directory {data_dir} exists and is not a directory")
        # What the directory held before this process touched it: with any of
        # these but no store, it is not new (integrity.check_file).
        traces = [t for t in NOT_NEW_TRACES if os.path.lexists(os.path.join(data_dir, t))]
        path = os.path.join(data_dir, "lmdb")
        if readonly:
            if not os.path.isfile(os.path.join(path, "data.mdb")):
                raise StoreDamaged(f"no kungfud store in {data_dir} ({os.path.join(path, 'data.mdb')} is missing)")
        else:
            try:
                os.makedirs(data_dir, mode=0o700, exist_ok=True)
            except OSError as e:
                raise StoreDamaged(f"cannot create data directory {data_dir}: {e.strerror or e}") from None
        self._lock_fd: int | None = None
        if traces and not os.path.lexists(os.path.join(path, "data.mdb")):
            # Not new, and no store: refused before anything is created (but a
            # directory another daemon is creating right now is "in use").
            if lock and "kungfud.lock" in traces:
                self._lock(data_dir)
                self._unlock()
            check_file(data_dir, traces=traces)
        if lock:
            self._lock(data_dir)
        try:
            self._open(data_dir, path, traces, map_size_mb=map_size_mb, readonly=readonly)
        except BaseException:
            self._unlock()
            raise

    def _lock(self, data_dir: str) -> None:
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

    def _open(self, data_dir: str, path: str, traces: list[str], *, map_size_mb: int, readonly: bool) -> None:
        # The store must be whole before LMDB sees it: a zero-length file would be
        # taken for a new store, a short one read past its end (integrity.py).
        check_file(data_dir, traces=traces)
        try:
            os.makedirs(path, mode=0o700, exist_ok=True)
        except OSError as e:
            raise StoreDamaged(f"cannot create {path}: {e.strerror or e}") from None
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
            mode=0o600,  # data.mdb and lock.mdb readable by the daemon's user only
        )
        if not readonly:
            _owner_only(path)
        try:
            check_env(self.env, data_dir)  # before any transaction reads a page
            if not readonly:
                # Free the reader slots of processes that died holding one (a
                # killed worker of --workers N): they would pin old pages.
                self.env.reader_check()
            self.dbs: dict[str, Any] = {}
            self._snapshot: type[LmdbSnapshot] = LmdbSnapshot
            # An older storage format: migrated once, right after opening, by open.py (D92).
            self.migrate_from: bytes | None = None
            if readonly:
                self.dbs["meta"] = self.env.open_db(b"meta", create=False)
                with self.env.begin() as txn:
                    self.migrate_from = _format_behind(txn.get(b"format", db=self.dbs["meta"]), data_dir)
                for name in DBS:
                    try:
                        self.dbs[name] = self.env.open_db(name.encode(), create=False)
                    except lmdb.NotFoundError:
                        # Written by an older kungfud: a table added without a format step
                        # (D212), or by a later format (read-only, not migrated), reads as empty.
                        if name not in ADDED_EMPTY and self.migrate_from is None:
                            raise
                        self._snapshot = SparseSnapshot
            else:
                with self.env.begin(write=True) as txn:
                    for name in DBS:
                        self.dbs[name] = self.env.open_db(name.encode(), txn=txn)
                    meta = self.dbs["meta"]
                    fmt = txn.get(b"format", db=meta)
                    if fmt is None:
                        txn.put(b"format", FORMAT, db=meta)
                    else:
                        self.migrate_from = _format_behind(fmt, data_dir)
        except BaseException:
            self.env.close()
            raise

    def close(self) -> None:
        self.env.close()
        self._unlock()

    def hold_lock(self) -> int:
        """A second descriptor of the data-dir lock, for the caller to keep: the
        directory stays locked, after close() too, while it is open in any
        process (a flock belongs to the open file; kungfud.supervisor)."""
        assert self._lock_fd is not None, "opened without the lock"
        return os.dup(self._lock_fd)

    def _unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def damage_place(self) -> tuple[str, str]:
        return os.path.join(self.data_dir, "lmdb", "data.mdb"), f"kungfud check --data-dir {self.data_dir}"

    def release_pages(self) -> None:
        """Let go of the mapped pages read so far (``kungfud check``'s long
        scans; lmdb_kv.release_mapped)."""
        release_mapped(os.path.join(self.data_dir, "lmdb", "data.mdb"))

    @contextmanager
    def read(self) -> Iterator[View]:
        with self.env.begin(buffers=False) as txn:
            yield View(self._snapshot(txn, self.dbs), self)

    def begin_write(self) -> LmdbWriteTxn:
        return LmdbWriteTxn(self.env, self.dbs)

    @staticmethod
    def storage_error(e: BaseException) -> bool:
        return isinstance(e, lmdb.Error) or getattr(e, "injected", False)

    def usage(self) -> tuple[int, int]:
        """(bytes of the map in use, the map size)."""
        info = self.env.info()
        stat = self.env.stat()
        return (info["last_pgno"] + 1) * stat["psize"], info["map_size"]

    def fill(self) -> tuple[int, int]:
        """(bytes used, the size) for the capacity limits: the map's (D241)."""
        return self.usage()
