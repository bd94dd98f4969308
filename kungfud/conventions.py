"""Conventions every layer shares, with no dependency of their own (WIRE.md
"Conventions"): how a time is written on the wire, and which receipt fields are
secrets.
"""

from __future__ import annotations

import datetime as _dt
from typing import Literal

__all__ = ["rfc3339", "SECRET_FIELDS", "Role"]

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)

#: Receipt fields that hold a secret (an agent key, an admission token): shown
#: once in the first reply, nulled in the stored receipt (DECISIONS.md B4) and
#: never written to the audit log.
SECRET_FIELDS = ("key", "token")

#: A member's role in a Thread (WIRE.md "Thread"; spec §6): the facts, the
#: member objects and the wire's args all name it from here.
Role = Literal["observer", "speaker", "governor"]


_second: tuple[int, str] = (0, _EPOCH.strftime("%Y-%m-%dT%H:%M:%S."))  # the last second written


def rfc3339(ms: int) -> str:
    """``1764504000000`` → ``"2025-11-30T12:00:00.000Z"``: RFC 3339 UTC with
    milliseconds, from integer milliseconds since the Unix epoch."""
    global _second
    s, milli = divmod(ms, 1000)
    last = _second  # one tuple, replaced whole: safe to share between threads
    if last[0] != s:  # times written together mostly share their second
        last = _second = (s, (_EPOCH + _dt.timedelta(seconds=s)).strftime("%Y-%m-%dT%H:%M:%S."))
    return f"{last[1]}{milli:03d}Z"
