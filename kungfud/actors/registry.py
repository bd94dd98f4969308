"""Virtual actors: started on first use, stopped after an idle period, carried
by a fixed set of OS threads (D280).

Each Thread, Task and agent shard is its own :class:`ObjectActor` — its own
mailbox order, overlay and deadlines — but not its own OS thread: a key is
carried by one of ``threads`` pykka actors (:class:`Carrier`), chosen by a
stable hash of the key, so every message for a key is handled on one thread,
in the order told (L5), and many objects share a thread. Before D280 each live
actor had a thread of its own; 1,000 busy Threads meant 1,000 threads taking
turns on the GIL, and pykka's registry made starting one cost more the more
were live.

Two actors for one key can briefly coexist (an idle one stopped while a message
told to it is still queued, and a new one started for the next): both run on
the same carrier, one message after the other, and the writer re-checks the
version of every object a decision read (L5), so no decision rests on stale
state.

An actor costs only memory now, but one is still started only for a key that
``may_start`` accepts: the runtime's service actors, or an object that exists
in the store (review M5: a made-up id must cost nothing). Objects are never
deleted, so a key that was accepted stays accepted.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import zlib
from typing import TYPE_CHECKING, Any, Callable

import pykka

from .messages import ActorSlot
from .object_actor import ObjectActor

if TYPE_CHECKING:
    from .runtime import Runtime

__all__ = ["Registry", "Carrier", "THREAD_NAME", "DEFAULT_THREADS"]

log = logging.getLogger("kungfud.actors")

#: The carriers' thread names start with this (metrics group them as "actors").
THREAD_NAME = "kungfud-actors"
#: Carriers by default (``[server] actor_threads``; D280 says why this many).
DEFAULT_THREADS = 8


class Carrier(pykka.ThreadingActor):
    """One OS thread that runs the messages of many object actors, each handed
    over as ``(actor, message)``."""

    def __init__(self, index: int):
        super().__init__()
        self.index = index

    @staticmethod
    def _create_actor_inbox() -> Any:
        # pykka's default, queue.Queue, wakes its reader through a Condition
        # written in Python: ~11 % of the daemon's GIL time under load went to
        # Condition.notify. SimpleQueue (put, get, empty: what pykka uses) is C.
        return queue.SimpleQueue()

    def on_start(self) -> None:
        threading.current_thread().name = f"{THREAD_NAME}-{self.index}"

    def on_receive(self, message: Any) -> None:
        # ``(actor, message)``, or a list of them told together (Registry.tell_held)
        for actor, inner in message if type(message) is list else (message,):
            try:
                actor.on_receive(inner)  # answers its own job's failures
            except Exception:
                # Never let one object's bug stop the thread that carries others
                # (pykka stops an actor whose on_receive raises).
                log.exception("an actor failed outside its job on %s", type(inner).__name__)


class Ref:
    """What an object actor is told through (``ObjectActor.ref``): its
    carrier's mailbox, with the actor named in each message. ``tell`` raises
    ``pykka.ActorDeadError`` once the carrier has stopped (shutdown)."""

    __slots__ = ("carrier", "actor")

    def __init__(self, carrier: pykka.ActorRef, actor: ObjectActor):
        self.carrier = carrier
        self.actor = actor

    def tell(self, message: Any) -> None:
        self.carrier.tell((self.actor, message))


class Registry:
    def __init__(
        self,
        runtime: "Runtime",
        *,
        idle_stop_s: float = 60.0,
        may_start: Callable[[str], bool] = lambda key: True,
        threads: int = DEFAULT_THREADS,
    ):
        self.runtime = runtime
        self.idle_stop_s = idle_stop_s
        self.may_start = may_start
        self._lock = threading.Lock()
        self._actors: dict[str, tuple[ObjectActor, ActorSlot]] = {}
        self._carriers: list[pykka.ActorRef | None] = [None] * max(1, threads)
        self._closed = False
        self._stop_evt = threading.Event()
        self._reaper = threading.Thread(target=self._reap_loop, name="kungfud-reaper", daemon=True)

    def start(self) -> None:
        """Start the carriers (so the daemon's thread count does not move
        with its load) and the reaper."""
        with self._lock:
            for at, ref in enumerate(self._carriers):
                if ref is None:
                    self._carriers[at] = Carrier.start(at)
        self._reaper.start()

    def live(self) -> int:
        """Object actors live now (each a Thread, a Task or an agent shard)."""
        return len(self._actors)

    @property
    def threads(self) -> int:
        """The OS threads that carry them."""
        return len(self._carriers)

    def _carrier(self, key: str) -> pykka.ActorRef:
        """The carrier of ``key`` (the same one for as long as the daemon
        runs; started here if :meth:`start` was not called). Caller holds
        ``_lock``."""
        at = zlib.crc32(key.encode()) % len(self._carriers)
        ref = self._carriers[at]
        if ref is None:
            ref = self._carriers[at] = Carrier.start(at)
        return ref

    def tell(self, key: str, message: Any, held: "dict[Any, list] | None" = None) -> bool | None:
        """True when told; False when stopping; None when ``key`` names nothing
        an actor may be started for (no actor is started, nothing is told).
        With ``held``, the message is kept there for its carrier instead, and
        told with the others of that carrier by :meth:`tell_held`."""
        with self._lock:
            if self._closed:
                return False
            entry = self._actors.get(key)
            if entry is not None:
                entry[1].last_used = time.monotonic()
        if entry is None:
            if not self.may_start(key):  # a store read: outside the lock
                return None
            with self._lock:
                if self._closed:
                    return False
                entry = self._actors.get(key)
                if entry is None:
                    slot = ActorSlot()
                    actor = ObjectActor(self.runtime, key, slot)
                    actor.ref = Ref(self._carrier(key), actor)
                    entry = self._actors[key] = (actor, slot)
                entry[1].last_used = time.monotonic()
        ref = entry[0].ref
        if held is not None:
            held.setdefault(ref.carrier, []).append((ref.actor, message))
            return True
        try:
            ref.tell(message)
            return True
        except pykka.ActorDeadError:  # the carriers stopped meanwhile
            return False

    @staticmethod
    def tell_held(held: "dict[Any, list]") -> list[Any]:
        """Tell each carrier the messages ``held`` keeps for it, in one message
        (issue 38: one wake-up of a carrier's thread per loop turn, not one
        per actor); each actor's messages stay in the order kept. Returns the
        messages not told (the carriers stopped meanwhile)."""
        lost: list[Any] = []
        for carrier, pairs in held.items():
            try:
                carrier.tell(pairs if len(pairs) > 1 else pairs[0])
            except pykka.ActorDeadError:
                lost += [message for _, message in pairs]
        return lost

    def _reap_loop(self) -> None:
        interval = max(0.05, min(5.0, self.idle_stop_s / 4))
        while not self._stop_evt.wait(interval):
            self.reap()

    def reap(self, now: float | None = None) -> int:
        """Stop actors idle for longer than ``idle_stop_s`` (their state is a
        cache of the store, L1-1; a message already told to one is still
        handled by it); returns how many."""
        now = time.monotonic() if now is None else now
        with self._lock:
            idle = [k for k, (_, slot) in self._actors.items() if not slot.busy and now - slot.last_used > self.idle_stop_s]
            for key in idle:
                del self._actors[key]
        return len(idle)

    def fence(self, key: str, timeout: float = 10.0) -> None:
        """Wait until every message told to ``key``'s carrier before this call
        has been handled (tests: its mailbox is FIFO)."""
        with self._lock:
            ref = self._carrier(key)
        ref.ask((_NOBODY, None), timeout=timeout)

    def stop(self) -> None:
        """Stop the carriers; each handles what it was told first."""
        with self._lock:
            self._closed = True
            refs = [ref for ref in self._carriers if ref is not None]
            self._actors.clear()
        self._stop_evt.set()
        for ref in refs:
            try:
                ref.stop(block=True, timeout=30)
            except (pykka.ActorDeadError, pykka.Timeout):
                pass


class _Nobody:
    """The actor of a fence message: does nothing."""

    @staticmethod
    def on_receive(message: Any) -> None:
        return None


_NOBODY = _Nobody()
