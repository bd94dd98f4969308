"""When this deployment last saw each agent: ``last_seen_at`` in
``admin.agent.list`` (WIRE.md "Operating a deployment"; docs/decisions.md D32,
amended by D175–D177).

Each node keeps its own map in memory (never in the store): an agent is seen
when it authenticates a connection or sends a request on one. With other nodes
on the store, what this node saw since its last share is handed to them
coalesced, at most one share every ``every_s`` (not one per request): the
first sighting after a quiet interval goes at the end of the loop turn, the
next ones wait until ``every_s`` after that share. At most ``most`` agents a
share, in the order first seen (the rest go in the next one);
what they saw is merged here by max. Times are wall-clock milliseconds, so the
nodes' clock skew shows through. A single node (the default) never starts
sharing: no timer, nothing kept beside the map.

Event loop only.
"""

from __future__ import annotations

import asyncio
from typing import Callable

from ..conventions import merge_latest

__all__ = ["LastSeen", "SHARE_EVERY_S", "SHARE_MOST"]

SHARE_EVERY_S = 1.0  # at most one share a second per node
SHARE_MOST = 384  # agents a share: 4 messages of 96 (kungfud/nodes SEEN_PER_MESSAGE)


class LastSeen:
    def __init__(self) -> None:
        self.map: dict[str, int] = {}  # agent -> ms; what the reads use
        self._news: dict[str, int] | None = None  # seen since the last share (None: not sharing)
        self._share: Callable[[dict[str, int]], None] | None = None
        self._call_later: Callable[..., asyncio.TimerHandle] | None = None
        self._now: Callable[[], float] = lambda: 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._last_share = float("-inf")  # when the last share went (the loop's clock)
        self.every_s = SHARE_EVERY_S
        self.most = SHARE_MOST

    def start_sharing(
        self,
        share: Callable[[dict[str, int]], None],
        call_later: Callable[..., asyncio.TimerHandle],
        now: Callable[[], float],
    ) -> None:
        """From now on, what this node sees goes to ``share`` (``{agent: ms}``),
        coalesced with timers from ``call_later`` on the clock ``now`` (the
        event loop's ``call_later`` and ``time``)."""
        self._share, self._call_later, self._now, self._news = share, call_later, now, {}

    def saw(self, agent: str, ms: int) -> None:
        """This node saw ``agent`` at ``ms`` (never moves the time back)."""
        if ms <= self.map.get(agent, -1):
            return
        self.map[agent] = ms
        news = self._news
        if news is not None:
            news[agent] = ms  # an agent already waiting keeps its place (first seen first)
            self._arm()

    def get(self, agent: str) -> int | None:
        return self.map.get(agent)

    def merge(self, seen: dict[str, int] | None) -> None:
        """What another node saw, by max; None: a node joined and asks for all
        this node saw (it goes in the next shares, D177)."""
        if seen is None:
            self._reshare()
            return
        merge_latest(self.map, seen)

    def drain_news(self, most: int | None = None) -> dict[str, int]:
        """Up to ``most`` (None: all) of the agents seen since the last share,
        first seen first, taken out of the news."""
        news = self._news
        if not news:
            return {}
        if most is None or len(news) <= most:
            self._news = {}
            return news
        taken = {}
        for agent in list(news)[:most]:
            taken[agent] = news.pop(agent)
        return taken

    def flush(self) -> None:
        """Share everything not shared yet at once (the node is stopping)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        news = self.drain_news()
        if news and self._share is not None:
            self._share(news)

    # --- sharing -----------------------------------------------------------------------

    def _reshare(self) -> None:
        news = self._news
        if news is None or not self.map:
            return
        for agent, ms in self.map.items():
            news[agent] = ms
        self._arm()

    def _arm(self) -> None:
        if self._timer is None and self._call_later is not None:
            wait = max(0.0, self._last_share + self.every_s - self._now())
            self._timer = self._call_later(wait, self._tick)

    def _tick(self) -> None:
        self._timer = None
        news = self.drain_news(self.most)
        if news and self._share is not None:
            self._last_share = self._now()
            self._share(news)
        if self._news:  # more than one share's worth: the rest in the next
            self._arm()
