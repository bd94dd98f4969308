"""Notifications (WIRE.md "Event"; never needed for correctness, R8-21): who is
subscribed, the replay of a ``subscribe {since}`` from the durable feed, and the
fan-out of live events. Touched only on the event loop.

A subscriber sees its events in order, with no gap and no duplicate (every
event has its own seq, WIRE.md 1.2): the replay goes a page (REPLAY_PAGE
events) per loop turn, and goes live in the same step as its last page,
dropping live events at or below the seq that page read. A
slow subscriber never slows anyone else: above ``max_pending_events`` queued
frames it is dropped with a reason, and recovers with ``subscribe {since}`` or
``turn``.

With several nodes on one store (``Runtime.nodes.shared``, issue 16) live
events are not pushed from local commits: another node's seq 10 may commit
before this node's 11 yet be announced after it. A commit (local or remote)
only wakes the agents it names; on the next loop turn the feed reads each
woken agent's events after the lowest floor of its subscribers from one
snapshot, which holds every seq up to its newest (seqs are allocated in commit
order under the writer exclusion), sends each subscriber those above its own
floor, and raises every floor to that newest seq. One node keeps the direct
push (no extra read).

A subscriber with ``open_tasks`` (WIRE.md 1.2 "Open Tasks, announced") also
gets the ``task_offered`` events offered to it, merged into its own in seq
order. The open-Task stream is stored once (published under
:data:`OPEN_TASKS`), and who may hear an offer is the store's to say, so such
a subscriber is always served by that read (one node too): a commit naming
it or the open stream wakes it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from .. import wire
from ..errors import StoreUnavailable
from ..actors import OPEN_TASKS, Runtime
from ..event_kinds import frame as event_frame  # the one framing, the webhooks' too
from .connection import Conn

__all__ = ["Feed", "REPLAY_PAGE"]

log = logging.getLogger("kungfud.server")

# A stored a2a_task event begins so (event_kinds: the tag first).
_A2A_TASK = b'{"event":"a2a_task"'
REPLAY_PAGE = 128  # events a `subscribe {since}` replay sends per loop turn
LIVE_PAGE = 512  # events per agent a shared-store delivery reads per loop turn


class Feed:
    def __init__(self, runtime: Runtime, metrics: Any, max_pending_events: int = 1000):
        self.rt = runtime
        self.metrics = metrics
        self.max_pending_events = max_pending_events
        self.subscribers: dict[str, set[Conn]] = {}
        self.shared = runtime.nodes.shared
        self._woken: set[str] = set()  # agents to read for (shared store)
        self._all_woken = False  # "maybe anyone": every subscribed agent
        self._scheduled = False

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
        conn.open_tasks = args.open_tasks
        conn.a2a = args.a2a
        conn.send(wire.encode_ok(req_id, wire.encode({"subscribed": True, "seq": newest})))
        after = self._replay_page(conn, conn.agent, newest if args.since is None else args.since)
        if after is not None:
            conn.replay = asyncio.ensure_future(self._replay_rest(conn, conn.agent, after))

    def _replay_page(self, conn: Conn, agent: str, after: int) -> int | None:
        """Send one page of ``agent``'s events after seq ``after``. When they are
        all sent, go live in the same step (no event can fall in between: live
        events at or below the seq read here are dropped) and return None;
        else return the seq to continue after."""
        top, page, more, reached = self.rt.events_page(agent, after, REPLAY_PAGE, open_tasks=conn.open_tasks)
        for seq, event in page:
            if not conn.a2a and event.startswith(_A2A_TASK):
                continue  # not asked for (WIRE.md 1.3: subscribe {a2a: true}); the position moves past it
            self.metrics.events_sent += 1  # replayed frames count like live ones
            conn.send(event_frame(seq, event))
        if more:
            return reached  # a page ends at REPLAY_PAGE events or at rows passed over (D331)
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
            try:
                after = self._replay_page(conn, agent, after)
            except StoreUnavailable:  # the store's server is down: the same page again shortly
                await conn.until_closed(asyncio.sleep(0.5))

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
        if self.shared:
            self.wake([agent for agent, _, _ in events])
            return
        woken: list[str] = []
        for agent, seq, event in events:
            if agent == OPEN_TASKS:
                woken.append(agent)
                continue
            for conn in list(self.subscribers.get(agent, ())):
                if conn.open_tasks:  # read from the store, merged with the open stream
                    woken.append(agent)
                else:
                    self._send(conn, seq, event)
        if woken:
            self.wake(woken)

    def _reads(self, conn: Conn) -> bool:
        """Whether ``conn`` is served by reads from the store, not direct push."""
        return self.shared or conn.open_tasks

    def _send(self, conn: Conn, seq: int, event: bytes) -> None:
        if conn.floor is None or seq <= conn.floor or conn.closed:
            return
        if not conn.a2a and event.startswith(_A2A_TASK):
            return  # a2a_task events only for `subscribe {a2a: true}` (WIRE.md 1.3)
        if conn.outbox.qsize() >= self.max_pending_events:
            self.metrics.slow_subscribers_dropped += 1
            conn.drop()
            asyncio.ensure_future(
                conn.close(1008, "subscriber fell behind; reconnect and subscribe with since, or read turn")
            )
            return
        self.metrics.events_sent += 1
        conn.send(event_frame(seq, event))

    # --- shared store: delivery read from the store ----------------------------------

    def wake(self, agents: list[str] | None) -> None:
        """New events may be stored for ``agents`` (None: for anyone;
        :data:`OPEN_TASKS`: for every open-Task subscriber), by this node or
        another; read them on the next loop turn (event loop)."""
        if agents is None:
            self._all_woken = True
        else:
            if OPEN_TASKS in agents:
                agents = [a for a, conns in self.subscribers.items() if any(c.open_tasks for c in conns)] + agents
            self._woken.update(agents)
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._deliver)

    def _deliver(self) -> None:
        self._scheduled = False
        woken = set(self.subscribers) if self._all_woken else self._woken
        self._woken, self._all_woken = set(), False
        # One read per (agent, open_tasks): the lowest floor of those subscribers.
        floors: dict[tuple[str, bool], int] = {}
        for agent in woken:
            for c in self.subscribers.get(agent, ()):
                if c.floor is not None and not c.closed and self._reads(c):
                    key = (agent, c.open_tasks)
                    floors[key] = min(floors.get(key, c.floor), c.floor)
        if not floors:
            return
        try:
            top, pages = self.rt.events_after(floors, LIVE_PAGE)
        except StoreUnavailable:  # the store's server is down: the safety poll wakes us again
            return
        except Exception:
            log.exception("reading the event feed failed")
            return
        for (agent, open_tasks), (page, more, read_to) in pages.items():
            conns = [c for c in self.subscribers.get(agent, ()) if c.open_tasks == open_tasks and self._reads(c)]
            for seq, event in page:
                for conn in conns:
                    self._send(conn, seq, event)
            # The page holds every event of this stream up to the seq it read to (or, whole, up to top).
            reached = read_to if more else top
            for conn in conns:
                if conn.floor is not None and conn.floor < reached:
                    conn.floor = reached
            if more:
                self.wake([agent])
