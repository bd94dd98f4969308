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

The bus carries a second kind of message beside the commit announcement: what
a node's server saw (``{agent: wall-clock ms}``, for ``last_seen_at``, D175),
coalesced by the server to at most one share a second, split here into
messages of at most ``limit`` bytes (:func:`seen_messages`); an empty one is a
node's hello ("send me all you know", D177).

Nothing here knows the protocol or the store's layout; only this package and
``kungfud/store/postgres/`` import psycopg.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Protocol, Sequence

__all__ = ["Bus", "Lease", "Nodes", "OnRemote", "OnSeen", "single", "open_nodes", "seen_messages", "MAX_AGENTS"]

# on_remote(last_seq, agents with new events or None = "maybe anyone", deadlines added?)
OnRemote = Callable[[int, "list[str] | None", bool], None]

# on_seen({agent: ms} another node saw, or None: a node joined and asks for everything)
OnSeen = Callable[["dict[str, int] | None"], None]

# An announcement names at most this many agents; beyond, it says "maybe anyone".
MAX_AGENTS = 64
# A "seen" message carries at most this many agents: with the longest agent id
# the wire allows (63 characters) that is under 8000 bytes in either encoding.
SEEN_PER_MESSAGE = 96


def seen_messages(seen: Mapping[str, int], encode: Callable[[dict[str, int]], bytes], limit: int) -> list[bytes]:
    """``seen`` as messages of at most ``limit`` bytes each, every entry in one
    of them (``SEEN_PER_MESSAGE`` a message, halved while one is too big); an
    entry that alone is too big cannot be sent and is left out."""
    items = list(seen.items())
    parts = [items[i : i + SEEN_PER_MESSAGE] for i in range(0, len(items), SEEN_PER_MESSAGE)]
    out: list[bytes] = []
    while parts:
        part = parts.pop(0)
        data = encode(dict(part))
        if len(data) <= limit:
            out.append(data)
        elif len(part) > 1:
            half = len(part) // 2
            parts[:0] = [part[:half], part[half:]]
    return out


class Bus(Protocol):
    """Wake-ups between nodes on one store; never needed for correctness."""

    def announce(self, seq: int, agents: Sequence[str], dues: bool) -> None:
        """After a local commit (the writer's thread): tell every other node.
        Never blocks on a peer and never raises."""

    def start(self, on_remote: OnRemote, on_seen: OnSeen | None = None) -> None:
        """Deliver other nodes' announcements to ``on_remote`` and what they
        saw to ``on_seen`` (on a thread of its own)."""

    def announce_seen(self, seen: Mapping[str, int]) -> None:
        """What this node saw since its last share: to every other node (split
        into messages of the bus's size). Never blocks and never raises."""

    def hello(self) -> None:
        """Ask every other node for all it saw (each answers with its next share)."""

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

    def start(self, on_remote: OnRemote, on_seen: OnSeen | None = None) -> None:
        pass

    def announce_seen(self, seen: Mapping[str, int]) -> None:
        pass

    def hello(self) -> None:
        pass

    def close(self) -> None:
        pass


class SoleLease:
    """A single node always holds the lease."""

    def try_acquire(self) -> bool:
        return True

    def release(self) -> None:
        pass


def _sole(name: str, n: int) -> Lease:
    return SoleLease()


@dataclass(frozen=True)
class Nodes:
    """A node's mechanisms. ``shared``: other nodes may commit to this store,
    so live events are delivered from the store in seq order rather than
    pushed from local commits (server/feed.py). ``lease_for(name, n)``: lease
    ``n`` of a family ``name`` beside the deadline lease (the webhook runner's
    shards, D213); a single node holds them all."""

    bus: Bus
    lease: Lease
    shared: bool
    lease_for: Callable[[str, int], Lease] = _sole


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
