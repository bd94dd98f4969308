"""The PostgreSQL schema of a kungfud store (docs/storage.md "PostgreSQL").

One table per name of :data:`~kungfud.store.layout.DBS`,
``kf_<name>(key bytea primary key, value bytea not null)`` — ``bytea`` compares
as unsigned bytes, the order LMDB keeps, so every key shape of ``layout`` is
kept as is (D86) — and ``kf_schema(version int)``, one row: the version of
this table set. ``meta/format`` is the storage format, as in LMDB (D92).

The tables are created on the first start, in one transaction under an
advisory lock, so nodes starting together create them once; a schema version
newer than this kungfud's is refused with a message, as a newer storage format
is.
"""

from __future__ import annotations

from typing import Any

from ..integrity import StoreDamaged
from ..layout import ADDED, ADDED_DERIVED, ADDED_EMPTY, DBS, FILL, FORMAT

__all__ = ["SCHEMA_VERSION", "LOCK_WRITER", "LOCK_SCHEMA", "LOCK_BOOTSTRAP", "table", "ensure_schema"]

#: The version of the table set below; a store with a newer one is refused.
SCHEMA_VERSION = 1

# Advisory lock keys (one bigint each; PostgreSQL scopes advisory locks to the
# database, so stores in different databases never contend). "kfd" + a number.
#: Held by every write transaction (pg_advisory_xact_lock): one writer at a time
#: on the store, across all nodes (docs/storage.md; the commit order is the serial order).
LOCK_WRITER = 0x6B6664_0001
#: Held while the schema is checked or created (two nodes starting together).
LOCK_SCHEMA = 0x6B6664_0002
#: Held across the admin bootstrap's "no facts yet → create the admin" (D112).
LOCK_BOOTSTRAP = 0x6B6664_0003


def table(name: str) -> str:
    """The SQL table of a ``layout.DBS`` name (a fixed identifier, never user input)."""
    if name not in DBS:
        raise KeyError(f"no table {name!r} in the store layout")
    return f"kf_{name}"


def _format_refused(fmt: bytes, where: str) -> StoreDamaged:
    return StoreDamaged(
        f"the store at {where} has storage format {fmt.decode(errors='replace')}, newer than format "
        f"{FORMAT.decode()} that this kungfud reads: run the kungfud that wrote it (or a newer one)"
    )


def ensure_schema(conn: Any, where: str, *, create: bool = True) -> bytes | None:
    """Check (and with ``create``, create on first use) the tables on ``conn``,
    in one transaction under :data:`LOCK_SCHEMA`. Returns the stored format if
    it is older than :data:`~kungfud.store.layout.FORMAT` (to migrate), None
    when current; raises StoreDamaged for a newer schema or format, or (without
    ``create``) for a database that holds no kungfud store."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_SCHEMA,))
        row = conn.execute("SELECT to_regclass('kf_schema') IS NOT NULL").fetchone()
        if not row[0]:
            if not create:
                raise StoreDamaged(f"no kungfud store in the database at {where} (table kf_schema is missing)")
            for name in DBS:
                conn.execute(
                    f"CREATE TABLE {table(name)} (key bytea PRIMARY KEY, value bytea NOT NULL)"
                )
            conn.execute("CREATE TABLE kf_schema (version int NOT NULL)")
            conn.execute("INSERT INTO kf_schema (version) VALUES (%s)", (SCHEMA_VERSION,))
            conn.execute("INSERT INTO kf_meta (key, value) VALUES (%s, %s)", (b"format", FORMAT))
            return None
        versions = [r[0] for r in conn.execute("SELECT version FROM kf_schema").fetchall()]
        if len(versions) != 1:
            raise StoreDamaged(f"the store at {where} has {len(versions)} rows in kf_schema; it should have one")
        if versions[0] > SCHEMA_VERSION:
            raise StoreDamaged(
                f"the store at {where} has schema version {versions[0]}, newer than version {SCHEMA_VERSION} "
                "that this kungfud reads: run the kungfud that wrote it (or a newer one)"
            )
        missing = [
            name for name in DBS
            if not conn.execute("SELECT to_regclass(%s) IS NOT NULL", (table(name),)).fetchone()[0]
        ]
        # Tables added without a format step: created empty (D212), also when
        # opened to be read (kungfud check): there is nothing in them to miss.
        for name in [n for n in missing if n in ADDED_EMPTY]:
            conn.execute(f"CREATE TABLE {table(name)} (key bytea PRIMARY KEY, value bytea NOT NULL)")
            missing.remove(name)
            if name in ADDED_DERIVED:  # filled from the log by the first open for writing (open.py, D419)
                conn.execute(
                    "INSERT INTO kf_meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO NOTHING",
                    (FILL + name.encode(), b""),
                )
        raw = conn.execute("SELECT value FROM kf_meta WHERE key = %s", (b"format",)).fetchone()
        fmt = bytes(raw[0]) if raw else None
        # A table a later format added is created for the migration (D242), on open for writing.
        # Read-only, it is reported as a format to migrate.
        added = [n for n in missing if fmt is not None and fmt.isdigit() and int(fmt) < ADDED.get(n, 0)]
        for name in added if create else ():
            conn.execute(f"CREATE TABLE {table(name)} (key bytea PRIMARY KEY, value bytea NOT NULL)")
        missing = [n for n in missing if n not in added]
        if missing:
            raise StoreDamaged(f"the store at {where} lacks the tables {', '.join(table(n) for n in missing)}")
        if fmt is None:
            if create:
                conn.execute("INSERT INTO kf_meta (key, value) VALUES (%s, %s)", (b"format", FORMAT))
            return None
        if fmt == FORMAT:
            return None
        if fmt.isdigit() and int(fmt) < int(FORMAT):
            return fmt
        raise _format_refused(fmt, where)
