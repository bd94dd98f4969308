"""Page cursors that never name an object the caller may not read (R12-8,
R12-9, WIRE.md "Lists", docs/decisions.md D44).

A scanned page (``memory.list``, ``turn``, ``opportunities``) resumes after the
last index row it examined, so nothing that existed when paging began is skipped.
When that row is an item the page returned, its position names something the
caller has just read, and the cursor carries it in the clear (as before, and
across restarts). When the page stopped on a row it did not show — another
author's private Memory, an assignment in a Thread the caller left — the
position itself is the secret, so the cursor is *sealed*: encrypted and
authenticated with a key the daemon draws at start, bound to the op and the
caller. A sealed cursor reveals nothing but its own length; after a restart it
is a ``bad_request`` and paging starts again (never a silent skip).

The cipher is HMAC-SHA256 as a PRF in counter mode with a random nonce,
encrypt-then-MAC (a 128-bit tag); only :mod:`hashlib`/:mod:`hmac`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os

from ..errors import Rejection

__all__ = ["SEALED", "seal", "unseal", "is_sealed", "bad_cursor"]

SEALED = "~"  # sealed cursors start with it; no clear cursor does
_KEY = os.urandom(32)  # per daemon process: sealed cursors do not outlive it
_NONCE = 12
_TAG = 16
MAX_POSITION = 160  # bytes; keeps every sealed cursor within WIRE.md's 256 characters


def _keystream(nonce: bytes, n: int) -> bytes:
    out = bytearray()
    block = 0
    while len(out) < n:
        out += hmac.new(_KEY, b"ks" + nonce + block.to_bytes(4, "big"), hashlib.sha256).digest()
        block += 1
    return bytes(out[:n])


def _tag(op: str, caller: str, nonce: bytes, body: bytes) -> bytes:
    scope = op.encode() + b"\x00" + caller.encode() + b"\x00"
    return hmac.new(_KEY, b"tag" + scope + nonce + body, hashlib.sha256).digest()[:_TAG]


def is_sealed(cursor: str) -> bool:
    return cursor.startswith(SEALED)


def seal(op: str, caller: str, position: bytes) -> str:
    """An opaque cursor for ``position`` that only ``caller`` paging ``op`` on
    this daemon process can resume from."""
    assert len(position) <= MAX_POSITION, "a page position is an index key suffix"
    nonce = os.urandom(_NONCE)
    body = bytes(a ^ b for a, b in zip(position, _keystream(nonce, len(position))))
    raw = nonce + body + _tag(op, caller, nonce, body)
    return SEALED + base64.urlsafe_b64encode(raw).decode().rstrip("=")


def unseal(op: str, caller: str, cursor: str) -> bytes | None:
    """The position a sealed cursor holds, or None when it is not one this daemon
    process sealed for ``caller`` and ``op``."""
    text = cursor[len(SEALED):]
    if not text.isascii():
        return None
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        return None
    if len(raw) < _NONCE + _TAG or base64.urlsafe_b64encode(raw).decode().rstrip("=") != text:
        return None  # too short, or not the one encoding seal() writes (unused low bits set)
    nonce, body, tag = raw[:_NONCE], raw[_NONCE:-_TAG], raw[-_TAG:]
    if not hmac.compare_digest(tag, _tag(op, caller, nonce, body)):
        return None
    return bytes(a ^ b for a, b in zip(body, _keystream(nonce, len(body))))


def bad_cursor() -> Rejection:
    """The one refusal of a cursor this daemon did not return (or, sealed, not
    to this caller for this op, or before a restart)."""
    return Rejection.bad_request("`cursor` is not a cursor this daemon returned: pass the previous page's `cursor`, or leave it out")
