"""Is the store whole? Checked at every start, before anything reads it.

LMDB maps ``data.mdb`` into memory and trusts it: a file shorter than its own
metadata says is served with pages missing (reads past the end of the file are
SIGBUS, or zeros once a write extended the file again), and a zero-length file is
taken for a new store. So before LMDB is given the file, and before any read
touches a page, the store is checked here (docs/decisions.md D38):

1. the file: present (or the directory is genuinely new), not empty, an LMDB
   file (magic and version of its meta pages), and at least as long as the pages
   its newest meta page says are in use (``(last_pgno + 1) * psize``);
2. after LMDB opened it, and before any transaction reads a page, the same size
   rule on LMDB's own reading of the metadata (``env.info()``/``env.stat()``);
3. the fact log against what was written with it (cheap: O(objects of one
   fact), whatever the store's size): the log's keys run 1..seq with seq the
   stored last seq, and the last fact decodes and the objects it touched have
   snapshots.

A failure raises :class:`StoreDamaged` with one message naming the file and
what is wrong.
"""

from __future__ import annotations

import os
import struct
from typing import Any

from ..core.kinds import state_type
from .codec import decode_fact, decode_object
from .kv import Snapshot
from .layout import from_u64

__all__ = ["StoreDamaged", "StoreLocked", "check_file", "check_env", "log_problems", "NOT_NEW_TRACES"]


class StoreDamaged(RuntimeError):
    """The store is not whole (or a data directory is not what it claims)."""


class StoreLocked(RuntimeError):
    """Another process holds the data directory (either backend's node-local lock)."""


# LMDB's file header (lmdb.h / mdb.c, 64-bit builds): each of the first two pages
# holds a page header (16 bytes) and an MDB_meta: magic u32, version u32,
# address, map size, two MDB_db records (48 bytes each; the first one's md_pad is
# the page size), last page number, transaction id.
_MAGIC = 0xBEEFC0DE
_VERSION = 1
_META = struct.Struct("<II")  # magic, version at offset 16
_PSIZE_AT = 40
_LAST_AT = struct.Struct("<QQ")  # last_pgno, txnid at offset 136
_META_END = 152

#: What a data directory holds once a daemon has used it: with any of these and
#: no store, the directory is not new (a fresh store would hide what was lost).
NOT_NEW_TRACES = ("admin.key", "kungfud.lock", os.path.join("lmdb", "lock.mdb"))

_RESTORE = "restore the data directory from a backup (docs/operations.md \"Backup and restore\")"


def _need(path: str, size: int, last_pgno: int, psize: int, source: str) -> None:
    need = (last_pgno + 1) * psize
    if size < need:
        raise StoreDamaged(
            f"{path} is truncated: {source} says pages 0..{last_pgno} of {psize} bytes are in use "
            f"({need} bytes), the file has {size} bytes; {_RESTORE}"
        )


def _meta(head: bytes, at: int) -> tuple[int, int, int] | None:
    """(psize, last_pgno, txnid) of the meta page at ``at``; None if not one."""
    if len(head) < at + _META_END:
        return None
    magic, version = _META.unpack_from(head, at + 16)
    if magic != _MAGIC or version != _VERSION:
        return None
    (psize,) = struct.unpack_from("<I", head, at + _PSIZE_AT)
    last, txnid = _LAST_AT.unpack_from(head, at + 136)
    return psize, last, txnid


def check_file(data_dir: str, *, traces: list[str]) -> bool:
    """Check ``DIR/lmdb/data.mdb`` before LMDB opens it. True when there is no
    store yet and the directory is new (``traces`` — files of
    :data:`NOT_NEW_TRACES` found before this process touched the directory —
    is empty); raises :class:`StoreDamaged` otherwise when the file is missing or
    not whole."""
    path = os.path.join(data_dir, "lmdb", "data.mdb")
    try:
        size = os.path.getsize(path)
    except FileNotFoundError:
        if traces:
            raise StoreDamaged(
                f"{path} is missing, but {data_dir} is not a new data directory (it has {', '.join(traces)}); "
                f"refusing to start an empty store over it: {_RESTORE}, or use a new directory"
            ) from None
        return True
    if size == 0:
        raise StoreDamaged(
            f"{path} is empty (0 bytes): the store was truncated or never finished being created; "
            f"refusing to start an empty store over it: {_RESTORE}, or use a new directory"
        )
    with open(path, "rb") as f:
        head = f.read(_META_END)
        first = _meta(head, 0)
        if first is None:
            raise StoreDamaged(f"{path} is not an LMDB store (its first page is not an LMDB meta page); {_RESTORE}")
        psize = first[0]
        if not 512 <= psize <= 65536 or psize & (psize - 1):
            raise StoreDamaged(f"{path} is not an LMDB store (its meta page gives a page size of {psize}); {_RESTORE}")
        if size < 2 * psize:
            raise StoreDamaged(
                f"{path} is truncated: {size} bytes is shorter than its two {psize}-byte meta pages; {_RESTORE}"
            )
        f.seek(psize)
        second = _meta(f.read(_META_END), 0)
        # The size after the metadata: the file only grows, so a store a live
        # daemon is writing to is never mistaken for a truncated one.
        size = os.fstat(f.fileno()).st_size
    # LMDB uses the meta page with the newer transaction.
    newest = first if second is None or first[2] >= second[2] else second
    _need(path, size, newest[1], psize, "its meta page")
    return False


def check_env(env: Any, data_dir: str) -> None:
    """The size rule on LMDB's own reading of its metadata; call right after
    ``lmdb.open`` and before any transaction. The metadata is read before the
    file's size: the file only grows, so a store a daemon is writing to is
    never mistaken for a truncated one."""
    last_pgno = env.info()["last_pgno"]
    psize = env.stat()["psize"]
    path = os.path.join(data_dir, "lmdb", "data.mdb")
    _need(path, os.path.getsize(path), last_pgno, psize, "LMDB's metadata")


def log_problems(kv: Snapshot, *, derived: bool = True) -> list[str]:
    """Cheap consistency of the fact log with what each commit writes beside it:
    the stored last seq, the log's first and last keys and its row count,
    the last fact decoding, and (``derived``) the snapshots of the objects
    the last fact touched. Constant work per start, whatever the
    store's size."""
    raw = kv.get("meta", b"seq")
    seq = from_u64(raw) if raw else 0
    entries = kv.count("log")
    if seq == 0:
        if entries:
            return [f"the fact log holds {entries} facts but the store records none (meta seq missing)"]
        objects = kv.count("objects")
        return [f"the fact log is empty but {objects} objects are stored"] if objects else []
    problems = []
    head = next(kv.scan("log", values=False), None)
    tail = next(kv.scan("log", reverse=True), None)
    first = from_u64(head[0]) if head is not None else None
    last = from_u64(tail[0]) if tail is not None else None
    last_raw = tail[1] if tail is not None else None
    if first != 1 or last != seq or entries != seq:
        problems.append(
            f"the fact log should hold facts 1..{seq} (the last seq recorded); "
            f"it holds {entries} facts, first {first}, last {last}"
        )
    if last_raw is None:
        return problems
    try:
        fact = decode_fact(last_raw)
        objs = list(fact.objects())
    except Exception as e:  # noqa: BLE001 — any decode failure is damage to report
        return problems + [f"the last fact (seq {last}) does not decode: {e}"]
    if not derived:
        return problems
    for obj in objs:
        snapshot = kv.get("objects", obj.encode())
        if snapshot is None:
            problems.append(f"the last fact (seq {last}) touched {obj} but its object snapshot is missing")
            continue
        try:
            decode_object(snapshot, state_type(obj))
        except Exception as e:  # noqa: BLE001
            problems.append(f"the object snapshot of {obj} does not decode: {e}")
    return problems

