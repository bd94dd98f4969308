"""Fresh identifiers (WIRE.md "Conventions"). Ids are opaque to clients; which
prefix names which kind of object is the table in :mod:`kungfud.core.kinds`."""

from __future__ import annotations

__all__ = ["time_ordered"]

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford base32, ASCII-sorted


def time_ordered(prefix: str, now_ms: int, rand80: int) -> str:
    """``prefix`` + 10 base32 chars of time + 16 of randomness (ULID-like).

    Ids of one kind sort by creation time, so listings ordered by id are
    chronological and cursors stay stable. Pure: the caller supplies time and
    randomness."""
    t = now_ms & ((1 << 50) - 1)
    r = rand80 & ((1 << 80) - 1)
    chars = [_ALPHABET[(t >> (5 * i)) & 31] for i in range(9, -1, -1)]
    chars += [_ALPHABET[(r >> (5 * i)) & 31] for i in range(15, -1, -1)]
    return prefix + "".join(chars)
