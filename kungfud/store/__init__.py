"""Storage: the fact log, object snapshots and derived indexes, over
the kv layer (kv.py) of a backend (LMDB: lmdb.py, lmdb_kv.py; PostgreSQL:
postgres/), read through one View (view.py), its rows encoded by codec.py,
opened (and migrated) by open.py.

The log is the only source of truth (L1). Everything else here is derived from it
and can be rebuilt by ``kungfud check --rebuild``.
"""

from .integrity import StoreDamaged, StoreLocked
from .open import Store
from .view import View
from .interface import Backend, Committed, Committer, Failed, Item, Outcome, Recorder, Replayed, Stale, Tx, WriteTxn
from .writer import Writer

__all__ = [
    "Store", "View", "StoreDamaged", "StoreLocked", "Writer", "Item", "Outcome", "Committed", "Replayed", "Stale", "Failed",
    "Recorder", "Committer", "Tx", "Backend", "WriteTxn",
]
