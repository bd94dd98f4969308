"""Fresh ids (core/ids.py): the documented layout — prefix, 10 base32
characters of the millisecond time, 16 of randomness — and the order it gives
(listings ordered by id are creation order)."""

from __future__ import annotations

import random

from kungfud.core.ids import time_ordered

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"


def _reference(prefix: str, now_ms: int, rand80: int) -> str:
    """The layout spelled out: each character is 5 bits, most significant first."""
    t = now_ms & ((1 << 50) - 1)
    r = rand80 & ((1 << 80) - 1)
    return (
        prefix
        + "".join(_ALPHABET[(t >> (5 * i)) & 31] for i in range(9, -1, -1))
        + "".join(_ALPHABET[(r >> (5 * i)) & 31] for i in range(15, -1, -1))
    )


def test_id_is_prefix_then_10_chars_of_time_then_16_of_randomness():
    rnd = random.Random(7)
    cases = [(0, 0), ((1 << 50) - 1, (1 << 80) - 1), (1 << 50, 1 << 80), (1_764_630_000_000, 1)]
    cases += [(rnd.getrandbits(rnd.choice((1, 41, 50, 60))), rnd.getrandbits(rnd.choice((1, 79, 80, 90))))
              for _ in range(20_000)]
    for now, rand in cases:
        got = time_ordered("me_", now, rand)
        assert got == _reference("me_", now, rand)
        assert len(got) == 3 + 26 and set(got[3:]) <= set(_ALPHABET)


def test_ids_sort_by_time_then_randomness():
    rnd = random.Random(8)
    pairs = sorted((rnd.getrandbits(44), rnd.getrandbits(80)) for _ in range(2_000))
    ids = [time_ordered("th_", now, rand) for now, rand in pairs]
    assert ids == sorted(ids)
