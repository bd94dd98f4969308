"""The PostgreSQL backend (docs/storage.md "PostgreSQL"): the same tables and
key shapes as LMDB, one SQL table per name, driven by the same writer, views,
check and migration code. Only this package (and the node mechanisms) import
psycopg.

:class:`PgStore` is the store opened the one way every store is
(:func:`~kungfud.store.open.opened`: an older format migrated once, D92)."""

from ..open import opened
from .store import PgBackend, is_pg_url, redact_url

__all__ = ["PgStore", "PgBackend", "is_pg_url", "redact_url"]


class PgStore(PgBackend):
    """The store in the PostgreSQL database ``url``, opened (:func:`~kungfud.store.open.opened`)."""

    def __init__(self, url: str, data_dir: str, *, readonly: bool = False, lock: bool = True, capacity_mb: int = 0):
        super().__init__(url, data_dir, readonly=readonly, lock=lock, capacity_mb=capacity_mb)
        opened(self, readonly)
