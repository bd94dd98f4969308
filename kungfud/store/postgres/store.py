"""The PostgreSQL backend: :class:`PgBackend` (docs/storage.md "PostgreSQL"),
opened as :class:`~kungfud.store.postgres.PgStore` (open.py migrates it).

A :class:`~kungfud.store.interface.Backend` over psycopg 3 (sync). Reads take a
connection from a small pool of its own and read inside one REPEATABLE READ,
READ ONLY transaction (one ``View``); the writer has its own connection, each
write transaction a READ COMMITTED one whose first statement takes the store's
writer lock (``pg_advisory_xact_lock``), so one writer at a time runs on the
store across every node and its planner sees every earlier commit. Every
connection runs with ``synchronous_commit = on``: a commit has reached the WAL
on disk when it returns (acknowledged = durable).

A lost server is no crash: a read raises
:class:`~kungfud.errors.StoreUnavailable` (answered ``unavailable``), a write
fails with a storage error (``Backend.storage_error``: answered
``unavailable``), the broken connection is dropped, and the next read or batch
connects again — the daemon recovers by itself once the server is back.
"""

from __future__ import annotations

import fcntl
import logging
import os
import select
import threading
import time
from contextlib import contextmanager
from typing import Iterator
from urllib.parse import unquote_plus, urlsplit, urlunsplit

import psycopg

from ...errors import StoreUnavailable
from ..integrity import StoreDamaged, StoreLocked
from ..interface import SnapshotTail, is_pg_url
from ..view import View
from .kv import PgSnapshot, PgWriteTxn
from .schema import LOCK_BOOTSTRAP, ensure_schema

__all__ = ["PgBackend", "redact_url", "is_pg_url"]

log = logging.getLogger("kungfud.store")

_POOL_MAX = 32  # connections reading at once; more readers wait for one
_IDLE_MAX = 8  # idle read connections kept
_CONNECT_TIMEOUT_S = 5


def _secret_param(name: str) -> bool:
    """A query parameter libpq reads a secret from (``password``,
    ``sslpassword``; any spelling that decodes to a name holding "password")."""
    return "password" in unquote_plus(name).lower()


def redact_url(url: str) -> str:
    """The URL without its secrets, for messages and logs: the password of
    ``user:password@`` and the value of every ``password``/``sslpassword``
    query parameter (libpq accepts both in a URI) become ``***``."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return "the configured PostgreSQL URL"
    if password is not None:
        netloc = parts.netloc.rsplit("@", 1)
        user = (parts.username or "") + ":***"
        parts = parts._replace(netloc=f"{user}@{netloc[-1]}")
    if parts.query:
        params = []
        for param in parts.query.split("&"):
            name, eq, _ = param.partition("=")
            params.append(f"{name}=***" if _secret_param(name) else param)
        parts = parts._replace(query="&".join(params))
    if parts.fragment:
        parts = parts._replace(fragment="***")  # libpq ignores it; never echo what it might hold
    return urlunsplit(parts)


def _idle_ok(conn: psycopg.Connection) -> bool:
    """Whether an idle connection still looks usable: nothing to read on its
    socket (a server that shut down or restarted left an error or end of file
    there). One poll, no round trip."""
    if conn.closed or conn.broken:
        return False
    try:
        readable, _, _ = select.select([conn.pgconn.socket], [], [], 0)
    except (OSError, ValueError, psycopg.Error):
        return False
    return not readable


def _lost(e: BaseException) -> bool:
    """A failure of the server or the connection, not of a statement."""
    return isinstance(e, (psycopg.OperationalError, psycopg.InterfaceError))


class PgBackend(SnapshotTail):
    """The store in a PostgreSQL database; ``data_dir`` holds only node-local
    files (the admin key of the node that bootstrapped, the node's lock).
    Opened as it is: ``migrate_from`` says whether its format is older
    (:func:`~kungfud.store.open.opened` migrates it)."""

    # A read holds one of _POOL_MAX connections: an actor must never wait for a
    # second while it holds one (with enough carriers, all would wait), so its
    # jobs told together do not share a view here (D281).
    pooled_reads = True

    def __init__(self, url: str, data_dir: str, *, readonly: bool = False, lock: bool = True, capacity_mb: int = 0):
        self.url = url
        # [storage] capacity_mb: the size the capacity limits take shares of (D241).
        self.capacity = capacity_mb * 1024 * 1024
        self._size: tuple[float, int] | None = None  # (monotonic time read, pg_database_size)
        self.where = redact_url(url)
        self.data_dir = data_dir
        self.readonly = readonly
        self._lock_fd: int | None = None
        self._pool: list[psycopg.Connection] = []
        self._pool_lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(_POOL_MAX)
        self._wconn: psycopg.Connection | None = None
        self._wlock = threading.Lock()  # one write transaction of this process at a time
        self._closed = False
        if not readonly:
            try:
                os.makedirs(data_dir, mode=0o700, exist_ok=True)
            except OSError as e:
                raise StoreDamaged(f"cannot create data directory {data_dir}: {e.strerror or e}") from None
            if lock:
                self._lock(data_dir)
        try:
            conn = self._connect(write=True)
        except StoreUnavailable as e:
            self._unlock()
            raise StoreDamaged(f"cannot connect to PostgreSQL at {self.where}: {e.__cause__ or e}") from None
        try:
            self.migrate_from = ensure_schema(conn, self.where, create=not readonly)
        except psycopg.Error as e:
            conn.close()
            self._unlock()
            raise StoreDamaged(f"cannot set up the store at {self.where}: {e}") from None
        except BaseException:
            conn.close()
            self._unlock()
            raise
        self._wconn = conn

    # --- node-local lock ------------------------------------------------------------

    def _lock(self, data_dir: str) -> None:
        fd = os.open(os.path.join(data_dir, "kungfud.lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise StoreLocked(f"data directory {data_dir} is in use by another kungfud process") from None
        self._lock_fd = fd

    def _unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    # --- connections ------------------------------------------------------------------

    def _connect(self, *, write: bool) -> psycopg.Connection:
        try:
            conn = psycopg.connect(
                self.url,
                autocommit=False,
                connect_timeout=_CONNECT_TIMEOUT_S,
                application_name="kungfud",
                options="-c synchronous_commit=on",
            )
        except psycopg.Error as e:
            raise StoreUnavailable(f"cannot connect to PostgreSQL at {self.where}") from e
        conn.isolation_level = psycopg.IsolationLevel.READ_COMMITTED if write else psycopg.IsolationLevel.REPEATABLE_READ
        conn.read_only = not write
        return conn

    def _take(self) -> psycopg.Connection:
        while True:
            with self._pool_lock:
                if not self._pool:
                    break
                conn = self._pool.pop()
            if _idle_ok(conn):
                return conn
            conn.close()  # the server closed it (a restart): connect anew
        return self._connect(write=False)

    def _give(self, conn: psycopg.Connection) -> None:
        with self._pool_lock:
            if not self._closed and len(self._pool) < _IDLE_MAX:
                self._pool.append(conn)
                return
        conn.close()

    def _drop_idle(self) -> None:
        with self._pool_lock:
            idle, self._pool = self._pool, []
        for conn in idle:
            conn.close()

    @contextmanager
    def read(self) -> Iterator[View]:
        """One consistent snapshot (a REPEATABLE READ, READ ONLY transaction)
        as a ``View``; StoreUnavailable when the server cannot be reached."""
        self._slots.acquire()
        try:
            conn = self._take()
            try:
                yield View(PgSnapshot(conn.cursor(binary=True)), self)
            except BaseException as e:
                if _lost(e) or conn.broken:
                    conn.close()
                    self._drop_idle()  # a server that went away took them all
                    if _lost(e):
                        raise StoreUnavailable(f"lost the connection to PostgreSQL at {self.where}") from e
                    raise
                try:
                    conn.rollback()
                except psycopg.Error:
                    conn.close()
                    raise
                self._give(conn)
                raise
            try:
                conn.rollback()  # a read-only transaction: nothing to keep
            except psycopg.Error:
                conn.close()  # the answer was read whole; the next read reconnects
            else:
                self._give(conn)
        finally:
            self._slots.release()

    # --- writing --------------------------------------------------------------------------

    def begin_write(self) -> PgWriteTxn:
        """Open a write transaction: the store's writer lock is held (every node)
        until commit or abort. Connects again after a lost connection."""
        if self.readonly:
            raise StoreDamaged("the store was opened read-only")
        self._wlock.acquire()
        try:
            conn = self._wconn
            if conn is None or conn.closed or conn.broken:
                if conn is not None:
                    conn.close()
                self._wconn = None
                conn = self._wconn = self._connect(write=True)
            try:
                return PgWriteTxn.begin(conn, self._end_write)
            except psycopg.Error as e:
                if not _lost(e):
                    raise
                # A connection the server dropped while idle (a restart): nothing
                # was written yet, so connect again once and begin there.
                conn.close()
                self._wconn = None
                conn = self._wconn = self._connect(write=True)
                return PgWriteTxn.begin(conn, self._end_write)
        except BaseException as e:
            conn = self._wconn
            if conn is not None:
                try:
                    if conn.broken or _lost(e):
                        raise e
                    conn.rollback()  # whatever failed, leave no transaction open
                except BaseException:
                    conn.close()
                    self._wconn = None
            self._wlock.release()
            raise

    def _end_write(self, conn: psycopg.Connection, ok: bool) -> None:
        if not ok and (conn.broken or conn.closed):
            conn.close()
            self._wconn = None
        elif not ok:
            try:
                conn.rollback()
            except psycopg.Error:
                conn.close()
                self._wconn = None
        self._wlock.release()

    @staticmethod
    def storage_error(e: BaseException) -> bool:
        """An expected storage failure: the server or connection failed, the
        disk is full, the server refused connections (answered ``unavailable``)."""
        return (
            _lost(e)
            or isinstance(e, (StoreUnavailable, psycopg.errors.InsufficientResources))
            or getattr(e, "injected", False)  # a test's injected fault (testing/faults.py)
        )

    def usage(self) -> tuple[int, int] | None:
        """None: the database has no map of ours to report against."""
        return None

    def fill(self) -> tuple[int, int] | None:
        """(the database's size, ``[storage] capacity_mb``) for the capacity
        limits, the size read at most once a second; None without a capacity."""
        if not self.capacity:
            return None
        now = time.monotonic()
        if self._size is None or now - self._size[0] >= 1.0:
            self._slots.acquire()
            try:
                conn = self._take()
                try:
                    size = conn.execute("SELECT pg_database_size(current_database())").fetchone()[0]
                    conn.rollback()
                except BaseException:
                    conn.close()
                    raise
                self._give(conn)
            finally:
                self._slots.release()
            self._size = (now, int(size))
        return self._size[1], self.capacity

    @contextmanager
    def bootstrap_lock(self) -> Iterator[None]:
        """Held across the admin bootstrap's "no facts yet → create the admin"
        check and write, so nodes starting together create one admin (D112):
        a session advisory lock on a connection of its own."""
        conn = self._connect(write=True)
        try:
            conn.autocommit = True
            conn.execute("SELECT pg_advisory_lock(%s)", (LOCK_BOOTSTRAP,))
            yield
        finally:
            conn.close()  # ends the session: the lock goes with it

    # --- checks ---------------------------------------------------------------------

    def damage_place(self) -> tuple[str, str]:
        return f"the store at {self.where}", "kungfud check --store URL"

    def close(self) -> None:
        with self._pool_lock:
            self._closed = True
            pool, self._pool = self._pool, []
        for conn in pool:
            conn.close()
        if self._wconn is not None:
            self._wconn.close()
            self._wconn = None
        self._unlock()
