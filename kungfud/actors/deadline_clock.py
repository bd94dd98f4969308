"""The deadline clock (L4): wakes the actor that owns each due deadline.

It reads the running deadlines (``View.deadlines``: the ``deadlines`` index,
derived from assignment and engagement states, written in the same transaction
as the facts that set or clear a deadline), sleeps until the earliest one, and
tells each owning actor to record its expiries. The writer wakes it when a
commit adds a deadline. Correctness never depends on it: actors apply due
expiries before every command and readers never show an expired obligation; the
clock only makes expiries visible promptly, and after a restart it re-arms
everything from the index.

With several nodes on one store (issue 16) the clock runs only while its node
holds the deadline lease (``Runtime.nodes.lease``); the others try to take it
every LEASE_RETRY_S, so a dead holder is replaced within a few seconds. A
second clock would do no harm (a second expiry decision is Stale and decided
again to nothing, L5), only double work.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from .messages import SweepDue

if TYPE_CHECKING:
    from .runtime import Runtime

__all__ = ["DeadlineClock"]

log = logging.getLogger("kungfud.clock")

RESEND_MS = 1000  # re-tell an actor whose due deadline is still in the index after this long
MAX_SLEEP_S = 5.0
LEASE_RETRY_S = 1.0  # a node without the deadline lease tries to take it this often


class DeadlineClock:
    def __init__(self, runtime: "Runtime"):
        self.rt = runtime
        self._cond = threading.Condition()
        self._stopped = False
        self._woken = False  # a wake since the loop last read the clock: do not sleep
        # actor key -> (latest due it was told about, when it was told), both ms
        self._told: dict[str, tuple[int, int]] = {}
        self._thread = threading.Thread(target=self._run, name="kungfud-clock", daemon=True)
        self.expiries_told = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()
        if self._thread.is_alive():
            self._thread.join()

    def wake(self) -> None:
        """A commit added a deadline (maybe earlier than the one it sleeps
        towards), or a test moved the clock (kungfud/testing/offset_clock.py): look
        again now. Any thread may call this."""
        with self._cond:
            self._woken = True
            self._cond.notify()

    def _due_rows(self, now: int, limit: int = 1000) -> tuple[list[tuple[int, str]], int | None]:
        """(due rows as (due, owner actor key), earliest future due)."""
        due: list[tuple[int, str]] = []
        with self.rt.store.read() as view:
            for at, _, owner in view.deadlines():
                if at > now:
                    return due, at
                due.append((at, owner))
                if len(due) >= limit:
                    return due, now
        return due, None

    def _hold_lease(self) -> bool:
        """Whether this node runs the clock now; if not, wait LEASE_RETRY_S
        (wakes do not shorten it) and say False."""
        lease = self.rt.nodes.lease
        try:
            if lease.try_acquire():
                return True
        except Exception:
            log.exception("taking the deadline lease failed")
        self._told.clear()  # whoever holds it now tells its own actors
        with self._cond:
            if not self._stopped:
                self._cond.wait_for(lambda: self._stopped, timeout=LEASE_RETRY_S)
        return False

    def _run(self) -> None:
        while True:
            with self._cond:
                if self._stopped:
                    return
                self._woken = False  # a wake from here on is kept for the wait below
            if not self._hold_lease():
                continue
            now = self.rt.clock()
            try:
                due, next_due = self._due_rows(now)
            except Exception:
                log.exception("reading deadlines failed")
                due, next_due = [], None
            for at, owner in due:
                told = self._told.get(owner)
                # Tell an owner about each newly due deadline at once; repeat for
                # one still in the index only after RESEND_MS (its actor may be
                # busy, or the write may have failed).
                if told is not None and at <= told[0] and now - told[1] < RESEND_MS:
                    continue
                self._told[owner] = (max(at, told[0]) if told else at, now)
                self.expiries_told += 1
                self.rt.registry.tell(owner, SweepDue())
            if len(self._told) > 10_000:
                self._told = {k: v for k, v in self._told.items() if now - v[1] < RESEND_MS}
            if due:
                wait_s = 0.02 if next_due is None or next_due <= now else min((next_due - now) / 1000, 0.05)
            else:
                wait_s = MAX_SLEEP_S if next_due is None else max(0.0, (next_due - now) / 1000)
            with self._cond:
                if self._stopped:
                    return
                if not self._woken:  # a wake while reading the index is not lost
                    self._cond.wait(timeout=min(wait_s, MAX_SLEEP_S))
