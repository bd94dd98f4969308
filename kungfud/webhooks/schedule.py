"""When to try again, and when to give up (WIRE.md 1.2): pauses of about
1 s, 5 s, 30 s, 2 min, 10 min, then every 30 min; after 24 h of failing the
endpoint is disabled. Pure: times are ms passed in (the tests' fake clock)."""

from __future__ import annotations

import msgspec

from ..actors.hooks import Cursor

__all__ = ["Schedule", "PAUSES_S", "DISABLE_AFTER_S"]

PAUSES_S = (1, 5, 30, 120, 600, 1800)
DISABLE_AFTER_S = 86_400


class Schedule:
    def __init__(self, pauses_s: tuple[float, ...] = PAUSES_S, disable_after_s: float = DISABLE_AFTER_S):
        assert pauses_s, "at least one pause"
        self.pauses_ms = tuple(int(p * 1000) for p in pauses_s)
        self.disable_after_ms = int(disable_after_s * 1000)

    def pause_ms(self, attempts: int) -> int:
        """The pause after the ``attempts``-th failed attempt in a row (1 = the first)."""
        return self.pauses_ms[min(max(attempts, 1), len(self.pauses_ms)) - 1]

    def next_at(self, cursor: Cursor) -> int:
        """When the next attempt is due (ms); 0: now (not failing)."""
        if not cursor.attempts:
            return 0
        return cursor.last_attempt_at + self.pause_ms(cursor.attempts)

    def failed(self, cursor: Cursor, now: int, error: str) -> Cursor:
        """The cursor after a failed attempt at ``now``: failing since its
        first failure, disabled once that is ``disable_after`` ago."""
        since = cursor.failing_since if cursor.attempts else now
        disabled = now if now - since >= self.disable_after_ms else 0
        return msgspec.structs.replace(
            cursor, failing_since=since, attempts=cursor.attempts + 1, last_error=error[:200],
            last_attempt_at=now, disabled_at=disabled,
        )

    @staticmethod
    def delivered(cursor: Cursor, seq: int, now: int) -> Cursor:
        """The cursor after every event up to ``seq`` was acknowledged."""
        return msgspec.structs.replace(
            cursor, delivered=seq, failing_since=0, attempts=0, last_attempt_at=now,
            last_error="" if not cursor.attempts else cursor.last_error,
        )
