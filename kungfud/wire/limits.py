"""Size limits of a request's ``args`` measured on its text, before anything is
built (H2, D62): nesting depth, and the count of arrays, objects and values.

Everything here runs in C-speed primitives (bytes methods and regular
expressions), never a Python loop over bytes or values, so a hostile frame
costs the event loop time linear in its length and small.
"""

from __future__ import annotations

import re

__all__ = ["MAX_DEPTH", "MAX_CONTAINERS", "MAX_VALUES", "too_deep", "too_many", "count_values"]

MAX_DEPTH = 64  # nesting of arrays and objects inside `args`
MAX_CONTAINERS = 10_000  # arrays and objects in `args`, counted before any is built (D62)
MAX_VALUES = 50_000  # values in `args`: itself, every element and member, an empty array/object twice (D62)

# Depth is measured on the text with C-speed primitives only (bytes methods and one
# regular expression), never a Python loop over bytes or values: escaped
# backslashes and quotes are dropped, every byte but brackets and quotes deleted,
# strings (now only brackets between quotes) removed, and what is left — brackets
# only — must match "balanced, at most MAX_DEPTH deep", a regex that nests
# MAX_DEPTH possessive groups (no backtracking: linear in the text).
_BRACKETS = bytes.maketrans(b"{}", b"[]")
_NOT_STRUCTURE = bytes(c for c in range(256) if c not in b'[]{}"')
_STRING = re.compile(rb'"[^"]*+"')


def _within(limit: int) -> re.Pattern[bytes]:
    body = b""
    for _ in range(limit):
        body = rb"(?:\[" + body + rb"\])*+"
    return re.compile(body)


_WITHIN_MAX_DEPTH = _within(MAX_DEPTH)


def too_deep(raw: bytes, limit: int = MAX_DEPTH) -> bool:
    """True if JSON text (already known to be valid) nests arrays/objects deeper
    than ``limit``. Linear, and in C: see above."""
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False
    if b"\\" in raw:
        # In valid JSON a backslash starts a two-character escape, so pairs read
        # left to right are `\\`; what is left before a quote escapes it.
        raw = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    structure = raw.translate(_BRACKETS, _NOT_STRUCTURE).replace(b'""', b"")
    if b'"' in structure:
        structure = _STRING.sub(b"", structure)
    pattern = _WITHIN_MAX_DEPTH if limit == MAX_DEPTH else _within(limit)
    return pattern.fullmatch(structure) is None


# Arrays, objects and values are counted the same way (D62): escapes dropped,
# every byte but brackets, commas and quotes deleted, strings removed — in bulk
# with bytes.replace when they hold no bracket or comma (as above), else by
# splitting at the quotes and keeping what is outside. What is left is the
# brackets and commas outside strings: each "[" an array or object, and the
# count of values is 1 + commas + arrays and objects — `args` itself, every
# element and member, and an empty array or object once more.
_SHAPE_DELETE = bytes(c for c in range(256) if c not in b'[]{}",')
_NOT_COUNTED = bytes(c for c in range(256) if c not in b"[{,")


def count_values(raw: bytes) -> tuple[int, int]:
    """(arrays and objects, values as counted above) in JSON text already known
    to be valid."""
    if b"\\" in raw:
        raw = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    shape = raw.translate(_BRACKETS, _SHAPE_DELETE).replace(b'""', b"")
    if b'"' in shape:  # strings holding brackets or commas
        shape = b"".join(shape.split(b'"')[::2])
    containers = shape.count(b"[")
    return containers, 1 + shape.count(b",") + containers


def too_many(raw: bytes) -> str | None:
    """Which count limit JSON text (already known to be valid) is over, if any —
    without building any value (H2)."""
    marks = raw.translate(None, _NOT_COUNTED)  # those in strings too: at least the true counts
    commas = marks.count(b",")
    if len(marks) - commas <= MAX_CONTAINERS and 1 + len(marks) <= MAX_VALUES:
        return None
    containers, values = count_values(raw)
    if containers > MAX_CONTAINERS:
        return f"`args` holds more than {MAX_CONTAINERS} arrays and objects (the limit per request)"
    if values > MAX_VALUES:
        return f"`args` holds more than {MAX_VALUES} values (the limit per request)"
    return None

