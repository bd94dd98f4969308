"""``kungfud backup DEST``: a consistent hot copy of the data directory's LMDB
environment, taken while the daemon serves (LMDB's copy runs inside one read
transaction, so it is a snapshot of one commit), compacted.

Restore: stop the daemon, move ``DATA_DIR/lmdb`` aside, put the backup's
``lmdb`` folder in its place, start the daemon. The admin key file is not part of
the backup (it is a secret; the admin agent itself, with only its key hash, is).
"""

from __future__ import annotations

import os
import sys

from .store import Store

__all__ = ["run_backup"]


PG_DUMP = (
    "kungfud backup copies an LMDB store; this store is in PostgreSQL ({where}): back it up with "
    "PostgreSQL's own tools, e.g. `pg_dump -Fc URL > kungfud.dump` (restore into an empty database with "
    "`pg_restore -d URL kungfud.dump`), or a replica (docs/operations.md \"Backup and restore\")"
)


def run_backup(data_dir: str, dest: str, *, url: str = "lmdb") -> int:
    from .store.open import is_pg_url

    if is_pg_url(url):
        from .store.postgres import redact_url

        print(f"kungfud backup: {PG_DUMP.format(where=redact_url(url))}", file=sys.stderr)
        return 2
    src = os.path.join(data_dir, "lmdb")
    if not os.path.isfile(os.path.join(src, "data.mdb")):
        print(f"kungfud backup: no kungfud data in {data_dir}", file=sys.stderr)
        return 2
    target = os.path.join(dest, "lmdb")
    if os.path.exists(os.path.join(target, "data.mdb")):
        print(f"kungfud backup: {target} already holds a backup; choose an empty destination", file=sys.stderr)
        return 2
    # Read-only, no lock file of ours: safe beside a running daemon. The store is
    # checked whole before any page is read (Store, integrity.py): a truncated
    # file is refused, not copied (or read past its end).
    try:
        store = Store(data_dir, readonly=True, lock=False)
    except Exception as e:
        print(f"kungfud backup: {e}", file=sys.stderr)
        return 2
    try:
        store.require_consistent_log()
        os.makedirs(target, mode=0o700, exist_ok=True)
        store.env.copy(target, compact=True)
        os.chmod(os.path.join(target, "data.mdb"), 0o600)  # LMDB creates the copy 0644
        with store.read() as view:
            seq = view.last_seq()
    except Exception as e:  # StoreDamaged, lmdb and OS errors: a message, never a traceback
        print(f"kungfud backup: {e}", file=sys.stderr)
        return 2
    finally:
        store.close()
    size = os.path.getsize(os.path.join(target, "data.mdb"))
    print(f"backed up {data_dir} to {dest} ({size} bytes, facts up to seq {seq} or later)")
    return 0
