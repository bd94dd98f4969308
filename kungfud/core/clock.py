"""Time as the protocol sees it: integer milliseconds since the Unix epoch (UTC).

The core never reads a clock; callers pass ``now``. Wire times are RFC 3339 UTC
with milliseconds (WIRE.md "Conventions").
"""

from __future__ import annotations

import datetime as _dt

__all__ = ["rfc3339", "parse_rfc3339"]

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


def rfc3339(ms: int) -> str:
    """``1764504000000`` → ``"2025-11-30T12:00:00.000Z"``."""
    t = _EPOCH + _dt.timedelta(milliseconds=ms)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def parse_rfc3339(text: str) -> int:
    t = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return int((t - _EPOCH).total_seconds() * 1000 + 0.5)
