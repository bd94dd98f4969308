"""Virtual actors: started on first use, stopped after an idle period.

Two actors for one key can briefly coexist (an idle one finishing its queue while
a new one starts); that is safe because the writer re-checks the version of every
object a decision read (L5), so no decision rests on stale state.

An actor is an OS thread, so one is started only for a key that ``may_start``
accepts: the runtime's service actors, or an object that exists in the store
(review M5: a made-up id must cost no thread). Objects are never deleted, so a
key that was accepted stays accepted.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any, Callable

import pykka

from .object_actor import ObjectActor, Slot

if TYPE_CHECKING:
    from .runtime import Runtime

__all__ = ["Registry"]


class Registry:
    def __init__(
        self, runtime: "Runtime", *, idle_stop_s: float = 60.0, may_start: Callable[[str], bool] = lambda key: True
    ):
        self.runtime = runtime
        self.idle_stop_s = idle_stop_s
        self.may_start = may_start
        self._lock = threading.Lock()
        self._actors: dict[str, tuple[pykka.ActorRef, Slot]] = {}
        self._closed = False
        self._stop_evt = threading.Event()
        self._reaper = threading.Thread(target=self._reap_loop, name="kungfud-reaper", daemon=True)

    def start(self) -> None:
        self._reaper.start()

    def live(self) -> int:
        return len(self._actors)

    def tell(self, key: str, message: Any) -> bool | None:
        """True when told; False when stopping; None when ``key`` names nothing
        an actor may be started for (no actor is started, nothing is told)."""
        for _ in range(3):
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
                        slot = Slot()
                        entry = (ObjectActor.start(self.runtime, key, slot), slot)  # starts its thread
                        self._actors[key] = entry
                    entry[1].last_used = time.monotonic()
            try:
                entry[0].tell(message)
                return True
            except pykka.ActorDeadError:
                with self._lock:
                    if self._actors.get(key) is entry:
                        del self._actors[key]
        return False

    def _reap_loop(self) -> None:
        interval = max(0.05, min(5.0, self.idle_stop_s / 4))
        while not self._stop_evt.wait(interval):
            self.reap()

    def reap(self, now: float | None = None) -> int:
        """Stop actors idle for longer than ``idle_stop_s``; returns how many."""
        now = time.monotonic() if now is None else now
        stopped = []
        with self._lock:
            for key, (ref, slot) in list(self._actors.items()):
                if not slot.busy and now - slot.last_used > self.idle_stop_s:
                    del self._actors[key]
                    stopped.append(ref)
        for ref in stopped:
            ref.stop(block=False)  # queued messages are still handled first
        return len(stopped)

    def stop(self) -> None:
        with self._lock:
            self._closed = True
            refs = [ref for ref, _ in self._actors.values()]
            self._actors.clear()
        self._stop_evt.set()
        for ref in refs:
            try:
                ref.stop(block=True, timeout=30)
            except (pykka.ActorDeadError, pykka.Timeout):
                pass
