"""Storage failures (L2-1, L4-6): what one was, for the operator's log line
and the client's reason (one classification, two wordings), and the log that
reports them once per burst instead of once per rejected action."""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

import lmdb

__all__ = ["FailureLog", "storage_failure"]

log = logging.getLogger("kungfud.store")


class FailureLog:
    """Storage failures that reject actions, logged at WARNING once per burst:
    the first of a kind at once, then at most one line per ``every_s`` seconds
    with how many actions were rejected since the previous line. An operator
    learns of a full map or disk without a line per rejected action."""

    def __init__(self, every_s: float = 10.0, clock: Callable[[], float] = time.monotonic):
        self.every_s = every_s
        self.clock = clock
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}
        self._count: dict[str, int] = {}

    def note(self, e: BaseException, actions: int = 1) -> None:
        kind = storage_failure(e)[0]
        with self._lock:
            self._count[kind] = self._count.get(kind, 0) + actions
            now = self.clock()
            last = self._last.get(kind)
            if last is not None and now - last < self.every_s:
                return
            count = self._count.pop(kind)
            self._last[kind] = now
        since = "" if last is None else f" in the last {now - last:.0f} s"
        log.warning("%s: %d action(s) rejected as unavailable%s (%s: %s)", kind, count, since, type(e).__name__, e)


# What a storage failure was, for the operator's log line and the client's
# reason: one classification, two wordings.
_MAP_FULL = (
    "storage is full (map size reached; enlarge [storage] map_size_mb)",
    "storage is full (map size reached); nothing was written — retry after the operator enlarges map_size_mb",
)
_NOT_WRITTEN = (
    "storage could not be written (disk full or I/O error)",
    "storage could not be written (disk full or I/O error); nothing was written — retry later",
)
_OTHER = ("storage could not be written", "storage could not be written; nothing was written — retry later")


def storage_failure(e: BaseException) -> tuple[str, str]:
    """(kind for the log, reason for the client) of a storage failure."""
    if isinstance(e, lmdb.MapFullError):
        return _MAP_FULL
    if isinstance(e, OSError) or "No space" in str(e):
        return _NOT_WRITTEN
    return _OTHER
