"""Per-agent sliding-window rate limits (L4-5, L4-6, §12).

A rate-limited request is rejected before it reaches an actor, so it writes
nothing and creates no obligation (L4-6). Replays and reads are exempt.
"""

from __future__ import annotations

import collections
from typing import Callable

__all__ = ["SlidingWindow", "TokenBucket"]


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
