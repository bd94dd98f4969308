"""The LMDB backend (:class:`Store`, an :class:`~kungfud.store.interface.Backend`)
and the consistent read view every backend shares (:class:`View`).

One :class:`View` is one snapshot (:class:`~kungfud.store.kv.Snapshot`): a
permission check and the content it guards come from the same state (R9-5,
R12-10). Writes go only through :class:`~kungfud.store.writer.Writer`.
"""

from __future__ import annotations

import errno
import fcntl
import heapq
import os
from contextlib import contextmanager
from itertools import islice
from typing import Any, Iterator

import lmdb
import msgspec

from ..core.kinds import state_type
from ..core.obligations import Obligation
from . import hooks
from .events import OPEN, Offer, OutcomeRow
from .indexes import members_listed, query_rows
from .integrity import NOT_NEW_TRACES, StoreDamaged, check_env, check_file
from .interface import SnapshotTail
from .kv import Snapshot, prefix_stop
from .layout import ADDED_EMPTY, DBS, FORMAT, PUBLIC, Receipt, decode_fact, decode_object, from_u64, u32, u64
from .lmdb_kv import LmdbSnapshot, LmdbWriteTxn, SparseSnapshot, release_mapped

__all__ = ["Store", "StoreDamaged", "StoreLocked", "View"]

_receipt_dec = msgspec.msgpack.Decoder(Receipt)
_offer_dec = msgspec.msgpack.Decoder(Offer)
_ob_dec = msgspec.msgpack.Decoder(Obligation)
_outcome_dec = msgspec.msgpack.Decoder(OutcomeRow)


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

class StoreLocked(RuntimeError):
    """Another process holds the data directory."""


class Store(SnapshotTail):
    """The LMDB backend: owns the data directory, an exclusive lock file and the
    LMDB environment (one database per table of ``layout.DBS``)."""

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
            # An older storage format is migrated once, right after opening (D92).
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
            if self.migrate_from is not None and not readonly:
                from .check import migrate  # check builds on this module

                migrate(self, self.migrate_from)
                self.migrate_from = None
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
    def read(self) -> Iterator["View"]:
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


class View:
    """Reads over one :class:`~kungfud.store.kv.Snapshot` (a read transaction
    of any backend), through ``get``/``scan``/``count`` only.

    Everything outside ``store/`` reads through the named queries below: they
    take and return plain Python values (ids, numbers, decoded states, and
    opaque ``bytes`` page positions), never a transaction, a cursor or a key, so
    another backend can answer the same questions (docs/storage.md "Reads").
    A page position is whatever the store needs to resume strictly after (or,
    newest first, before) a row; callers only pass back what a query returned.
    """

    __slots__ = ("kv", "recorder")

    def __init__(self, kv: Snapshot, recorder: Any = None):
        self.kv = kv  # for the store's own modules (check, integrity); never outside store/
        self.recorder = recorder  # the store it reads (search's derived index is beside it)

    def last_seq(self) -> int:
        """The seq of the last committed fact."""
        raw = self.kv.get("meta", b"seq")
        return from_u64(raw) if raw else 0

    def last_event_seq(self) -> int:
        """The seq of the last event (WIRE.md 1.2: one daemon-wide sequence)."""
        raw = self.kv.get("meta", b"events")
        return from_u64(raw) if raw else 0

    def version(self, obj: str) -> int:
        raw = self.kv.get("objects", obj.encode())
        return 0 if raw is None else decode_object(raw, state_type(obj))[0]

    def obj(self, obj: str) -> tuple[int, Any]:
        """(version, state); (0, None) for an object that does not exist."""
        raw = self.kv.get("objects", obj.encode())
        if raw is None:
            return 0, None
        return decode_object(raw, state_type(obj))

    def state(self, obj: str) -> Any:
        return self.obj(obj)[1]

    def exists(self, obj: str) -> bool:
        """Whether an object of this id was ever created (objects are never deleted)."""
        key = obj.encode()
        return len(key) <= 511 and self.kv.get("objects", key) is not None

    def receipt(self, scope: bytes) -> Receipt | None:
        raw = self.kv.get("receipts", scope)
        return None if raw is None else _receipt_dec.decode(raw)

    def agent_for_key_hash(self, key_hash: bytes) -> str | None:
        raw = self.kv.get("agent_keys", key_hash)
        return None if raw is None else raw.split(b"\x00", 1)[0].decode()

    def key_holder(self, key_hash: bytes) -> tuple[str, str | None, int | None, str | None] | None:
        """(agent, scope, expires_at ms, key_id) of a key's hash (a main key: None for the rest), or None."""
        raw = self.kv.get("agent_keys", key_hash)
        if raw is None:
            return None
        agent, sep, rest = raw.partition(b"\x00")
        if not sep:
            return (agent.decode(), None, None, None)
        scope, expires_at, key_id = msgspec.msgpack.decode(rest)
        return (agent.decode(), scope, expires_at, key_id)

    def thread_for_token(self, token_hash: bytes) -> str | None:
        raw = self.kv.get("tokens", token_hash)
        return None if raw is None else raw.decode()

    def events_for(self, agent: str, after: int) -> Iterator[tuple[int, bytes]]:
        """(event seq, event JSON) of ``agent``'s feed with seq > ``after``, in order."""
        prefix = agent.encode() + b"\x00"
        n = len(prefix)
        for key, value in self.kv.scan("events", prefix + u64(after + 1), prefix_stop(prefix)):
            yield from_u64(key[n:]), bytes(value)

    def offers_for(self, agent: str, after: int) -> Iterator[tuple[int, bytes]]:
        """(event seq, event JSON) of the open-Task stream with seq > ``after``
        that are offered to ``agent`` (:meth:`~kungfud.store.events.Offer.offered_to`), in order."""
        return ((seq, e) for seq, e in self.offer_rows(agent, after) if e is not None)  # type: ignore[misc]

    def offer_rows(self, agent: str, after: int) -> Iterator[tuple[int, bytes | None]]:
        """As :meth:`offers_for`, with (event seq, None) for each row not offered
        to ``agent``: read and passed over, which a bounded read counts (D331)."""
        prefix = OPEN.encode() + b"\x00"
        n = len(prefix)
        for key, value in self.kv.scan("events", prefix + u64(after + 1), prefix_stop(prefix)):
            offer = _offer_dec.decode(value)
            yield from_u64(key[n:]), (offer.event if offer.offered_to(agent) else None)

    def feed(
        self, agent: str, after: int, open_tasks: bool = False, *, passed: bool = False
    ) -> Iterator[tuple[int, bytes | None]]:
        """(event seq, event JSON) of what ``agent`` hears after ``after``, in
        seq order: its own events, and with ``open_tasks`` the open-Task
        stream's offers to it merged in (WIRE.md 1.2; ``passed``: with the rows
        passed over, :meth:`offer_rows`). Close it before the view ends (its cursors)."""
        own = self.events_for(agent, after)
        if not open_tasks:
            yield from own
            return
        offers = self.offer_rows(agent, after) if passed else self.offers_for(agent, after)
        try:
            yield from heapq.merge(own, offers, key=lambda e: e[0])
        finally:
            own.close()
            offers.close()

    def fact(self, seq: int) -> Any:
        raw = self.kv.get("log", u64(seq))
        return None if raw is None else decode_fact(raw)

    def fact_at_or_before(self, seq: int) -> Any:
        """The last fact with a seq at most ``seq`` (an event's seq is at least
        its fact's, D200: this is that fact or a later one); None if none."""
        for _, raw in self.kv.scan("log", b"", u64(seq + 1), reverse=True):
            return decode_fact(raw)
        return None

    def memory_content(self, memory: str, version: int) -> bytes | None:
        raw = self.kv.get("versions", memory.encode() + b"\x00" + u32(version))
        if raw is None:
            return None
        return self.fact(from_u64(raw)).content

    # --- scans: one owner's rows of an index, in key order --------------------------

    def _after(self, db: str, prefix: bytes, after: bytes | None, values: bool = True) -> Iterator[tuple[bytes, bytes]]:
        """(key suffix, value) of the rows under ``prefix``, strictly after the
        suffix ``after`` (from the first with None), in key order."""
        start = prefix if after is None else prefix + after + b"\x00"  # the first key after the position's
        n = len(prefix)
        for key, value in self.kv.scan(db, start, prefix_stop(prefix), values=values):
            yield key[n:], value

    def _before(self, db: str, prefix: bytes, before: bytes | None) -> Iterator[tuple[bytes, bytes]]:
        """(key suffix, value) of the rows under ``prefix``, newest (last key)
        first, strictly before the suffix ``before`` (from the last with None)."""
        # Without a position: the first key past the range.
        upper = prefix + before if before is not None else prefix_stop(prefix)
        n = len(prefix)
        for key, value in self.kv.scan(db, prefix, upper, reverse=True):
            yield key[n:], value

    def memories_of(self, author: str, after: str | None, *, public: bool = False) -> Iterator[str]:
        """Memory ids of ``author`` still listed (``public``: only its public
        ones, D233), in creation order, after ``after``."""
        prefix = author.encode() + (PUBLIC if public else b"\x00")
        for suffix, _ in self._after("memories", prefix, after.encode() if after else None, False):
            yield suffix.decode()

    def agents(self, after: str | None) -> Iterator[str]:
        """Every agent id, in id order (= creation order: ids are time-ordered),
        after ``after``. Agents are the ``ag_…`` objects without a sub-object
        suffix (``ag_….threads``)."""
        start = after.encode() + b"\x00" if after else b"ag_"
        for key, _ in self.kv.scan("objects", start, prefix_stop(b"ag_"), values=False):
            if b"." not in key:
                yield key.decode()

    def memberships(self, agent: str, after: str | None) -> Iterator[tuple[str, str]]:
        """(thread, role) of ``agent``'s current memberships, in Thread id order,
        after the Thread ``after``."""
        for suffix, role in self._after("memberships", agent.encode() + b"\x00", after.encode() if after else None):
            yield suffix.decode(), role.decode()

    def is_member(self, agent: str, thread: str) -> bool:
        """Whether ``agent`` is a current member of ``thread`` (one index lookup)."""
        key = agent.encode() + b"\x00" + thread.encode()
        return self.kv.get("memberships", key) is not None

    def obligations_of(self, holder: str, after: bytes | None) -> Iterator[tuple[bytes, Obligation]]:
        """(position, obligation) of ``holder``'s open obligations, in the order
        they arose (R8-7), after the position ``after``."""
        for pos, value in self._after("obligations", holder.encode() + b"\x00", after):
            yield pos, _ob_dec.decode(value)

    def opportunities_of(self, agent: str, after: bytes | None) -> Iterator[tuple[bytes, str, str]]:
        """(position, assignment or Task id, its Thread or the Task) of
        ``agent``'s opportunities rows, in id order, after the position ``after``."""
        for pos, value in self._after("opportunities", agent.encode() + b"\x00", after):
            yield pos, pos.decode(), value.decode()

    def outcomes_of(self, party: str, before: bytes | None) -> Iterator[tuple[bytes, str | None, bytes]]:
        """(position, Thread gating it or None, outcome item JSON) of ``party``'s
        ended work, newest first, before the position ``before``."""
        for pos, value in self._before("outcomes", party.encode() + b"\x00", before):
            row = _outcome_dec.decode(value)
            yield pos, row.thread, row.item

    @staticmethod
    def outcome_position(pos: bytes) -> bool:
        """Whether ``pos`` has the shape of an ``outcomes_of`` position (a seq
        and an assignment or engagement id), so a made-up one is refused."""
        ident = pos[8:]
        return len(pos) <= 80 and ident[:3] in (b"as_", b"en_") and ident[3:].isalnum() and ident.isascii()

    def engagements_of(self, task: str, agent: str | None = None, *, newest: bool = False, limit: int) -> list[str]:
        """Engagement ids of ``task`` (only ``agent``'s, when given), in the
        order they were taken: the oldest ``limit``, or with ``newest`` the newest."""
        prefix = (agent.encode() + b"\x00" if agent is not None else b"") + task.encode() + b"\x00"
        rows = self._before("engagements", prefix, None) if newest else self._after("engagements", prefix, None, False)
        out = [suffix.decode() for suffix, _ in islice(rows, limit)]
        return out[::-1] if newest else out

    def adopted(self, task: str, after: str | None) -> Iterator[str]:
        """Adopted engagement ids of ``task``, in id order, after ``after``."""
        for suffix, _ in self._after("adopted", task.encode() + b"\x00", after.encode() if after else None, False):
            yield suffix.decode()

    def push_tasks(self) -> Iterator[tuple[str, str]]:
        """(author, task) of every A2A Task with a push config (WIRE.md 1.3)."""
        for key, _ in self.kv.scan("a2a_push", values=False):
            author, _, task = bytes(key).decode().partition("\x00")
            yield author, task

    def tasks_authored(self, agent: str, before: str | None) -> Iterator[str]:
        """Task ids ``agent`` authored, newest first, strictly before ``before``."""
        for suffix, kind in self._before("tasks", agent.encode() + b"\x00", before.encode() if before else None):
            if kind == b"author":
                yield suffix.decode()

    def tasks_for(self, agent: str, mine: bool, after: str | None) -> Iterator[str]:
        """Task ids in id order after ``after``: with ``mine``, those ``agent``
        authored; else those it may be offered, open ones and restricted ones
        naming it."""
        start = after.encode() if after else None

        def under(prefix: bytes, kind: bytes) -> Iterator[str]:
            return (s.decode() for s, k in self._after("tasks", prefix, start) if k == kind)

        if mine:
            yield from under(agent.encode() + b"\x00", b"author")
            return
        last = None
        for tk in heapq.merge(under(b"*\x00", b"open"), under(agent.encode() + b"\x00", b"named")):
            if tk != last:
                yield tk
            last = tk

    def deadlines(self) -> Iterator[tuple[int, str, str]]:
        """(due ms, object id, owner actor key) of every running deadline, the
        earliest first."""
        for key, value in self.kv.scan("deadlines"):
            yield from_u64(key[:8]), key[8:].decode(), value.decode()

    def query(
        self, name: str, key: str, limit: int | None = None, party: str | None = None, skip: Any = ()
    ) -> list[tuple[Any, str]]:
        """A named collection query of the core (core/queries.py: a Thread's
        governors, speakers, pending responses, live assignments and running
        deadlines; an agent's memberships), answered from the index rows:
        ``(answer, id of the object whose state gave it)`` in the query's order.
        Rows of objects in ``skip`` are left out (the caller answers for them)."""
        return query_rows(self.kv, name, key, limit, party, skip)

    def members_listed(self, thread: str, limit: int) -> list[str]:
        """The first ``limit`` current members of ``thread`` in the order they
        joined (ties: by agent id; D90)."""
        return members_listed(self.kv, thread, limit)

    def hook_cursor(self, agent: str) -> Any:
        """The webhook runner's :class:`~kungfud.store.hooks.Cursor` of ``agent`` (None: none yet)."""
        return hooks.cursor_of(self.kv, agent)

    def hooked_agents(self) -> Iterator[str]:
        """Every agent with a webhook endpoint, in id order."""
        return hooks.hooked_agents(self.kv)

    def count(self, index: str) -> int:
        """Rows in one index (``obligations``: open obligations; ``deadlines``:
        running deadlines; docs/storage.md)."""
        return self.kv.count(index)
