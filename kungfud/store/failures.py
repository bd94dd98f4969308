"""Storage failures (L2-1, L4-6): what one was, for the operator's log line
and the client's reason (one classification, two wordings), and the log that
reports them once per burst instead of once per rejected action; and the one
line that says the store's reserve began (or stopped) refusing (D326)."""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

import lmdb

__all__ = ["FailureLog", "ReserveLog", "storage_failure"]

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


class ReserveLog:
    """The store's reserve (kungfud/store/quota.py) refuses ordinary agents'
    writes ``unavailable`` before the map is full, so the "map full" failure
    above is never reached: this says so instead (D326). One WARNING line when
    the reserve begins refusing, naming the fill and ``[storage]
    map_size_mb``; one when the fill is back below the reserve by a tenth of
    it (the store was enlarged or emptied). A change of state is logged at
    most once per ``every_s``; a store at the edge that refuses one large write
    and then takes small ones does not flap a line per batch."""

    def __init__(self, every_s: float = 300.0, clock: Callable[[], float] = time.monotonic):
        self.every_s = every_s
        self.clock = clock
        self.refusing = False
        self._last: float | None = None
        self._refused = 0

    def batch(self, used: int, capacity: int | None, reserve: int, refused: int) -> None:
        """After a batch: the store's fill as it left it, its size, the
        reserve's bytes, and how many of its actions the reserve refused."""
        if capacity is None or not reserve:
            return
        self._refused += refused
        if refused and not self.refusing:
            if not self._due():
                return
            self.refusing = True
            log.warning(
                "the store is nearly full: %s of its %s are used and the last %s ([storage] reserve_percent) is "
                "kept for deadline facts and operator actions; ordinary agents' writes are now refused as "
                "unavailable. Enlarge [storage] map_size_mb (PostgreSQL: capacity_mb) and restart, or deactivate "
                "the agents that filled it", _mib(used), _mib(capacity), _mib(reserve),
            )
        elif self.refusing and not refused and used <= capacity - reserve - reserve // 10:
            if not self._due():
                return
            self.refusing = False
            log.warning(
                "the store has room again: %s of its %s are used; ordinary agents' writes are accepted "
                "(%d refused by the reserve meanwhile)", _mib(used), _mib(capacity), self._refused,
            )
            self._refused = 0

    def _due(self) -> bool:
        now = self.clock()
        if self._last is not None and now - self._last < self.every_s:
            return False
        self._last = now
        return True


def _mib(n: int) -> str:
    return f"{n / (1024 * 1024):.1f} MiB"


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
