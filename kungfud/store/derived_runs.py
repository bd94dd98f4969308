"""``kungfud check`` in bounded memory: the derived rows it rebuilds, held as
sorted runs, and walked against the stored tables in key order (D365).

:class:`Runs` takes the rebuilt rows of every derived table as the fold of the
log makes them (a later row of one key replaces the earlier, as a dict would).
It keeps a bounded group of them in memory; a full group is sorted and spilled
to a temporary file per table (a run). :meth:`Runs.rows` merges a table's runs
and the rows still in memory into one ascending stream, the last row of a key
winning. :func:`differences` walks that stream beside the stored table's
ascending scan, one row of each at a time, so neither side is ever held whole:
what the check reports and what ``--rebuild`` writes (range by range,
:func:`repair_ranges`) come from the same walk.
"""

from __future__ import annotations

import heapq
import os
import shutil
import struct
import sys
import tempfile
import time
from itertools import islice
from typing import Any, Callable, Iterator

from ..core.kinds import state_type
from .codec import decode_object, encode_object

__all__ = ["Runs", "States", "differences", "Releasing", "repair_ranges", "Progress", "GROUP_BYTES"]

# The rows a check keeps in memory before it spills a sorted run: their bytes
# plus a per-row allowance for the Python objects that hold them.
GROUP_BYTES = 48 << 20
_ROW_OVERHEAD = 160
# The objects' states the fold keeps decoded in memory before it spills the
# older half (:class:`States`).
STATES_CAP = 100_000
# The stored rows ``--rebuild`` reads at a time before it writes their range.
RANGE = 4096
_LEN = struct.Struct(">II")
_READ = 1 << 20


class Runs:
    """The rebuilt rows of many tables, in bounded memory (``limit``: bytes of
    rows kept before a spill). Use as a context manager: the runs' directory
    is removed at the end."""

    def __init__(self, limit: int = GROUP_BYTES, where: str | None = None):
        self.limit = limit
        self._where = where
        self._dir: str | None = None
        self._group: dict[str, dict[bytes, bytes]] = {}
        self._size = 0
        self._runs: dict[str, list[str]] = {}
        self.spilled = 0

    def __enter__(self) -> "Runs":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._group.clear()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def put(self, table: str, key: bytes, value: bytes) -> None:
        rows = self._group.get(table)
        if rows is None:
            rows = self._group[table] = {}
        rows[key] = value
        self._size += len(key) + len(value) + _ROW_OVERHEAD
        if self._size >= self.limit:
            self._spill()

    def _spill(self) -> None:
        if self._dir is None:
            self._dir = tempfile.mkdtemp(prefix="kungfud-check-", dir=self._where)
        for table, rows in self._group.items():
            if not rows:
                continue
            runs = self._runs.setdefault(table, [])
            path = os.path.join(self._dir, f"{table}.{len(runs)}")
            with open(path, "wb", buffering=_READ) as f:
                pack, write = _LEN.pack, f.write
                for key in sorted(rows):
                    value = rows[key]
                    write(pack(len(key), len(value)))
                    write(key)
                    write(value)
            runs.append(path)
        self._group = {}
        self._size = 0
        self.spilled += 1

    def rows(self, table: str) -> Iterator[tuple[bytes, bytes]]:
        """The table's rows, ascending by key, each key once (its last row)."""
        group = self._group.get(table, {})
        paths = self._runs.get(table, [])
        if not paths:
            return ((key, group[key]) for key in sorted(group))
        return _merged([_read_run(p, i) for i, p in enumerate(paths)]
                       + [((key, len(paths), group[key]) for key in sorted(group))])


def _read_run(path: str, rank: int) -> Iterator[tuple[bytes, int, bytes]]:
    size, unpack = _LEN.size, _LEN.unpack
    with open(path, "rb", buffering=_READ) as f:
        read = f.read
        while head := read(size):
            klen, vlen = unpack(head)
            yield read(klen), rank, read(vlen)


def _merged(streams: list) -> Iterator[tuple[bytes, bytes]]:
    # (key, rank) orders a key's rows oldest run first: the last one wins.
    last_key: bytes | None = None
    last_value = b""
    for key, _, value in heapq.merge(*streams):
        if key != last_key and last_key is not None:
            yield last_key, last_value
        last_key, last_value = key, value
    if last_key is not None:
        yield last_key, last_value


def differences(
    expected: Iterator[tuple[bytes, bytes]], stored: Iterator[tuple[bytes, bytes]]
) -> Iterator[tuple[str, bytes, bytes | None]]:
    """("missing" | "unexpected" | "differs", key, the rebuilt value or None)
    for each key where two ascending streams disagree, in key order."""
    end = object()
    e = next(expected, end)
    s = next(stored, end)
    while e is not end or s is not end:
        if s is end or (e is not end and e[0] < s[0]):  # type: ignore[index]
            yield "missing", e[0], e[1]  # type: ignore[index]
            e = next(expected, end)
        elif e is end or s[0] < e[0]:  # type: ignore[index]
            yield "unexpected", bytes(s[0]), None  # type: ignore[index]
            s = next(stored, end)
        else:
            if e[1] != s[1]:  # type: ignore[index]
                yield "differs", e[0], e[1]  # type: ignore[index]
            e = next(expected, end)
            s = next(stored, end)


class Releasing:
    """A snapshot whose reads call ``release()`` after each ``every`` rows
    read (a ``get`` or a scanned row): the check's reads of an LMDB store,
    letting go of the mapped pages read so far (D367)."""

    def __init__(self, kv: Any, release: Callable[[], None], every: int = 1 << 11):
        self._kv = kv
        self._release = release
        self._every = every
        self._n = 0

    def _tick(self) -> None:
        self._n += 1
        if self._n >= self._every:
            self._n = 0
            self._release()

    def get(self, table: str, key: bytes) -> bytes | None:
        self._tick()
        return self._kv.get(table, key)

    def scan(self, *args: Any, **kwargs: Any) -> Iterator[tuple[bytes, bytes]]:
        for row in self._kv.scan(*args, **kwargs):
            yield row
            self._tick()

    def count(self, table: str) -> int:
        return self._kv.count(table)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._kv, name)


def repair_ranges(
    expected: Iterator[tuple[bytes, bytes]], stored_from: Callable[[bytes], Iterator[tuple[bytes, bytes]]],
    put: Callable[[bytes, bytes], None], delete: Callable[[bytes], None], batch: int | None = None,
) -> int:
    """Make a stored table equal the ``expected`` rows, a range of ``batch``
    stored keys at a time: ``stored_from(start)`` scans the stored rows from
    ``start`` on (in the write transaction that ``put`` and ``delete`` write
    through); a range's writes are made before the next range is read. The
    number of rows written or deleted."""
    batch = batch or RANGE
    pending: tuple[bytes, bytes] | None = None
    start = b""
    changed = 0
    while True:
        scan = stored_from(start)
        try:
            stored = [(bytes(k), v) for k, v in islice(scan, batch)]
        finally:
            close = getattr(scan, "close", None)
            if close is not None:
                close()
        last = stored[-1][0] if len(stored) == batch else None

        def upto() -> Iterator[tuple[bytes, bytes]]:
            nonlocal pending
            while True:
                row = pending if pending is not None else next(expected, None)
                pending = None
                if row is None:
                    return
                if last is not None and row[0] > last:
                    pending = row
                    return
                yield row

        # The stored range is read already: writing while the walk goes on
        # changes nothing it reads (an empty table: every rebuilt row, streamed).
        for what, key, value in differences(upto(), iter(stored)):
            if value is None:
                delete(key)
            else:
                put(key, value)
            changed += 1
        if last is None:
            return changed
        start = last + b"\x00"


class Progress:
    """A line on stderr, rewritten in place, when stderr is a terminal and the
    work has run past ``after`` seconds; nothing otherwise."""

    def __init__(self, after: float = 2.0, every: float = 0.5, stream=None):
        self.stream = stream if stream is not None else sys.stderr
        self.on = bool(getattr(self.stream, "isatty", lambda: False)())
        self.t0 = time.monotonic()
        self.after = after
        self.every = every
        self._next = self.t0 + after
        self._shown = False

    def say(self, text: str, force: bool = False) -> None:
        if not self.on:
            return
        now = time.monotonic()
        if now < self._next and not (force and self._shown):
            return
        self._next = now + self.every
        self._shown = True
        self.stream.write(f"\r\x1b[Kkungfud check: {text} ({now - self.t0:.0f} s)")
        self.stream.flush()

    def done(self) -> None:
        """Clear the line (at the end, or before other output)."""
        if self.on and self._shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._shown = False


class States:
    """The objects' states as the fold of the log reaches them, with the
    number of facts that touched each, in bounded memory: the ``cap`` most
    recently written stay decoded in memory; past it, the older half is
    encoded (as the ``objects`` row it will become) into a temporary LMDB
    environment and decoded again when a later fact reads it. Use as a
    context manager: the environment is removed at the end."""

    def __init__(self, cap: int | None = None, where: str | None = None):
        self.cap = cap or STATES_CAP
        self._where = where
        self._mem: dict[str, tuple[int, Any]] = {}
        self._env: Any = None
        self._dir: str | None = None
        self._read: Any = None
        self._reads = 0
        self.spilled = 0

    def __enter__(self) -> "States":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._mem.clear()
        if self._read is not None:
            self._read.abort()
            self._read = None
        if self._env is not None:
            self._env.close()
            self._env = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def get(self, obj: str) -> tuple[int, Any]:
        """(facts that touched it, state); (0, None) for one no fact made."""
        got = self._mem.get(obj)
        if got is not None:
            return got
        if self._read is None:
            return 0, None
        raw = self._read.get(obj.encode())
        self._tick()
        return (0, None) if raw is None else decode_object(raw, state_type(obj))

    def _tick(self) -> None:
        self._reads += 1
        if self._reads >= 1 << 11:  # let go of the spill file's pages read (D367)
            self._reads = 0
            self._release()

    def _release(self) -> None:
        from .lmdb_kv import release_mapped

        release_mapped(os.path.join(self._dir, "data.mdb"))  # type: ignore[arg-type]

    def state(self, obj: str) -> Any:
        return self.get(obj)[1]

    def set(self, obj: str, version: int, state: Any) -> None:
        mem = self._mem
        mem.pop(obj, None)  # to the end: the most recently written
        mem[obj] = (version, state)
        if len(mem) > self.cap:
            self._spill(len(mem) - self.cap // 2)

    def _spill(self, n: int) -> None:
        import lmdb

        if self._env is None:
            self._dir = tempfile.mkdtemp(prefix="kungfud-check-states-", dir=self._where)
            self._env = lmdb.open(self._dir, map_size=1 << 40, sync=False, metasync=False, readahead=False, lock=False)
        if self._read is not None:
            self._read.abort()
        mem = self._mem
        with self._env.begin(write=True) as txn:
            for i, obj in enumerate(sorted(islice(mem, n)), 1):  # in key order: fewer pages touched
                version, state = mem.pop(obj)
                txn.put(obj.encode(), encode_object(version, state))
                if not i & 0x1FFF:
                    self._release()  # the pages the puts read through the map (D367)
        self._read = self._env.begin(buffers=False)
        self._release()
        self.spilled += 1

    def items(self) -> Iterator[tuple[str, int, Any]]:
        """Every object once: (id, facts that touched it, state), the spilled
        ones first."""
        mem = self._mem
        if self._read is not None:
            for key, raw in self._read.cursor():
                obj = key.decode()
                self._tick()
                if obj not in mem:
                    version, state = decode_object(raw, state_type(obj))
                    yield obj, version, state
        for obj, (version, state) in mem.items():
            yield obj, version, state
