"""Storage: the fact log, object snapshots and derived indexes, over
the kv layer (kv.py) of a backend (LMDB: store.py, lmdb_kv.py).

The log is the only source of truth (L1). Everything else here is derived from it
and can be rebuilt by ``kungfud check --rebuild``.
"""

from .store import Store, StoreDamaged, StoreLocked
from .interface import Backend, Committed, Committer, Failed, Item, Outcome, Recorder, Replayed, Stale, Tx, WriteTxn
from .writer import Writer

__all__ = [
    "Store", "StoreDamaged", "StoreLocked", "Writer", "Item", "Outcome", "Committed", "Replayed", "Stale", "Failed",
    "Recorder", "Committer", "Tx", "Backend", "WriteTxn",
]
