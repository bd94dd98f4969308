"""Admission policy (L4-5, L4-6, §12 R12-7): per-agent sliding-window and
token-bucket rate limits, and :class:`Intake`, the one object that decides
whether an action may go on to its actor.

A rate-limited request is rejected before it reaches an actor, so it writes
nothing and creates no obligation (L4-6). Replays are exempt; reads have their
own budget (a token bucket).
"""

from __future__ import annotations

import collections
from typing import Any, Callable, NamedTuple

from ..errors import Rejection

__all__ = ["SlidingWindow", "TokenBucket", "Intake", "Admitted"]


class SlidingWindow:
    def __init__(self, limit: int, window_s: float, clock: Callable[[], float]):
        self.limit = limit
        self.window_s = window_s
        self.clock = clock
        self._hits: dict[str, collections.deque[float]] = {}
        self._sweep_at = 1024

    def _prune(self, who: str) -> collections.deque[float]:
        q = self._hits.get(who)
        if q is None:
            if len(self._hits) >= self._sweep_at:
                self._sweep()
            q = self._hits[who] = collections.deque()
        horizon = self.clock() - self.window_s
        while q and q[0] <= horizon:
            q.popleft()
        return q

    def allow(self, who: str) -> bool:
        """Count one hit for ``who`` if under the limit; False when it is over."""
        q = self._prune(who)
        if len(q) >= self.limit:
            return False
        q.append(self.clock())
        return True

    def count(self, who: str) -> int:
        """Hits of ``who`` inside the window (counts nothing)."""
        return len(self._prune(who))

    def full(self, who: str) -> bool:
        """True when ``who`` has used up the window (counts nothing)."""
        return len(self._prune(who)) >= self.limit

    def hit(self, who: str) -> float:
        """Count one event for ``who`` unconditionally; returns its time (for
        :meth:`refund`)."""
        at = self.clock()
        self._prune(who).append(at)
        return at

    def refund(self, who: str, at: float | None = None) -> None:
        """Take back a hit of ``who`` (a request that turned out to be exempt,
        such as a replay): the one counted at ``at``, else the newest. A hit
        that has already left the window is not taken back twice."""
        q = self._hits.get(who)
        if not q:
            return
        if at is None:
            q.pop()
            return
        try:
            q.remove(at)
        except ValueError:
            pass

    def _sweep(self) -> None:
        """Forget whoever has no hit inside the window, so the table stays as
        large as the set of recently active callers (connections come and go)."""
        horizon = self.clock() - self.window_s
        self._hits = {who: q for who, q in self._hits.items() if q and q[-1] > horizon}
        self._sweep_at = max(1024, 2 * len(self._hits))

    def __len__(self) -> int:
        return len(self._hits)

    def retry_after(self, who: str) -> float:
        q = self._prune(who)
        return 0.0 if len(q) < self.limit else max(0.0, q[0] + self.window_s - self.clock())


class TokenBucket:
    """A rate limit in constant memory per caller, for limits high enough that
    a window of timestamps would cost real memory (reads): ``limit`` requests
    at once, refilled evenly over ``window_s``, so never more than ``limit``
    plus the refill of the elapsed time."""

    def __init__(self, limit: int, window_s: float, clock: Callable[[], float]):
        self.limit = limit
        self.rate = limit / window_s
        self.clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # who -> (tokens, at)
        self._sweep_at = 1024

    def _tokens(self, who: str, now: float) -> float:
        tokens, at = self._buckets.get(who, (float(self.limit), now))
        return min(float(self.limit), tokens + (now - at) * self.rate)

    def allow(self, who: str) -> bool:
        now = self.clock()
        tokens = self._tokens(who, now)
        if tokens < 1.0:
            self._buckets[who] = (tokens, now)
            return False
        if who not in self._buckets and len(self._buckets) >= self._sweep_at:
            self._sweep(now)
        self._buckets[who] = (tokens - 1.0, now)
        return True

    def retry_after(self, who: str) -> float:
        tokens = self._tokens(who, self.clock())
        return 0.0 if tokens >= 1.0 else (1.0 - tokens) / self.rate

    def _sweep(self, now: float) -> None:
        """Forget full buckets: they hold nothing a fresh one would not."""
        self._buckets = {w: b for w, b in self._buckets.items() if self._tokens(w, now) < self.limit}
        self._sweep_at = max(1024, 2 * len(self._buckets))

    def __len__(self) -> int:
        return len(self._buckets)


_FAILED_JOIN = frozenset({"not_found", "forbidden", "conflict"})  # the codes that make a join a failed one
_ALL = "*"  # the key of the daemon-wide windows


class Admitted(NamedTuple):
    """What an admitted action counted, to be settled by its outcome."""

    limiter_key: str  # the agent, or the peer address for agent.register
    joiner: tuple[str, float, str, float] | None  # a join: (agent, its hit, its address, the address's hit)


class Intake:
    """Admission policy for actions, one object for every budget the server
    keeps before an action reaches an actor. A refused action writes nothing and
    creates no obligation (L4-6); the server still answers it from its receipt
    when one exists, so replays are exempt (L4-5).

    - ``actions_per_minute`` per agent (per peer address for ``agent.register``,
      which has no agent), a sliding window; a request that turns out to be a
      replay is given back (L4-5).
    - ``registrations_per_minute`` daemon-wide for ``agent.register``.
    - Failed joins (§12 R12-7): after ``failed_joins_per_window`` failed joins
      by an agent, every join by it waits, valid token or not. Beyond that,
      ``failed_joins_total_per_window`` failed joins from one peer address
      (IPv6: its /64) hold every join from that address by an agent that has
      itself failed a join in the window (D25: an admission token names no
      Thread until it matches, so the bound against guessing is one budget all
      Threads share; D230: kept per address, and agents with no failed join
      exempt, so nobody can spend it to lock out the joins of others). A
      join is counted as a failure when it arrives and given back when it
      turns out not to fail, so joins in flight cannot outrun the budget
      (pipelining).
    """

    def __init__(self, limits: Any, clock: Callable[[], float]):
        self.limits = limits
        self.actions = SlidingWindow(limits.actions_per_minute, 60.0, clock)
        self.failed_joins = SlidingWindow(limits.failed_joins_per_window, float(limits.failed_join_window_s), clock)
        self.failed_joins_all = SlidingWindow(
            limits.failed_joins_total_per_window, float(limits.failed_join_window_s), clock
        )
        self.registrations = SlidingWindow(limits.registrations_per_minute, 60.0, clock)

    def admit(self, op: str, caller: str | None, peer: Callable[[], str]) -> Admitted | Rejection:
        """Count action ``op`` by ``caller`` (None: ``agent.register``, counted
        against ``peer()``), or refuse it with ``rate_limited``."""
        limiter_key = caller if caller is not None else peer()
        if not self.actions.allow(limiter_key):
            wait = self.actions.retry_after(limiter_key)
            return Rejection.rate_limited(
                f"over {self.limits.actions_per_minute} actions per minute; retry in {wait:.0f} s"
            )
        if op == "agent.register" and not self.registrations.allow(_ALL):
            self.actions.refund(limiter_key)  # answered before any action: none taken
            wait = self.registrations.retry_after(_ALL)
            return Rejection.rate_limited(f"too many registrations on this daemon; retry in {wait:.0f} s")
        joiner = None
        if op == "thread.join" and caller is not None:
            address = peer()
            if self.failed_joins.full(caller):
                self.actions.refund(limiter_key)  # answered before any action: none taken
                wait = self.failed_joins.retry_after(caller)
                return Rejection.rate_limited(f"too many failed joins; retry in {wait:.0f} s")
            # D230: the address's budget holds only agents that have failed a
            # join themselves (in flight counts: pipelining cannot outrun it).
            if self.failed_joins.count(caller) and self.failed_joins_all.full(address):
                self.actions.refund(limiter_key)
                wait = self.failed_joins_all.retry_after(address)
                return Rejection.rate_limited(f"too many failed joins from this address; retry in {wait:.0f} s")
            joiner = (caller, self.failed_joins.hit(caller), address, self.failed_joins_all.hit(address))
        return Admitted(limiter_key, joiner)

    def settle(self, op: str, admitted: Admitted, *, replayed: bool, refused: str | None) -> None:
        """Give back what an admitted action turned out not to use: a replay its
        action (and registration) count (L4-5); a join that did not fail
        (``refused``: the rejection code, if any) its failed-join counts."""
        if admitted.joiner is not None and refused not in _FAILED_JOIN:
            agent, at, address, at_address = admitted.joiner
            self.failed_joins.refund(agent, at)
            self.failed_joins_all.refund(address, at_address)
        if replayed:
            self.actions.refund(admitted.limiter_key)
            if op == "agent.register":
                self.registrations.refund(_ALL)
