"""Test-only: a daemon clock that a test moves forward (``KUNGFUD_TEST_CLOCK``).

Deadline tests against the daemon subprocess (tests/conftest.py ``Daemon``)
would otherwise sleep on the wall clock until a deadline passes. Started with
``KUNGFUD_TEST_CLOCK=FILE`` in its environment, the daemon's protocol clock
(``Runtime.clock``: the ``now`` of every decision and read, every deadline and
its expiry, the writer's validity check, new ids) is the wall clock plus the
offset in whole milliseconds written in FILE (0 while FILE is missing or
empty). A test moves time forward by replacing FILE with a larger number.
FILE is read at every call, so the daemon's next request sees the new time; the
call that first sees it wakes the deadline clock (``on_advance``), which then
records at once every expiry that fell due.

FILE may instead hold ``=T``: the clock stands still at T (ms since the
epoch) until FILE changes, so a test makes several actions happen in one
millisecond (D282).

Time only moves forward: an offset smaller than one already seen is ignored,
and the clock never returns less than it returned before (ids stay
time-ordered, a deadline once passed stays passed). Write FILE whole (a
temporary file, then ``os.replace``): a half-written number is ignored too.

It cannot be on by accident: only ``daemon.run`` reads the variable, a daemon
running with it logs a warning at start naming FILE, and nothing else in the
daemon (last-seen times, the audit log, rate limits) uses this clock.
docs/reliability.md, "Test hooks", lists it with ``KUNGFUD_FAULT_NTH``.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Callable

from ..actors.runtime import wall_ms

__all__ = ["ENV", "OffsetClock"]

ENV = "KUNGFUD_TEST_CLOCK"

log = logging.getLogger("kungfud.testing")


class OffsetClock:
    """The wall clock plus the offset (ms) a test writes to ``path``."""

    def __init__(self, path: str, wall: Callable[[], int] = wall_ms):
        self.path = path
        self.wall = wall
        self.offset_ms = 0
        self.last = 0  # the largest time returned: the clock never goes back
        #: Called (no arguments) by the call that first sees a larger offset.
        self.on_advance: Callable[[], None] | None = None
        self._lock = threading.Lock()

    @classmethod
    def from_env(cls) -> "OffsetClock | None":
        path = os.environ.get(ENV)
        if not path:
            return None
        log.warning("test clock on: time is the wall clock plus the offset in %s (%s; never in production)", path, ENV)
        return cls(path)

    def _written(self) -> tuple[int, bool] | None:
        """(the offset, False) or (the instant it stands at, True)."""
        try:
            with open(self.path, "rb") as f:
                text = f.read().strip()
        except FileNotFoundError:
            return None
        frozen = text.startswith(b"=")
        try:
            return (int(text[1:] if frozen else text), frozen) if text else None
        except ValueError:
            return None

    def __call__(self) -> int:
        written = self._written()
        advanced = False
        with self._lock:
            if written is not None and written[1]:
                now = written[0]
            else:
                if written is not None and written[0] > self.offset_ms:
                    self.offset_ms = written[0]
                    advanced = True
                now = self.wall() + self.offset_ms
            now = self.last = max(now, self.last)
        if advanced and self.on_advance is not None:
            self.on_advance()
        return now
