"""The bridge between the event loop and the actor threads (DESIGN.md "bridge"):
the two ``call_soon_threadsafe`` crossings and the batching that makes them
cheap.

- Out: jobs admitted during one loop turn go to their actors together, one
  message per actor, and the messages of one carrier thread together
  (:meth:`Runtime.submit_turn`): one wake-up per carrier, not one per job.
- Back: an outcome arrives on the writer's (or an actor's) thread; outcomes
  arriving together — a group commit answers many at once — wake the loop once,
  and are finished there in arrival order.
- Events: each commit's events cross to the loop in one call (and the agents
  whose webhook registration it wrote, in another). There they go to the
  server's subscribers and to one :class:`Sink`, which the daemon gives the
  server (the webhook runner, kungfud/webhooks/): the server builds none.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any, Callable, Protocol

from ..actors import Job, Runtime

__all__ = ["Bridge", "Sink", "NO_SINK"]

log = logging.getLogger("kungfud.server")


class Sink(Protocol):
    """Where committed events go besides the server's own subscribers, on the
    event loop: told which agents may have new events (None: maybe anyone),
    and which agents' webhook registrations a commit wrote (D272); started and
    stopped with the server; its figures are part of ``/metrics``
    ((name, type, help, value) each)."""

    def start(self) -> None: ...

    async def stop(self) -> None: ...

    def wake(self, agents: list[str] | None) -> None: ...

    def changed(self, agents: list[str]) -> None: ...

    def figures(self) -> list[tuple[str, str, str, object]]: ...


class _NoSink:
    """A server with no sink (a daemon always gives one)."""

    def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    def wake(self, agents: list[str] | None) -> None:
        pass

    def changed(self, agents: list[str]) -> None:
        pass

    def figures(self) -> list[tuple[str, str, str, object]]:
        return []


NO_SINK: Sink = _NoSink()


class Bridge:
    def __init__(self, runtime: Runtime, finish: Callable[..., None]):
        """``finish(*item)`` completes one reply on the event loop."""
        self.rt = runtime
        self._finish = finish
        self.loop: asyncio.AbstractEventLoop | None = None
        self._outgoing: dict[str, list[Job]] = {}  # jobs of this loop turn, by actor
        self._flush_scheduled = False
        self._replies: list[tuple] = []
        self._replies_lock = threading.Lock()
        self._replies_scheduled = False

    def start(
        self,
        loop: asyncio.AbstractEventLoop,
        publish: Callable[[list[tuple[str, int, bytes]]], None],
        wake: Callable[[list[str] | None], None] | None = None,
        seen: Callable[[dict[str, int] | None], None] | None = None,
        webhooks: Callable[[list[str]], None] | None = None,
    ) -> None:
        """Attach to the running loop; each commit's events go to ``publish``
        there, other nodes' wake-ups (agents with new events, or None for
        anyone) to ``wake``, what other nodes saw to ``seen``, and the agents
        whose webhook registration a commit wrote to ``webhooks``."""
        self.loop = loop
        self.rt.event_sink = _on_loop(loop, publish)
        if wake is not None:
            self.rt.link.feed = _on_loop(loop, wake)
        if webhooks is not None:
            self.rt.webhook_sink = _on_loop(loop, webhooks)
        if seen is not None and self.rt.shared:
            self.rt.link.attach_seen(_on_loop(loop, seen))

    # --- out: event loop -> actors ------------------------------------------------

    def send(self, actor_key: str, job: Job) -> None:
        """Queue ``job`` for ``actor_key``; sent at the end of this loop turn."""
        waiting = self._outgoing.get(actor_key)
        if waiting is not None:
            waiting.append(job)
            return
        self._outgoing[actor_key] = [job]
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush_jobs)

    def _flush_jobs(self) -> None:
        self._flush_scheduled = False
        outgoing, self._outgoing = self._outgoing, {}
        self.rt.submit_turn(outgoing)  # one message per actor, one wake-up per carrier

    # --- back: any thread -> event loop ---------------------------------------------

    def reply_soon(self, item: tuple[Any, ...]) -> None:
        """Queue a finished action for the event loop (any thread)."""
        with self._replies_lock:
            self._replies.append(item)
            if self._replies_scheduled:
                return
            self._replies_scheduled = True
        assert self.loop is not None
        self.loop.call_soon_threadsafe(self._drain_replies)

    def _drain_replies(self) -> None:
        with self._replies_lock:
            items, self._replies = self._replies, []
            self._replies_scheduled = False
        for item in items:
            try:
                self._finish(*item)
            except Exception:  # one connection's failure never costs another its reply
                log.exception("delivering a reply failed")


def _on_loop(loop: asyncio.AbstractEventLoop, fn: Callable[[Any], None]) -> Callable[[Any], None]:
    """``fn(arg)`` handed to ``loop`` from another thread; nothing once the loop
    has closed (a stopping daemon: the nodes' poll thread woke after it, and
    its RuntimeError went to stderr as a traceback, breaking the JSON log)."""

    def call(arg: Any) -> None:
        try:
            loop.call_soon_threadsafe(fn, arg)
        except RuntimeError:
            if not loop.is_closed():
                raise

    return call
