"""Fresh identifiers (WIRE.md "Conventions"). Ids are opaque to clients; which
prefix names which kind of object is the table in :mod:`kungfud.core.kinds`."""

from __future__ import annotations

__all__ = ["time_ordered"]

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford base32, ASCII-sorted


# Every 10-bit value as its two base32 characters, and where the 13 pairs of
# an id's 130 bits (50 of time, 80 of randomness) start, most significant first.
_PAIRS = tuple(a + b for a in _ALPHABET for b in _ALPHABET)
_SHIFTS = tuple(range(120, -1, -10))


def time_ordered(prefix: str, now_ms: int, rand80: int) -> str:
    """``prefix`` + 10 base32 chars of time + 16 of randomness (ULID-like).

    Ids of one kind sort by creation time, so listings ordered by id are
    chronological and cursors stay stable. Pure: the caller supplies time and
    randomness. Encoded two characters at a time (13 table lookups instead of
    26 shifts and lookups: it runs once per new object)."""
    n = ((now_ms & ((1 << 50) - 1)) << 80) | (rand80 & ((1 << 80) - 1))
    return prefix + "".join([_PAIRS[(n >> s) & 1023] for s in _SHIFTS])
