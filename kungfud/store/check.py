"""``kungfud check``: rebuild every derived index from the fact log and compare.

Derived rows are a pure function of the log (L1-1): object snapshots are the fold
of each object's facts through the core's ``apply``; versions count the facts that
touched each object; the other indexes come from :func:`fact_rows` over the log
and :func:`state_rows` over the folded states; the events and their seqs from
the feed of each fact in log order (:func:`~kungfud.store.events.number`), and
with them the last event seq (``meta/events``, the one derived ``meta`` row).
Any difference is reported; ``--rebuild`` replaces the stored rows with the
rebuilt ones. The check does it in bounded memory (D365): the rebuilt rows go
to sorted runs and each table is walked beside its stored rows in key order
(:mod:`~kungfud.store.derived_runs`); ``--rebuild`` writes only what differs.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import Callable, Iterator

from ..core.facts import member_obj
from ..tracing import without_meta
from ..core.kinds import apply_to
from ..core.members import current
from ..core.events import FactEvents
from .events import KINDS_KEY, enabled, kinds_since, number, rendered
from .events import rows as event_rows
from .indexes import fact_rows, state_rows
from .integrity import StoreDamaged
from .layout import DERIVED, DERIVED_META, FORMAT, PUBLIC, RETIRED, decode_fact, encode_object, from_u64, u64
from .integrity import log_problems
from .interface import Backend
from .kv import Snapshot
from .quota import TABLE as USAGE
from .quota import add_usage

# The derived tables a store of format 2 or 3 rebuilds from the log to reach
# format 4 (D200, D233, D242); its other derived rows stay as they are, but
# for the Tasks' live engagements (task_rows.step_3_to_4, D271).
FORMAT_4_TABLES = ("events", "memories", "usage")
# The derived table a store of format 4 or older rebuilds to reach format 5:
# the obligations of one holder keyed in the order they arose (D282).
FORMAT_5_TABLES = ("obligations",)
from .task_rows import step_3_to_4
from .search_index import check_index
from .derived_runs import GROUP_BYTES, Progress, Releasing, Runs, States, differences, repair_ranges

__all__ = ["expected_indexes", "compare", "write", "migrate", "run_check"]

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


def derive(
    kv: Snapshot, put: Callable[[str, bytes, bytes], None], errors: list[str] | None = None,
    tables: tuple[str, ...] = DERIVED, progress: Callable[[int], None] | None = None,
) -> None:
    """Each derived row of ``tables`` (and of ``meta``, :data:`DERIVED_META`)
    the log in ``kv`` makes, handed to ``put(table, key, value)``; a later row
    of one key replaces the earlier. Memory holds the most recently written
    of the objects' states (:class:`~kungfud.store.derived_runs.States`), never
    the rows. ``progress(seq)`` now and then."""
    with States() as folded_states:
        _derive(kv, put, errors, frozenset(tables), progress, folded_states)


def _derive(
    kv: Snapshot, put: Callable[[str, bytes, bytes], None], errors: list[str] | None, wanted: frozenset[str],
    progress: Callable[[int], None] | None, states: States,
) -> None:
    usage: dict[bytes, int] = {}
    event_seq = 0
    # D285: a kind recorded after the store began is made from its first fact on.
    since = kinds_since(kv.get("meta", KINDS_KEY))
    indexes = any(t not in ("events", "outcomes") for t in wanted)
    for n, (k, v) in enumerate(kv.scan("log")):
        if len(k) != 8:
            if errors is None:
                raise ValueError(f"log key {k!r} is not a seq")
            errors.append(f"log: a key that is not a seq: {k[:32]!r}")
            continue
        seq = from_u64(k)
        if progress is not None and not n & 1023:
            progress(seq)
        try:
            fact = decode_fact(v)
            objs = list(fact.objects())
            folded = {}
            for obj in objs:
                folded[obj] = apply_to(obj, folded[obj] if obj in folded else states.state(obj), fact)
        except Exception as e:  # noqa: BLE001 — a damaged fact is a finding, not a crash
            if errors is None:
                raise
            errors.append(f"log: the fact at seq {seq} does not decode or apply: {type(e).__name__}: {e}")
            continue
        feed = FactEvents(lambda th, ag: current(states.state(member_obj(th, ag))) is not None, states.state)
        for obj in objs:
            version, before = states.get(obj)
            states.set(obj, version + 1, folded[obj])
            feed.observe(obj, before, folded[obj], fact)
        numbered = number(rendered(feed, enabled(since, seq)), event_seq, seq)
        if numbered:
            event_seq = numbered[-1][1]
        for db, key, value in event_rows(feed, seq, numbered):
            if db in wanted and db != USAGE:
                put(db, key, value)
        if indexes:
            for db, key, value in fact_rows(fact, seq):
                if db in wanted and db != USAGE:
                    put(db, key, value)
        add_usage(usage, fact, len(v))
    if USAGE in wanted:
        for key, n in usage.items():
            put(USAGE, key, u64(n))
    if indexes:
        for obj, version, state in states.items():
            if "objects" in wanted:
                put("objects", obj.encode(), encode_object(version, state))
            for db, key, value in state_rows(obj, state):
                if db in wanted:
                    put(db, key, value)
    if event_seq:
        put("meta", b"events", u64(event_seq))


def _stored(kv: Snapshot, name: str, start: bytes = b"") -> Iterator[tuple[bytes, bytes]]:
    """The stored rows of a derived table from ``start`` on, ascending (of
    ``meta``, only the derived rows)."""
    if name == "meta":
        return ((key, value) for key in sorted(DERIVED_META) if key >= start and (value := kv.get("meta", key)) is not None)
    if name == "events":  # an event's trace context is kept, not derived (WIRE.md 1.3)
        return ((key, without_meta(bytes(value))) for key, value in kv.scan(name, start))
    return kv.scan(name, start)


def _problems(name: str, expected: Iterator[tuple[bytes, bytes]], kv: Snapshot) -> Iterator[str]:
    """One line per difference between a table's rebuilt rows (ascending) and
    its stored rows, in key order."""
    for what, key, _ in differences(expected, _stored(kv, name)):
        yield f"{name}: {what if what != 'differs' else 'differs at'} {key!r}"


def compare(store: Backend, expected: dict[str, dict[bytes, bytes]], kv: Snapshot | None = None) -> list[str]:
    """``expected`` against the stored rows (in the snapshot ``kv``, by default
    a new one of ``store``): one line per difference."""
    if kv is None:
        with store.read() as view:
            return compare(store, expected, view.kv)
    problems: list[str] = []
    for name, rows in expected.items():
        problems += _problems(name, ((key, rows[key]) for key in sorted(rows)), kv)
    return problems


def write(
    store: Backend, expected: dict[str, dict[bytes, bytes]], *, format: bytes | None = None,
    puts: dict[str, dict[bytes, bytes]] | None = None,
) -> None:
    """Replace every derived table of ``expected`` by its rows in one
    transaction (of ``meta``, only the derived rows), and with ``format``
    record that storage format in the same one and drop the tables older
    formats had (:data:`RETIRED`). ``puts``: rows put as well, in tables not
    cleared (a migration step's)."""
    w = store.begin_write()
    try:
        tx = w.tx
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
        if format is not None:
            for name in RETIRED:
                w.drop_retired(name)
            tx.put("meta", b"format", format)
    except BaseException:
        w.abort()
        raise
    w.commit()


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


def run_check(
    data_dir: str, *, rebuild: bool = False, map_size_mb: int = 10240, url: str = "lmdb", group: int = GROUP_BYTES
) -> int:
    """Exit status: 0 consistent (or rebuilt), 1 differences or a damaged fact
    log, 2 no store or a store that is not whole (integrity.py). Never a
    traceback: every failure is a message. ``url``: the store (open.py);
    ``group``: the bytes of rebuilt rows held in memory before a spill."""
    from .open import is_pg_url, open_store

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
    try:
        return _check(store, do_rebuild, group)
    except Exception as e:  # noqa: BLE001 — reported, never a traceback
        print(f"kungfud check: could not finish checking {data_dir}: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    finally:
        store.close()


def _check(store: Backend, do_rebuild: bool, group: int = GROUP_BYTES) -> int:
    """The check in bounded memory (D365): the rebuilt rows go to sorted runs
    (:class:`~kungfud.store.derived_runs.Runs`), then each table is walked
    beside its stored rows; ``--rebuild`` walks them again in its write
    transaction, a range at a time, writing only what differs."""
    if store.migrate_from is not None:  # read-only: a rebuild (or a start) migrates it
        print(
            f"storage format {store.migrate_from.decode()} is older than {FORMAT.decode()}: start the daemon "
            "or run `kungfud check --rebuild` (daemon stopped) once to migrate it"
        )
        return 1
    progress = Progress()
    release = getattr(store, "release_pages", None)  # LMDB's mapped pages (D367)

    def rebuilding(seq: int) -> None:  # every 1,024 facts
        progress.say(f"rebuilding, fact {seq} of {n}")

    with Runs(group) as runs:
        with store.read() as whole:
            # On LMDB every read lets go of the pages read so far, now and then (D367).
            view = whole if release is None else type(whole)(Releasing(whole.kv, release), whole.recorder)
            n = view.kv.count("log")
            # The log itself: its seqs and every fact decoding and applying. Derived
            # rows are the comparison's business.
            damage = [f"log: {p}" for p in log_problems(view.kv, derived=False)]
            derive(view.kv, runs.put, damage, progress=rebuilding)
            found = 0
            for p in damage:
                found = _say(p, found, progress)
            for name in (*DERIVED, "meta"):
                progress.say(f"comparing {name}", force=True)
                for p in _problems(name, runs.rows(name), view.kv):
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
            _repair(store, runs, progress)
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


def _repair(store: Backend, runs: Runs, progress: Progress) -> None:
    """Every derived table made equal to its rebuilt rows in one transaction,
    a range of stored rows at a time: only the rows that differ are written."""
    w = store.begin_write()
    try:
        tx = w.tx
        for name in (*DERIVED, "meta"):
            progress.say(f"rebuilding {name}", force=True)
            repair_ranges(
                runs.rows(name), lambda start, name=name: _stored(tx, name, start),
                lambda key, value, name=name: tx.put(name, key, value), lambda key, name=name: tx.delete(name, key),
            )
    except BaseException:
        w.abort()
        raise
    w.commit()
