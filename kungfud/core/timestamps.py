"""Time as the protocol sees it: integer milliseconds since the Unix epoch (UTC).

The core never reads a clock; callers pass ``now``. Wire times are RFC 3339 UTC
with milliseconds (WIRE.md "Conventions").
"""

from __future__ import annotations

import datetime as _dt

from ..conventions import rfc3339  # one definition, shared with the layers above
from ..errors import Rejection

__all__ = ["rfc3339", "parse_rfc3339", "deadline_passed"]

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


def parse_rfc3339(text: str) -> int:
    t = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return int((t - _EPOCH).total_seconds() * 1000 + 0.5)


def deadline_passed(kind: str, ident: str, outcome: str, at: int) -> Rejection:
    """The refusal of an action that came after the deadline that ended the work
    (a delivery deadline: timed out; a judgment deadline: undecided, or for an
    engagement the contract's result): when it passed, in RFC 3339, and the next
    useful step. One wording for assignments and engagements, whether or not the
    expiry is recorded yet (WIRE.md 1.1 "Wording of rejections")."""
    when = rfc3339(at)
    if outcome == "timed_out":
        return Rejection.conflict(
            f"{kind} {ident} timed out: its delivery deadline passed at {when}; that state is final"
            " - nothing can be delivered for it now; read your turn for what is still open"
        )
    state = outcome.replace("_", " ")
    return Rejection.conflict(
        f"{kind} {ident} is {state}: its judgment deadline passed at {when}; that state is final"
        " - the delivery stays readable, and more work needs a new offer"
    )
