"""Runtime: wires the store, the writer and the actor registry together, and is
the one entry point the server calls for actions."""

from __future__ import annotations

import os
import secrets
import threading
import time
from typing import Any, Callable

import msgspec

from ..core.context import Ctx, Limits
from ..core.ids import time_ordered
from ..store import Failed, Outcome, Store, Writer
from ..errors import Rejection
from .clock import DeadlineClock
from .ops import SERVICE_ACTORS, agent_actor
from .registry import Registry

__all__ = ["Runtime", "Job", "wall_ms"]


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


class Job(msgspec.Struct):
    """One action on its way to the actor that owns it."""

    op: str
    caller: str | None
    scope: bytes | None  # receipt key (agent, op, idempotency key)
    req_hash: bytes
    command: Any
    reply: Callable[[Outcome], None]  # thread-safe; delivers to the event loop


class Runtime:
    def __init__(
        self,
        store: Store,
        limits: Limits = Limits(),
        *,
        clock: Callable[[], int] = wall_ms,
        idle_stop_s: float = 60.0,
        max_batch: int = 256,
        fault: Callable[[str], None] | None = None,
    ):
        self.store = store
        self.limits = limits
        self.clock = clock
        self._id_lock = threading.Lock()
        self._last_id: dict[str, tuple[int, int]] = {}
        self._entropy, self._entropy_at = b"", 0
        self.registry = Registry(self, idle_stop_s=idle_stop_s, may_start=self._may_start)
        self.clock_thread = DeadlineClock(self)
        self.writer = Writer(
            store,
            max_batch=max_batch,
            clock=clock,
            on_deadline=self.clock_thread.wake_for,
            on_events=self._publish,
            fault=fault,  # tests only (storage fault injection)
        )
        # Set by the server: receives each commit's events (writer thread).
        self.event_sink: Callable[[list[tuple[str, int, bytes]]], None] | None = None

    def start(self) -> None:
        self.writer.start()
        self.registry.start()
        self.clock_thread.start()  # re-arms every stored deadline (after a restart too)

    def stop(self) -> None:
        """Stop the clock and actors (they finish queued jobs), then drain the writer."""
        self.clock_thread.stop()
        self.registry.stop()
        self.writer.stop()

    def _publish(self, events: list[tuple[str, int, bytes]]) -> None:
        sink = self.event_sink
        if sink is not None:
            sink(events)

    def new_id(self, prefix: str) -> str:
        """Time-ordered and, within one millisecond, strictly increasing (like a
        monotonic ULID), so listings ordered by id are creation order."""
        now = self.clock()
        with self._id_lock:
            last = self._last_id.get(prefix)
            if last is not None and last[0] >= now:
                now, rand = last[0], last[1] + 1
            else:
                rand = self._random_bits() >> 1  # 79 bits: headroom to count up within a millisecond
            self._last_id[prefix] = (now, rand)
        return time_ordered(prefix, now, rand)

    def _random_bits(self) -> int:
        """80 random bits from the OS, read 4 KiB at a time (one syscall per
        ~400 ids instead of one per id). Caller holds ``_id_lock``."""
        if self._entropy_at + 10 > len(self._entropy):
            self._entropy, self._entropy_at = os.urandom(4000), 0
        at = self._entropy_at
        self._entropy_at = at + 10
        return int.from_bytes(self._entropy[at : at + 10], "big")

    @staticmethod
    def new_secret() -> str:
        return "kf_" + secrets.token_urlsafe(32)

    def ctx(
        self, caller: Any, now: int | None = None, get: Callable[[str], Any] | None = None, query: Any = None
    ) -> Ctx:
        now = self.clock() if now is None else now
        if get is None:
            return Ctx(now=now, caller=caller, new_id=self.new_id, new_secret=self.new_secret, limits=self.limits)
        if query is None:
            return Ctx(now=now, caller=caller, new_id=self.new_id, new_secret=self.new_secret, limits=self.limits, get=get)
        return Ctx(
            now=now, caller=caller, new_id=self.new_id, new_secret=self.new_secret, limits=self.limits, get=get, query=query
        )

    def _may_start(self, key: str) -> bool:
        """An actor is started for a service key, or for an object that exists."""
        if key in SERVICE_ACTORS:
            return True
        with self.store.read() as view:
            return view.exists(key)

    def submit(self, job: Job, actor_key: str) -> None:
        told = self.registry.tell(actor_key, job)
        if told is None:
            self._no_object([job])
        elif not told:
            job.reply(Failed(Rejection.unavailable("the daemon is shutting down; retry against the restarted daemon")))

    def submit_many(self, jobs: list[Job], actor_key: str) -> None:
        """Several jobs for one actor in one message (handled in this order)."""
        if len(jobs) == 1:
            self.submit(jobs[0], actor_key)
            return
        told = self.registry.tell(actor_key, jobs)
        if told is None:
            self._no_object(jobs)
        elif not told:
            for job in jobs:
                job.reply(Failed(Rejection.unavailable("the daemon is shutting down; retry against the restarted daemon")))

    def _no_object(self, jobs: list[Job]) -> None:
        """Jobs for an object that does not exist (M5): no actor is started for
        it. Each caller's own agent actor decides them instead, with the same
        core decision over the same store, so the answer (``not_found``) is the
        one the object's actor would give, and an object created meanwhile is
        still serialized by the writer's version check (L5)."""
        by_actor: dict[str, list[Job]] = {}
        for job in jobs:
            if job.caller is None:  # no caller to serialize by (never routed to an object)
                job.reply(Failed(Rejection.not_found("the object", "this action names")))
                continue
            by_actor.setdefault(agent_actor(job.caller), []).append(job)
        for key, mine in by_actor.items():
            self.submit_many(mine, key)  # a service actor: always startable
