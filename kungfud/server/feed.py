"""Notifications (WIRE.md "Event"; never needed for correctness, R8-21): who is
subscribed, the replay of a ``subscribe {since}`` from the durable feed, and the
fan-out of live events. Touched only on the event loop.

A subscriber sees its events in order, with no gap and no duplicate: the replay
goes a page (REPLAY_PAGE events) per loop turn, and goes live in the same step
as its last page, dropping live events at or below the seq that page read. A
slow subscriber never slows anyone else: above ``max_pending_events`` queued
frames it is dropped with a reason, and recovers with ``subscribe {since}`` or
``turn``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from .. import wire
from ..actors import Runtime
from .connection import Conn

__all__ = ["Feed", "event_frame", "REPLAY_PAGE"]

REPLAY_PAGE = 128  # events a `subscribe {since}` replay sends per loop turn


def event_frame(seq: int, event: bytes) -> bytes:
    # Stored events are `{"event":…,"data":…}`; the frame adds the seq.
    return b'{"seq":%d,' % seq + event[1:]


class Feed:
    def __init__(self, runtime: Runtime, metrics: Any, max_pending_events: int = 1000):
        self.rt = runtime
        self.metrics = metrics
        self.max_pending_events = max_pending_events
        self.subscribers: dict[str, set[Conn]] = {}

    def subscribe(self, conn: Conn, req_id: Any, args: wire.SubscribeArgs) -> None:
        """Reply with the newest seq, replay the caller's events after ``since``
        from the durable feed, then stream live ones. The replay waits while
        the client is behind, so a long one holds up neither other connections
        nor this connection's later requests."""
        assert conn.agent is not None
        newest = self.rt.last_seq()
        # Only once the new subscription is sure to start (its args were
        # checked at the wire) does the old one end.
        self.unsubscribe(conn)
        conn.send(wire.encode_ok(req_id, wire.encode({"subscribed": True, "seq": newest})))
        after = self._replay_page(conn, conn.agent, newest if args.since is None else args.since)
        if after is not None:
            conn.replay = asyncio.ensure_future(self._replay_rest(conn, conn.agent, after))

    def _replay_page(self, conn: Conn, agent: str, after: int) -> int | None:
        """Send one page of ``agent``'s events after seq ``after``. When they are
        all sent, go live in the same step (no event can fall in between: live
        events at or below the seq read here are dropped) and return None;
        else return the seq to continue after."""
        top, page, more = self.rt.events_page(agent, after, REPLAY_PAGE)
        for seq, event in page:
            self.metrics.events_sent += 1  # replayed frames count like live ones
            conn.send(event_frame(seq, event))
        if more:
            return page[-1][0]
        conn.floor = top
        conn.subscribed = agent
        conn.replay = None
        self.subscribers.setdefault(agent, set()).add(conn)
        return None

    async def _replay_rest(self, conn: Conn, agent: str, after: int | None) -> None:
        while after is not None:
            await asyncio.sleep(0)  # other connections and this one's requests go first
            while not conn.closed and conn.behind(REPLAY_PAGE):
                await conn.until_closed(asyncio.sleep(0.01))  # the client is behind: let it read
            if conn.closed:
                return
            after = self._replay_page(conn, agent, after)

    def unsubscribe(self, conn: Conn) -> None:
        if conn.replay is not None:
            conn.replay.cancel()
            conn.replay = None
        # Keyed on the agent that subscribed, not on conn.agent: `hello` may
        # have changed who the connection is since.
        agent, conn.subscribed, conn.floor = conn.subscribed, None, None
        if agent is not None:
            subs = self.subscribers.get(agent)
            if subs is not None:
                subs.discard(conn)
                if not subs:
                    del self.subscribers[agent]

    def publish(self, events: list[tuple[str, int, bytes]]) -> None:
        """One commit's events, on the event loop (server/bridge.py brings them)."""
        for agent, seq, event in events:
            for conn in list(self.subscribers.get(agent, ())):
                if conn.floor is None or seq <= conn.floor or conn.closed:
                    continue
                if conn.outbox.qsize() >= self.max_pending_events:
                    self.metrics.slow_subscribers_dropped += 1
                    conn.drop()
                    asyncio.ensure_future(
                        conn.close(1008, "subscriber fell behind; reconnect and subscribe with since, or read turn")
                    )
                    continue
                self.metrics.events_sent += 1
                conn.send(event_frame(seq, event))
