"""A node's link to its siblings: announcements after local commits, wake-ups
from remote ones, and the safety poll that covers a lost announcement.

It knows nothing of the store or the protocol: the runtime gives it
``last_seq`` (the store's newest seq) and two wake-ups, ``feed(agents | None)``
and ``clock()``. With a single node (``Nodes.shared`` False) it does nothing
and starts no thread. It also carries what the server saw (``last_seen_at``,
D175): ``share_seen`` out, ``seen`` (set by the server) in.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable, Sequence

from . import Nodes

__all__ = ["Link", "POLL_S"]

log = logging.getLogger("kungfud.nodes")

POLL_S = 1.0  # the safety poll: has the store moved past what this node knows?


class Link:
    def __init__(self, nodes: Nodes, last_seq: Callable[[], int]):
        self.nodes = nodes
        self._last_seq = last_seq
        self.feed: Callable[[list[str] | None], None] | None = None  # set by the server
        self.clock: Callable[[], None] | None = None  # set by the runtime
        self.seen: Callable[[dict[str, int] | None], None] | None = None  # set by the server (attach_seen)
        self.known = 0  # the newest seq this node has been told about (local or remote)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.polls_moved = 0

    def start(self) -> None:
        if not self.nodes.shared:
            return
        try:
            self.known = self._last_seq()
        except Exception:
            log.exception("reading the last seq failed")
        self.nodes.bus.start(self.on_remote, self.on_seen)
        self._thread = threading.Thread(target=self._poll, name="kungfud-nodes-poll", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.nodes.bus.close()
        self.nodes.lease.release()

    # --- local commits (the writer's thread) ---------------------------------------

    def committed(self, seq: int, agents: Sequence[str], dues: bool) -> None:
        if seq > self.known:
            self.known = seq
        self.nodes.bus.announce(seq, agents, dues)

    # --- other nodes ---------------------------------------------------------------

    def on_remote(self, seq: int, agents: list[str] | None, dues: bool) -> None:
        if seq > self.known:
            self.known = seq
        feed = self.feed
        if feed is not None and (agents is None or agents):
            feed(agents)
        if dues and self.clock is not None:
            self.clock()

    # --- what the servers saw (last_seen_at, D175) -----------------------------------------

    def attach_seen(self, seen: Callable[[dict[str, int] | None], None]) -> None:
        """The server hears what other nodes saw from now on, and asks them
        for all they saw before (D177)."""
        self.seen = seen
        if self.nodes.shared:
            self.nodes.bus.hello()

    def share_seen(self, seen: dict[str, int]) -> None:
        self.nodes.bus.announce_seen(seen)

    def on_seen(self, seen: dict[str, int] | None) -> None:
        if self.seen is not None:
            self.seen(seen)

    def _poll(self) -> None:
        while not self._stop.wait(POLL_S):
            try:
                top = self._last_seq()
            except Exception:  # the store is unavailable: try again next round
                continue
            if top > self.known:
                self.polls_moved += 1
                self.on_remote(top, None, True)
