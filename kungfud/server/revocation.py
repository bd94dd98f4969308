"""Revoked keys: the connections that authenticated with a key their agent no
longer has (WIRE.md "Operating a deployment"; D156, D185).

After ``agent.rotate_key`` or ``admin.agent.reset_key`` commits, every
connection of the agent that authenticated with an old key stops acting as it
at once and is closed with 4001 once its queued replies are sent — on every
node: this one checks its own connections and the runtime tells the others,
which check theirs when they are woken.
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec

from ..actors import Runtime
from ..errors import StoreUnavailable
from .connection import Conn
from .feed import Feed

__all__ = ["Revocation", "KEY_CHANGES", "CLOSE_KEY_REVOKED"]

#: Actions that give an agent a new key.
KEY_CHANGES = frozenset({"agent.rotate_key", "admin.agent.reset_key"})
CLOSE_KEY_REVOKED = 4001


class Revocation:
    """Closes this node's connections whose key was rotated or reset; shares
    the server's set of connections and its feed (event loop only)."""

    def __init__(self, runtime: Runtime, connections: set[Conn], feed: Feed):
        self.rt = runtime
        self.connections = connections
        self.feed = feed

    def key_changed(self, result: bytes) -> None:
        """A rotation or reset committed here (its receipt ``result``): drop the
        old key's connections on this node and tell the other nodes (D156)."""
        agent = msgspec.json.decode(result).get("agent")
        self.drop_stale([agent])
        self.rt.announce_agents([agent])

    def recheck(self, agents: list[str] | None) -> None:
        """Another node committed for ``agents`` (None: maybe anyone): maybe a
        key that changed."""
        held = {c.agent for c in self.connections if c.agent is not None}
        check = held if agents is None else held.intersection(agents)
        if check:
            self.drop_stale(check)

    def drop_stale(self, agents: Any) -> None:
        """Close this node's connections of ``agents`` that authenticated with
        a key that is no longer their agent's key (one snapshot for all)."""
        try:
            current = self.rt.key_hashes_of(agents)
        except StoreUnavailable:  # checked again at the next wake-up or poll
            return
        for conn in list(self.connections):
            if conn.agent in current and conn.key_hash != current[conn.agent]:
                self.feed.unsubscribe(conn)
                conn.agent = conn.key_hash = None
                asyncio.ensure_future(self._close(conn))

    async def _close(self, conn: Conn) -> None:
        await conn.flush(asyncio.get_running_loop().time() + 1.0)
        await conn.close(CLOSE_KEY_REVOKED, "this agent key was rotated or reset; connect with the new key")
