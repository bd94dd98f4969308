"""Revoked keys: the connections that authenticated with a key their agent no
longer has (WIRE.md "Operating a deployment"; D156, D185; 1.3 "Scoped keys").

After ``agent.rotate_key``, ``admin.agent.reset_key``, ``agent.key.revoke`` or
a deactivation (which revokes every scoped key) commits, every connection of
the agent that authenticated with a key it no longer has stops acting as it at
once and is closed with 4001 once its queued replies are sent — on every node:
this one checks its own connections and the runtime tells the others, which
check theirs when they are woken. A scoped key that expires is closed the same
way by each node when its time comes (:meth:`Revocation.start`'s sweep, on the
daemon's clock).
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

#: Actions that take a key from an agent.
KEY_CHANGES = frozenset({"agent.rotate_key", "admin.agent.reset_key", "agent.key.revoke", "admin.agent.set_status"})
CLOSE_KEY_REVOKED = 4001
SWEEP_S = 1.0  # how often each node looks for scoped keys that expired


class Revocation:
    """Closes this node's connections whose key was rotated or reset; shares
    the server's set of connections and its feed (event loop only)."""

    def __init__(self, runtime: Runtime, connections: set[Conn], feed: Feed):
        self.rt = runtime
        self.connections = connections
        self.feed = feed

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Close the connections of scoped keys as they expire (every
        :data:`SWEEP_S`; nothing to do while no such key authenticated)."""

        def sweep() -> None:
            if self.rt.expiring:
                now = self.rt.clock()
                due = {h for h, at in self.rt.expiring.items() if at <= now}
                if due:
                    for h in due:
                        del self.rt.expiring[h]
                    self.drop_stale({c.agent for c in self.connections if c.key_hash in due})
            loop.call_later(SWEEP_S, sweep)

        loop.call_later(SWEEP_S, sweep)

    def key_changed(self, result: bytes, caller: str | None = None) -> None:
        """A key change committed here (its receipt ``result``, by ``caller``):
        drop the old key's connections on this node and tell the other nodes
        (D156). ``agent.key.revoke``'s result names no agent: its caller's."""
        agent = msgspec.json.decode(result).get("agent") or caller
        if agent is None:
            return
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
        a key that no longer authenticates their agent (one snapshot for all)."""
        try:
            current = self.rt.key_hashes_of(agents)
        except StoreUnavailable:  # checked again at the next wake-up or poll
            return
        for conn in list(self.connections):
            if conn.agent in current and conn.key_hash not in current[conn.agent]:
                self.feed.unsubscribe(conn)
                conn.agent = conn.key_hash = None
                asyncio.ensure_future(self._close(conn))

    async def _close(self, conn: Conn) -> None:
        await conn.flush(asyncio.get_running_loop().time() + 1.0)
        await conn.close(CLOSE_KEY_REVOKED, "this agent key was rotated or reset, or revoked or expired; connect with a current key")
