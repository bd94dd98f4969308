"""``kungfud migrate --data-dir DIR --to postgresql://…``: move a stopped LMDB
store into an empty PostgreSQL store (docs/storage.md "PostgreSQL", D116).

Every table is copied row for row (the key shapes are the same; ``COPY`` in
binary), all in one transaction: a failure leaves the target empty. The
target must hold no store data (a second run is refused, never merged). After
the commit the copy is verified: every table equal to the source, and the
PostgreSQL store's derived rows equal to their rebuild from its log
(``kungfud check``). The LMDB data directory is left as it was.
"""

from __future__ import annotations

import os
import sys
from itertools import zip_longest

from ..check import compare, expected_indexes
from ..integrity import StoreDamaged
from ..layout import DBS, FORMAT
from ..open import open_store
from .schema import table
from .store import PgBackend

__all__ = ["run_migrate", "copy_store"]


def _not_empty(tx) -> str | None:
    for name in DBS:
        for key, value in tx.scan(name):
            if name == "meta" and key == b"format" and value == FORMAT:
                continue  # written when the tables were created
            return f"table {table(name)} already holds rows"
    return None


def copy_store(source, target: PgBackend) -> dict[str, int]:
    """Copy every row of every table of ``source`` (a Backend) into the empty
    ``target`` in one transaction; rows copied per table. StoreDamaged if the
    target holds data."""
    counts: dict[str, int] = {}
    w = target.begin_write()
    try:
        found = _not_empty(w.tx)
        if found is not None:
            raise StoreDamaged(
                f"the target store at {target.where} is not empty ({found}): migrate only into a new, empty database"
            )
        cur = w._conn.cursor()
        with source.read() as view:
            kv = view.kv
            for name in DBS:
                n = 0
                if name == "meta":
                    for key, value in kv.scan(name):
                        w.tx.put(name, key, value)
                        n += 1
                else:
                    with cur.copy(f"COPY {table(name)} (key, value) FROM STDIN (FORMAT BINARY)") as copy:
                        copy.set_types(["bytea", "bytea"])
                        for row in kv.scan(name):
                            copy.write_row(row)
                            n += 1
                counts[name] = n
    except BaseException:
        w.abort()
        raise
    w.commit()
    return counts


def _differences(source, target: PgBackend) -> list[str]:
    """Tables whose rows differ between ``source`` and ``target``."""
    out = []
    with source.read() as a, target.read() as b:
        for name in DBS:
            for x, y in zip_longest(a.kv.scan(name), b.kv.scan(name)):
                if x != y:
                    out.append(f"{name}: {x[0] if x else None!r} in the source, {y[0] if y else None!r} in the target")
                    break
    return out


def run_migrate(data_dir: str, url: str, *, map_size_mb: int = 10240) -> int:
    """Exit status: 0 copied and verified; 2 refused or failed (a message,
    never a traceback)."""
    if not os.path.isfile(os.path.join(data_dir, "lmdb", "data.mdb")):
        print(f"kungfud migrate: no kungfud LMDB store in {data_dir}", file=sys.stderr)
        return 2
    try:
        # Locked: the daemon must be stopped (a store that moves while copied
        # would be copied torn). Opening migrates an older storage format first.
        source = open_store("lmdb", data_dir, map_size_mb=map_size_mb)
    except Exception as e:  # StoreLocked, StoreDamaged
        print(f"kungfud migrate: {e}", file=sys.stderr)
        return 2
    try:
        source.require_consistent_log()
        target = open_store(url, data_dir, lock=False)
    except Exception as e:
        source.close()
        print(f"kungfud migrate: {e}", file=sys.stderr)
        return 2
    try:
        counts = copy_store(source, target)
        problems = _differences(source, target)
        problems += compare(target, expected_indexes(target))
    except Exception as e:  # noqa: BLE001 — StoreDamaged, psycopg errors: a message
        print(f"kungfud migrate: {e}", file=sys.stderr)
        return 2
    finally:
        target.close()
        source.close()
    if problems:
        for p in problems[:20]:
            print(p)
        print(f"kungfud migrate: the copy at {target.where} does not check ({len(problems)} problems)", file=sys.stderr)
        return 2
    print(
        f"migrated {data_dir} to {target.where}: {counts['log']} facts, {sum(counts.values())} rows; checked OK. "
        f"Serve it with `kungfud serve --store URL --data-dir {data_dir}` (admin.key stays in {data_dir})"
    )
    return 0
