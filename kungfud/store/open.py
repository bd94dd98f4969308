"""The one place a store is opened: LMDB under the data directory, or
PostgreSQL (``[storage] url`` / ``--store``; docs/storage.md "PostgreSQL").

A backend opens as it is and says in ``migrate_from`` whether its storage
format is older; :func:`opened` migrates it then, once, for every backend
(D92, D380). :class:`Store` is the LMDB store opened this way;
:class:`~kungfud.store.postgres.PgStore` the PostgreSQL one.
"""

from __future__ import annotations

import importlib.util
from typing import Any, TypeVar

from .check import migrate
from .integrity import StoreDamaged
from .interface import Backend, is_pg_url
from .lmdb import LmdbBackend

__all__ = ["open_store", "opened", "is_pg_url", "Store"]

B = TypeVar("B", bound=Backend)


def opened(store: B, readonly: bool) -> B:
    """``store`` just opened, brought to the current storage format if it is
    older (once, in one transaction: a crash leaves the old format to migrate
    again; D92). A read-only one is left as it is (``kungfud check`` reports
    it). On failure the store is closed and the error raised."""
    if store.migrate_from is not None and not readonly:
        try:
            migrate(store, store.migrate_from)
        except BaseException:
            store.close()
            raise
        store.migrate_from = None
    return store


class Store(LmdbBackend):
    """The LMDB store under ``data_dir``, opened (:func:`opened`)."""

    def __init__(self, data_dir: str, *, map_size_mb: int = 10240, readonly: bool = False, lock: bool = True):
        super().__init__(data_dir, map_size_mb=map_size_mb, readonly=readonly, lock=lock)
        opened(self, readonly)


def open_store(url: Any, data_dir: str, *, map_size_mb: int = 10240, readonly: bool = False, lock: bool = True) -> Any:
    """Open the store ``url`` names (a URL string, or a Config whose
    ``storage.url`` it is): ``"lmdb"``/None/"" is the LMDB store under
    ``data_dir``; ``postgresql://…`` the PostgreSQL store (psycopg imported
    only then), ``data_dir`` holding only node-local files. Raises StoreDamaged
    or StoreLocked with a message on failure."""
    capacity_mb = 0
    if hasattr(url, "storage"):  # a Config
        url, capacity_mb = url.storage.url, url.storage.capacity_mb
    if is_pg_url(url):
        if importlib.util.find_spec("psycopg") is None:
            raise StoreDamaged(
                "a PostgreSQL store needs psycopg 3, which is not installed: pip install 'kungfud[postgresql]'"
            ) from None
        from .postgres import PgStore  # the optional extra [postgresql]: psycopg only for a PostgreSQL store

        return PgStore(url, data_dir, readonly=readonly, lock=lock, capacity_mb=capacity_mb)
    return Store(data_dir, map_size_mb=map_size_mb, readonly=readonly, lock=lock)
