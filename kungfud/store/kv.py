"""The key-value layer every backend provides (docs/storage.md "The store
interface"; docs/decisions.md D86, D101).

The store is a set of ordered tables named by :data:`~kungfud.store.layout.DBS`.
Keys and values are bytes; keys sort in unsigned byte order (as LMDB and
PostgreSQL ``bytea`` both compare). Everything above this layer — the named
queries of :class:`~kungfud.store.view.View`, the planner, the write engine,
``check``/rebuild, the format migration and the log's integrity check — is
written once over these two protocols, so a backend implements storage, not
protocol rules. Nothing here imports a storage library.
"""

from __future__ import annotations

from typing import Iterator, Protocol

__all__ = ["Snapshot", "Tx", "prefix_stop"]


class Snapshot(Protocol):
    """One consistent read of every table (a read transaction)."""

    def get(self, table: str, key: bytes) -> bytes | None: ...

    def scan(
        self, table: str, start: bytes = b"", stop: bytes | None = None, *, reverse: bool = False, values: bool = True
    ) -> Iterator[tuple[bytes, bytes]]:
        """The rows with ``start <= key < stop`` (``stop`` None: to the table's
        end), ascending; with ``reverse`` the same range descending. Lazy: a
        caller may stop early. With ``values=False`` each value is ``b""``."""
        ...

    def count(self, table: str) -> int:
        """Rows in ``table``."""
        ...


class Tx(Snapshot, Protocol):
    """One open write transaction (or nested transaction / savepoint): it reads
    its own writes. The planner only reads through it; the write engine writes a
    plan through it."""

    def put(self, table: str, key: bytes, value: bytes) -> None:
        """Insert or replace; a ``log`` row is never replaced (append only)."""

    def delete(self, table: str, key: bytes) -> None:
        """Remove the row of ``key`` if there is one."""

    def clear(self, table: str) -> None:
        """Remove every row of ``table`` (rebuild, migration)."""


def prefix_stop(prefix: bytes) -> bytes | None:
    """The first key past every key that starts with ``prefix`` (a scan's
    ``stop``); None when there is none (empty, or only 0xff bytes)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes((stripped[-1] + 1,))
