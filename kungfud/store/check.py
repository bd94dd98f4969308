"""``kungfud check``: rebuild every derived index from the fact log and compare.

Derived rows are a pure function of the log (L1-1): the fold of the log
(:func:`~kungfud.store.derived_fold.derive`) makes every one of them.
Any difference is reported; ``--rebuild`` replaces the stored rows with the
rebuilt ones. The check does it in bounded memory (D365): the rebuilt rows go
to sorted runs and each table is walked beside its stored rows in key order
(:mod:`~kungfud.store.derived_runs`); ``--rebuild`` writes only what differs.
"""

from __future__ import annotations

import logging
import time
from typing import Iterator

from ..tracing import without_meta
from .derived_fold import derive
from .derived_runs import differences
from .integrity import StoreDamaged, log_problems
from .interface import Backend
from .kv import Snapshot
from .layout import ADDED_DERIVED, DERIVED, DERIVED_META, FILL, FORMAT, PUBLIC, RETIRED
from .task_rows import step_3_to_4

# The derived tables a store of format 2 or 3 rebuilds from the log to reach
# format 4 (D200, D233, D242); its other derived rows stay as they are, but
# for the Tasks' live engagements (task_rows.step_3_to_4, D271).
FORMAT_4_TABLES = ("events", "memories", "usage")
# The derived table a store of format 4 or older rebuilds to reach format 5:
# the obligations of one holder keyed in the order they arose (D282).
FORMAT_5_TABLES = ("obligations",)

__all__ = ["expected_indexes", "compare", "write", "migrate", "fill_added", "stored_rows", "problems_of"]

log = logging.getLogger("kungfud.store")


def expected_indexes(
    store: Backend, kv: Snapshot | None = None, errors: list[str] | None = None, tables: tuple[str, ...] = DERIVED
) -> dict[str, dict[bytes, bytes]]:
    """Derived tables as the log says they must be (in the snapshot ``kv``, by
    default a new one of ``store``), and under ``meta`` the derived ``meta``
    rows (:data:`DERIVED_META`). With ``errors``, a fact that does not decode
    or apply is reported there and skipped instead of raising. ``tables``:
    only these derived tables (the events alone for a format step). All in
    memory: ``kungfud check`` streams the same rows instead (:func:`derive`)."""
    if kv is None:
        with store.read() as view:
            return expected_indexes(store, view.kv, errors, tables)
    out: dict[str, dict[bytes, bytes]] = {name: {} for name in (*tables, "meta")}
    derive(kv, lambda db, key, value: out[db].__setitem__(key, value), errors, tables)
    return out


def stored_rows(kv: Snapshot, name: str, start: bytes = b"") -> Iterator[tuple[bytes, bytes]]:
    """The stored rows of a derived table from ``start`` on, ascending (of
    ``meta``, only the derived rows)."""
    if name == "meta":
        return ((key, value) for key in sorted(DERIVED_META) if key >= start and (value := kv.get("meta", key)) is not None)
    if name == "events":  # an event's trace context is kept, not derived (WIRE.md 1.3)
        return ((key, without_meta(bytes(value))) for key, value in kv.scan(name, start))
    return kv.scan(name, start)


def problems_of(name: str, expected: Iterator[tuple[bytes, bytes]], kv: Snapshot) -> Iterator[str]:
    """One line per difference between a table's rebuilt rows (ascending) and
    its stored rows, in key order."""
    for what, key, _ in differences(expected, stored_rows(kv, name)):
        yield f"{name}: {what if what != 'differs' else 'differs at'} {key!r}"


def compare(store: Backend, expected: dict[str, dict[bytes, bytes]], kv: Snapshot | None = None) -> list[str]:
    """``expected`` against the stored rows (in the snapshot ``kv``, by default
    a new one of ``store``): one line per difference."""
    if kv is None:
        with store.read() as view:
            return compare(store, expected, view.kv)
    problems: list[str] = []
    for name, rows in expected.items():
        problems += problems_of(name, ((key, rows[key]) for key in sorted(rows)), kv)
    return problems


def write(
    store: Backend, expected: dict[str, dict[bytes, bytes]], *, format: bytes | None = None,
    puts: dict[str, dict[bytes, bytes]] | None = None, done: tuple[bytes, ...] = (),
) -> None:
    """Replace every derived table of ``expected`` by its rows in one
    transaction (of ``meta``, only the derived rows), and with ``format``
    record that storage format in the same one and drop the tables older
    formats had (:data:`RETIRED`). ``puts``: rows put as well, in tables not
    cleared (a migration step's). ``done``: ``meta`` rows deleted in the same
    transaction (the fill of an added table, D419); when one of them is gone
    already (another PostgreSQL node filled it meanwhile, and may have written
    since), nothing is written."""
    w = store.begin_write()
    try:
        tx = w.tx
        if any(tx.get("meta", key) is None for key in done):  # another node filled it first (D419)
            w.abort()
            return
        # Events keep the trace context they were written with (WIRE.md 1.3), where the rebuilt event is the same.
        kept = {
            key: bytes(old) for key, value in expected.get("events", {}).items()
            if (old := tx.get("events", key)) is not None and bytes(old) != value and without_meta(bytes(old)) == value
        }
        for name, rows in expected.items():
            if name == "meta":
                for key in DERIVED_META:
                    tx.delete("meta", key)
            else:
                tx.clear(name)
            for key, value in rows.items():
                tx.put(name, key, kept.get(key, value) if name == "events" else value)
        for name, rows in (puts or {}).items():
            for key, value in rows.items():
                tx.put(name, key, value)
        for key in done:
            tx.delete("meta", key)
        if format is not None:
            for name in RETIRED:
                w.drop_retired(name)
            tx.put("meta", b"format", format)
    except BaseException:
        w.abort()
        raise
    w.commit()


def fill_added(store: Backend) -> None:
    """D419: a table derived from the log that was added without a format step
    (``layout.ADDED_DERIVED``), created in a store that already held facts,
    is filled from the log once, in one transaction that also drops its
    ``meta`` FILL row: a crash before leaves the row, filled again next open."""
    with store.read() as view:
        pending = tuple(n for n in ADDED_DERIVED if view.kv.get("meta", FILL + n.encode()) is not None)
        if not pending:
            return
        t0 = time.monotonic()
        expected = expected_indexes(store, view.kv, tables=pending)
    write(store, expected, done=tuple(FILL + n.encode() for n in pending))
    log.warning(
        "filled %s from the log (%s rows), a table this version added, in %.1f s",
        ", ".join(pending), sum(len(expected[n]) for n in pending), time.monotonic() - t0,
    )


def migrate(store: Backend, old: bytes) -> None:
    """D92: a store of an older format is brought to :data:`FORMAT` once, on
    open, in one transaction that also records the new format: a crash leaves
    the old format, migrated again at next start. From format 1, every
    derived row is rebuilt from the log (all but log, meta and receipts are
    derived, L1-1); from format 2, whose other derived rows format 3 keeps as
    they are, the retired ``stream`` table is dropped (D186); from format 2
    or 3, three tables are rebuilt from the log: ``events`` and the last event
    seq, one seq per event (D200), ``memories`` with the rows of each author's
    public Memories (D233), and ``usage``, the bytes each agent's actions
    recorded (D242); and each Task's snapshot loses its live engagements,
    which become ``live`` rows (D271, :func:`~kungfud.store.task_rows.step_3_to_4`);
    from format 4 or older, the ``obligations`` rows are keyed anew (D282).
    A damaged log is refused, never migrated."""
    t0 = time.monotonic()
    rebuild = int(old) < 2
    step_4 = int(old) < 4
    tables = DERIVED if rebuild else (FORMAT_4_TABLES if step_4 else ()) + FORMAT_5_TABLES
    where = store.damage_place()[0]  # the LMDB file, or the PostgreSQL store's redacted URL
    with store.read() as view:
        damage = log_problems(view.kv, derived=False)
        if damage:
            raise StoreDamaged(
                f"cannot migrate {where} from storage format {old.decode()}: the fact log is damaged "
                f"({'; '.join(damage[:3])}); restore it from a backup"
            )
        facts = view.kv.count("log")
        expected = expected_indexes(store, view.kv, tables=tables)
        puts = step_3_to_4(view.kv) if step_4 and not rebuild else {}
    write(store, expected, format=FORMAT, puts=puts)
    if rebuild:
        said = "rebuilt the derived rows from the log"
    else:
        steps = []
        if step_4:
            public = sum(1 for key in expected["memories"] if PUBLIC in key)
            steps = ["renumbered the events, one seq each", f"added the rows of {public} public Memories",
                     "filled the usage table from the log", "moved the Tasks' live engagements into rows"]
            steps += ["dropped the per-object stream rows"] if int(old) < 3 else []
        said = "; ".join(steps + ["keyed the obligations in the order they arose"])
    log.warning(
        "migrated %s from storage format %s to %s: %s (%d facts) in %.1f s",
        where, old.decode(), FORMAT.decode(), said,
        facts, time.monotonic() - t0,
    )
