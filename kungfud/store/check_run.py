"""``kungfud check``, the command: open the store (open.py), fold the log,
compare each derived table by its sum and walk row by row only those that
disagree (D365, D395), report, and with ``--rebuild`` repair them. The fold
and the comparisons are :mod:`~kungfud.store.check`'s; this module is the one
that opens a store, so that check.py, which open.py migrates with, imports
nothing that imports it back (D381)."""

from __future__ import annotations

import gc
import os
import sys
from functools import partial
from typing import Callable

from .check import problems_of, stored_rows
from .derived_fold import derive
from .derived_runs import GROUP_BYTES, Progress, Releasing, Runs, Sums, repair_ranges, summed
from .integrity import log_problems
from .interface import Backend, is_pg_url
from .layout import DERIVED, FORMAT
from .lmdb_kv import mapped_spans, release_spans
from .open import open_store
from .search_index import check_index

__all__ = ["run_check"]


def run_check(
    data_dir: str, *, rebuild: bool = False, map_size_mb: int = 10240, url: str = "lmdb", group: int = GROUP_BYTES
) -> int:
    """Exit status: 0 consistent (or rebuilt), 1 differences or a damaged fact
    log, 2 no store or a store that is not whole (integrity.py). Never a
    traceback: every failure is a message. ``url``: the store (open.py);
    ``group``: the bytes of rebuilt rows held in memory before a spill."""
    do_rebuild = rebuild
    pg = is_pg_url(url)
    if not pg and not os.path.isdir(os.path.join(data_dir, "lmdb")):
        print(f"kungfud check: no kungfud data in {data_dir}", file=sys.stderr)
        return 2
    try:
        # Without --rebuild, open read-only and take no lock: it can run beside a
        # live daemon, reading one consistent snapshot. Either way the store is
        # checked whole before any page is read (Store, integrity.py). On
        # PostgreSQL no node-local lock: --rebuild wants every node stopped.
        store = open_store(
            url, data_dir, map_size_mb=map_size_mb, lock=do_rebuild and not pg, readonly=not do_rebuild
        )
    except Exception as e:
        print(f"kungfud check: {e}", file=sys.stderr)
        return 2
    # The fold makes millions of short-lived objects and next to no cycles:
    # the cyclic collector's passes over the states it holds cost more than
    # they find (D396). Refcounting frees everything as before.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _check(store, do_rebuild, group)
    except Exception as e:  # noqa: BLE001 — reported, never a traceback
        print(f"kungfud check: could not finish checking {data_dir}: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    finally:
        if collecting:
            gc.enable()
        store.close()


def _check(store: Backend, do_rebuild: bool, group: int = GROUP_BYTES) -> int:
    """The check in bounded memory (D365, D395): the fold of the log keeps
    only a sum of each table's rebuilt rows (:class:`~kungfud.store.derived_runs.Sums`),
    compared with the same sum of its stored rows; the tables that disagree
    are rebuilt again, to sorted runs (:class:`~kungfud.store.derived_runs.Runs`),
    and walked beside their stored rows: each difference is reported in key
    order; ``--rebuild`` walks them again in its write transaction, a range at
    a time, writing only what differs."""
    if store.migrate_from is not None:  # read-only: a rebuild (or a start) migrates it
        print(
            f"storage format {store.migrate_from.decode()} is older than {FORMAT.decode()}: start the daemon "
            "or run `kungfud check --rebuild` (daemon stopped) once to migrate it"
        )
        return 1
    progress = Progress()
    release: Callable[[], None] | None = None
    if getattr(store, "release_pages", None) is not None:  # LMDB's mapped pages (D367), found once (D396)
        spans = mapped_spans(os.path.join(store.env.path(), "data.mdb"))  # type: ignore[attr-defined]
        release = partial(release_spans, spans)

    def saying(what: str) -> Callable[[int], None]:
        def said(seq: int) -> None:  # every 1,024 facts
            progress.say(f"{what}, fact {seq} of {n}")

        return said

    with Runs(group) as runs:
        with store.read() as whole:
            # On LMDB every read lets go of the pages read so far, now and then (D367).
            view = whole if release is None else type(whole)(Releasing(whole.kv, release), whole.recorder)
            n = view.kv.count("log")
            # The log itself: its seqs and every fact decoding and applying. Derived
            # rows are the comparison's business.
            damage = [f"log: {p}" for p in log_problems(view.kv, derived=False)]
            sums = Sums()
            derive(view.kv, sums.put, damage, progress=saying("rebuilding"))
            found = 0
            for p in damage:
                found = _say(p, found, progress)
            differ = []
            for name in (*DERIVED, "meta"):
                progress.say(f"comparing {name}", force=True)
                if summed(stored_rows(whole.kv, name), release=release) != sums.of(name):
                    differ.append(name)
            if differ:  # rebuilt again, those tables only, and walked row by row
                derive(view.kv, runs.put, [], tuple(t for t in differ if t != "meta"), progress=saying("finding the differences"))
                for name in differ:
                    progress.say(f"comparing {name}, row by row", force=True)
                    for p in problems_of(name, runs.rows(name), view.kv):
                        found = _say(p, found, progress)
            # Search's derived index (a file beside the data): compared, and remade by --rebuild.
            progress.say("checking the search index", force=True)
            for p in check_index(store, view, do_rebuild and not damage):
                found = _say(p, found, progress)
        if found > _SHOWN:
            print(f"… and {found - _SHOWN} more")
        if damage:
            progress.done()
            # Rebuilding from a damaged log would write indexes that lose what it lost.
            print(
                f"the fact log is damaged ({len(damage)} problems){'; nothing rebuilt' if do_rebuild else ''}: "
                "restore the data directory from a backup (docs/operations.md \"Backup and restore\")"
            )
            return 1
        if found and do_rebuild:
            _repair(store, runs, differ, progress)
            progress.done()
            print(f"rebuilt derived indexes from {n} facts ({found} differences fixed)")
            return 0
    progress.done()
    print(f"checked {n} facts: {'OK' if not found else f'{found} differences'}")
    return 0 if not found else 1


_SHOWN = 100  # problems printed; the rest are counted


def _say(problem: str, found: int, progress: Progress) -> int:
    if found < _SHOWN:
        progress.done()  # not on the progress line
        print(problem)
    return found + 1


def _repair(store: Backend, runs: Runs, tables: list[str], progress: Progress) -> None:
    """The derived ``tables`` made equal to their rebuilt rows in one
    transaction, a range of stored rows at a time: only the rows that differ
    are written."""
    w = store.begin_write()
    try:
        tx = w.tx
        for name in tables:
            progress.say(f"rebuilding {name}", force=True)
            repair_ranges(
                runs.rows(name), lambda start, name=name: stored_rows(tx, name, start),
                lambda key, value, name=name: tx.put(name, key, value), lambda key, name=name: tx.delete(name, key),
            )
    except BaseException:
        w.abort()
        raise
    w.commit()
