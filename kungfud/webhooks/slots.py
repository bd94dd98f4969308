"""POST slots, shared fairly (D330; reviews/security.md round 4 finding 1): a
slow or dead receiver costs its own agent's deliveries, never another's.

One FIFO pool of ``[webhooks] concurrency`` slots let receivers that answer
just inside the 10 s limit hold every slot, so an honest agent's event waited
N / 16 × 10 s. Now slots are granted per **origin** (the receiving
``scheme://host:port``):

- **Round robin between origins.** Waiting deliveries queue per origin; a
  freed slot goes to the next origin in turn, so one origin with many waiting
  agents never stands in front of another origin's one. Within an origin the
  queue is in arrival order, and each agent has at most one delivery waiting
  (the runner's one task per agent): round robin between agents.
- **A cap per origin and per host**: at most ``concurrency // 4`` fast slots
  to one origin, ``concurrency // 2`` to all the origins of one host (an
  attacker's many ports on one host are one host).
- **Slow receivers get fewer slots.** A POST still running after ``SLOW_S``
  gives its slot back to the fast pool and is counted in the slow pool, and its
  origin is *slow* for ``SLOW_MEMORY_S`` after its last slow answer (or
  timeout). A slow origin's POSTs wait for the slow pool (``concurrency // 2``
  slots for all slow origins together) and hold one at a time. So the fast
  pool is taken for at most ``SLOW_S`` by any POST, and receivers that answer
  promptly always find it turning over.

The destination's name is resolved before a slot is asked for (post.py,
guard.py): a slow resolver holds none. Runs on the event loop only.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict, deque
from contextlib import asynccontextmanager
from typing import AsyncIterator, Callable

__all__ = ["Slots", "SLOW_S", "SLOW_MEMORY_S"]

SLOW_S = 1.0  # a POST running longer than this is a slow receiver's (docs/webhooks.md: answer at once, then work)
SLOW_MEMORY_S = 60.0  # an origin stays slow this long after its last slow answer
MAX_ORIGINS = 10_000  # idle origins beyond this are forgotten (oldest first)


class _Origin:
    __slots__ = ("waiters", "in_flight", "slow_until", "used_at")

    def __init__(self) -> None:
        self.waiters: deque[asyncio.Future] = deque()
        self.in_flight = 0
        self.slow_until = 0.0
        self.used_at = 0.0


class _Ticket:
    __slots__ = ("origin", "host", "slow", "started")

    def __init__(self, origin: str, host: str, slow: bool, started: float):
        self.origin = origin
        self.host = host
        self.slow = slow  # counted in the slow pool (else in the fast pool and its host's count)
        self.started = started


def _host(origin: str) -> str:
    """``scheme://host:port`` → ``host``."""
    return origin.split("://", 1)[-1].rsplit(":", 1)[0]


class Slots:
    def __init__(self, concurrency: int, clock: Callable[[], float] = time.monotonic, slow_s: float = SLOW_S):
        self.fast_total = concurrency
        self.slow_total = max(1, concurrency // 2)
        self.per_origin = max(1, concurrency // 4)
        self.per_host = max(1, concurrency // 2)
        self.slow_s = slow_s
        self.clock = clock
        self.fast_used = 0
        self.slow_used = 0
        self.origins: dict[str, _Origin] = {}
        self.host_fast: dict[str, int] = {}  # host -> fast slots its origins hold
        self.ring: OrderedDict[str, None] = OrderedDict()  # origins with waiters, next in turn first

    @property
    def max_connections(self) -> int:
        """At most this many POSTs at once: the fast pool, the slow pool, and
        the fast pool's POSTs that turned slow while the slow pool was full."""
        return 2 * self.fast_total + self.slow_total

    def is_slow(self, origin: str) -> bool:
        o = self.origins.get(origin)
        return o is not None and o.slow_until > self.clock()

    @asynccontextmanager
    async def slot(self, origin: str) -> AsyncIterator[None]:
        """Hold a slot for one POST to ``origin`` (``scheme://host:port``)."""
        ticket = await self._acquire(origin)
        watch = asyncio.get_running_loop().call_later(self.slow_s, self._turned_slow, ticket)
        try:
            yield
        finally:
            watch.cancel()
            self._release(ticket)

    async def _acquire(self, origin: str) -> _Ticket:
        o = self.origins.get(origin)
        if o is None:
            self._forget_idle()
            o = self.origins[origin] = _Origin()
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        o.waiters.append(fut)
        self.ring.setdefault(origin, None)
        self._grant()
        try:
            return await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self._release(fut.result())  # granted as it was cancelled
            else:
                try:
                    o.waiters.remove(fut)
                except ValueError:
                    pass
                if not o.waiters:
                    self.ring.pop(origin, None)
            raise

    def _grant(self) -> None:
        """Give free slots to waiting origins, in turn."""
        progress = True
        while progress and self.ring:
            if self.fast_used >= self.fast_total and self.slow_used >= self.slow_total:
                return  # nothing to give: no walk of the waiting origins
            progress = False
            now = self.clock()
            for origin in list(self.ring):
                o = self.origins[origin]
                while o.waiters and o.waiters[0].done():  # cancelled while waiting
                    o.waiters.popleft()
                if not o.waiters:
                    del self.ring[origin]
                    continue
                slow = o.slow_until > now
                if slow:
                    if o.in_flight >= 1 or self.slow_used >= self.slow_total:
                        continue
                    self.slow_used += 1
                else:
                    host = _host(origin)
                    if (
                        o.in_flight >= self.per_origin or self.fast_used >= self.fast_total
                        or self.host_fast.get(host, 0) >= self.per_host
                    ):
                        continue
                    self.fast_used += 1
                    self.host_fast[host] = self.host_fast.get(host, 0) + 1
                o.in_flight += 1
                o.used_at = now
                o.waiters.popleft().set_result(_Ticket(origin, _host(origin), slow, now))
                self.ring.move_to_end(origin)  # its next waiter comes after every other origin's
                if not o.waiters:
                    del self.ring[origin]
                progress = True
                break  # start the next turn from the front: the ring's order is the fairness

    def _turned_slow(self, ticket: _Ticket) -> None:
        """A POST ran past ``slow_s``: its origin is slow, and its fast slot is free for others."""
        o = self.origins.get(ticket.origin)
        if o is not None:
            o.slow_until = self.clock() + SLOW_MEMORY_S
        if not ticket.slow:
            ticket.slow = True
            self.fast_used -= 1
            self._host_freed(ticket.host)
            self.slow_used += 1
            self._grant()

    def _host_freed(self, host: str) -> None:
        n = self.host_fast.get(host, 0) - 1
        if n > 0:
            self.host_fast[host] = n
        else:
            self.host_fast.pop(host, None)

    def _release(self, ticket: _Ticket) -> None:
        o = self.origins.get(ticket.origin)
        if o is not None:
            now = self.clock()
            o.in_flight -= 1
            o.used_at = now
            if now - ticket.started >= self.slow_s:  # its last slow answer (or timeout) starts the memory
                o.slow_until = now + SLOW_MEMORY_S
        if ticket.slow:
            self.slow_used -= 1
        else:
            self.fast_used -= 1
            self._host_freed(ticket.host)
        self._grant()

    def _forget_idle(self) -> None:
        if len(self.origins) < MAX_ORIGINS:
            return
        now = self.clock()
        idle = sorted(
            (o.used_at, name) for name, o in self.origins.items()
            if not o.waiters and not o.in_flight and o.slow_until <= now
        )
        for _, name in idle[: max(1, len(idle) // 2)]:
            del self.origins[name]
