"""``kungfud check``: rebuild every derived index from the fact log and compare.

Derived rows are a pure function of the log (L1-1): object snapshots are the fold
of each object's facts through the core's ``apply``; versions count the facts that
touched each object; the other indexes come from :func:`fact_rows` over the log
and :func:`state_rows` over the folded states. Any difference
is reported; ``--rebuild`` replaces the stored rows with the rebuilt ones.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from ..core.atoms import apply_to
from .events import Feed
from .indexes import fact_rows, state_rows
from .layout import DERIVED, decode_fact, encode_object, from_u64, stream_key
from .store import Store

__all__ = ["expected_indexes", "compare", "write", "run_check"]


def expected_indexes(store: Store, txn: Any = None) -> dict[str, dict[bytes, bytes]]:
    """Derived databases as the log says they must be (in ``txn``'s snapshot)."""
    if txn is None:
        with store.env.begin() as own:
            return expected_indexes(store, own)
    out: dict[str, dict[bytes, bytes]] = {name: {} for name in DERIVED}
    states: dict[str, Any] = {}
    versions: dict[str, int] = {}
    with txn.cursor(db=store.dbs["log"]) as cur:
        for k, v in cur:
            seq = from_u64(k)
            fact = decode_fact(v)
            feed = Feed()
            for obj in fact.objects():
                out["stream"][stream_key(obj, seq)] = b""
                before = states.get(obj)
                states[obj] = apply_to(obj, before, fact)
                feed.observe(obj, before, states[obj], fact)
                versions[obj] = versions.get(obj, 0) + 1
            for db, key, value in feed.rows(seq, feed.rendered()):
                out[db][key] = value
            for db, key, value in fact_rows(fact, seq):
                out[db][key] = value
    for obj, state in states.items():
        out["objects"][obj.encode()] = encode_object(versions[obj], state)
        for db, key, value in state_rows(obj, state):
            out[db][key] = value
    return out


def compare(store: Store, expected: dict[str, dict[bytes, bytes]], txn: Any = None) -> list[str]:
    if txn is None:
        with store.env.begin() as own:
            return compare(store, expected, own)
    problems: list[str] = []
    for name, rows in expected.items():
        actual = dict(txn.cursor(db=store.dbs[name]))
        for key in rows.keys() - actual.keys():
            problems.append(f"{name}: missing {key!r}")
        for key in actual.keys() - rows.keys():
            problems.append(f"{name}: unexpected {key!r}")
        for key in rows.keys() & actual.keys():
            if rows[key] != actual[key]:
                problems.append(f"{name}: differs at {key!r}")
    return problems


def write(store: Store, expected: dict[str, dict[bytes, bytes]]) -> None:
    with store.env.begin(write=True) as txn:
        for name, rows in expected.items():
            txn.drop(store.dbs[name], delete=False)
            for key, value in rows.items():
                txn.put(key, value, db=store.dbs[name])


def run_check(data_dir: str, *, rebuild: bool = False, map_size_mb: int = 10240) -> int:
    do_rebuild = rebuild
    if not os.path.isdir(os.path.join(data_dir, "lmdb")):
        print(f"kungfud check: no kungfud data in {data_dir}", file=sys.stderr)
        return 2
    try:
        # Without --rebuild, open read-only and take no lock: it can run beside a
        # live daemon, reading one consistent snapshot.
        store = Store(data_dir, map_size_mb=map_size_mb, lock=do_rebuild, readonly=not do_rebuild)
    except Exception as e:
        print(f"kungfud check: {e}", file=sys.stderr)
        return 2
    try:
        with store.env.begin() as txn:
            n = txn.stat(store.dbs["log"])["entries"]
            expected = expected_indexes(store, txn)
            problems = compare(store, expected, txn)
        for p in problems[:100]:
            print(p)
        if len(problems) > 100:
            print(f"… and {len(problems) - 100} more")
        if problems and do_rebuild:
            write(store, expected)
            print(f"rebuilt derived indexes from {n} facts ({len(problems)} differences fixed)")
            return 0
        print(f"checked {n} facts: {'OK' if not problems else f'{len(problems)} differences'}")
        return 0 if not problems else 1
    finally:
        store.close()

