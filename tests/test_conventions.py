"""WIRE.md "Conventions": times are RFC 3339 UTC strings with milliseconds.
``rfc3339`` keeps the last second it formatted; whatever order times come in,
each must read exactly as the calendar says."""

from __future__ import annotations

import datetime as dt
import random

from kungfud.conventions import rfc3339

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def _calendar(ms: int) -> str:
    t = _EPOCH + dt.timedelta(milliseconds=ms)
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def test_the_wire_example_and_the_epoch():
    assert rfc3339(1764504000000) == "2025-11-30T12:00:00.000Z"
    assert rfc3339(0) == "1970-01-01T00:00:00.000Z"
    assert rfc3339(1764504000001) == "2025-11-30T12:00:00.001Z"


def test_times_in_any_order_read_as_the_calendar_says():
    rng = random.Random(3339)
    base = 1764504000000
    times = [base - 1, base, base + 999, base + 1000, base - 86_400_000, base + 31_536_000_000 + 999]
    times += [base + rng.randrange(-5_000, 5_000) for _ in range(2_000)]  # runs within one second, and across
    times += [rng.randrange(0, 253_402_300_799_999) for _ in range(2_000)]  # up to 9999-12-31T23:59:59.999Z
    for ms in times:
        assert rfc3339(ms) == _calendar(ms), ms
