"""Node mechanisms: what several daemon processes ("nodes") on one store need
beyond the store itself (issue 16, docs/scaling.md "How nodes agree").

Two small interfaces, each with a single-node, an LMDB (sibling workers on one
host) and a PostgreSQL implementation:

- :class:`Bus` — wake-ups between nodes: after a local commit a node announces
  its last seq, the agents that got events and whether deadlines were added;
  the others wake their feeds and deadline clocks. Never needed for
  correctness: a lost announcement is covered by the safety poll
  (:class:`~kungfud.nodes.link.Link`), and everything is read from the store.
- :class:`Lease` — who runs the deadline clock: at most one live node holds it;
  a dead holder's lease is released by the kernel (LMDB: ``flock``) or by the
  server ending its session (PostgreSQL: an advisory lock).

Nothing here knows the protocol or the store's layout; only this package and
``kungfud/store/postgres/`` import psycopg.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

__all__ = ["Bus", "Lease", "Nodes", "OnRemote", "single", "open_nodes", "MAX_AGENTS"]

# on_remote(last_seq, agents with new events or None = "maybe anyone", deadlines added?)
OnRemote = Callable[[int, "list[str] | None", bool], None]

# An announcement names at most this many agents; beyond, it says "maybe anyone".
MAX_AGENTS = 64


class Bus(Protocol):
    """Wake-ups between nodes on one store; never needed for correctness."""

    def announce(self, seq: int, agents: Sequence[str], dues: bool) -> None:
        """After a local commit (the writer's thread): tell every other node.
        Never blocks on a peer and never raises."""

    def start(self, on_remote: OnRemote) -> None:
        """Deliver other nodes' announcements to ``on_remote`` (on a thread of its own)."""

    def close(self) -> None: ...


class Lease(Protocol):
    """Who runs the deadline clock: at most one live node at a time."""

    def try_acquire(self) -> bool:
        """Non-blocking; True while held."""

    def release(self) -> None: ...


class NoBus:
    """A single node: nobody to tell, nobody to hear."""

    def announce(self, seq: int, agents: Sequence[str], dues: bool) -> None:
        pass

    def start(self, on_remote: OnRemote) -> None:
        pass

    def close(self) -> None:
        pass


class SoleLease:
    """A single node always holds the lease."""

    def try_acquire(self) -> bool:
        return True

    def release(self) -> None:
        pass


@dataclass(frozen=True)
class Nodes:
    """A node's mechanisms. ``shared``: other nodes may commit to this store,
    so live events are delivered from the store in seq order rather than
    pushed from local commits (server/feed.py)."""

    bus: Bus
    lease: Lease
    shared: bool


def single() -> Nodes:
    """The default: one process owns the store (no extra work on any path)."""
    return Nodes(NoBus(), SoleLease(), shared=False)


def open_nodes(store_url: str | None, data_dir: str, workers: int = 1) -> Nodes:
    """A node's mechanisms for its store: PostgreSQL (``postgresql://…``) always
    shares its store (another host may join at any time); LMDB shares it only
    among ``workers`` > 1 sibling processes on ``data_dir``; one LMDB process
    gets :func:`single`."""
    if store_url and store_url.split("://", 1)[0] in ("postgresql", "postgres"):
        from .pg import pg_nodes

        return pg_nodes(store_url)
    if workers > 1:
        from .lmdb import lmdb_nodes

        return lmdb_nodes(data_dir)
    return single()
