"""The one factory of a store: LMDB under the data directory, or PostgreSQL
(``[storage] url`` / ``--store``; docs/storage.md "PostgreSQL")."""

from __future__ import annotations

import importlib.util
from typing import Any

__all__ = ["open_store", "is_pg_url"]


def is_pg_url(url: str | None) -> bool:
    """Whether ``url`` names a PostgreSQL store (else: LMDB)."""
    return bool(url) and url.split("://", 1)[0] in ("postgresql", "postgres")  # type: ignore[union-attr]


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
            from .integrity import StoreDamaged

            raise StoreDamaged(
                "a PostgreSQL store needs psycopg 3, which is not installed: pip install 'kungfud[postgresql]'"
            ) from None
        from .postgres import PgStore

        return PgStore(url, data_dir, readonly=readonly, lock=lock, capacity_mb=capacity_mb)
    from .store import Store

    return Store(data_dir, map_size_mb=map_size_mb, readonly=readonly, lock=lock)
