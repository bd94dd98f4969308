"""The Standard Webhooks signature (https://www.standardwebhooks.com/):
``v1,`` + base64(HMAC-SHA256(key, "<id>.<timestamp>.<body>")), where the key
is the base64-decoded part of the ``whsec_`` secret."""

from __future__ import annotations

import base64
import hashlib
import hmac

__all__ = ["signature", "headers"]


def signature(key: bytes, msg_id: str, timestamp: int, body: bytes) -> str:
    mac = hmac.new(key, b"%s.%d.%s" % (msg_id.encode(), timestamp, body), hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


def headers(key: bytes, msg_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The headers of one delivery (WIRE.md 1.2)."""
    return {
        "content-type": "application/json",
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature(key, msg_id, timestamp, body),
    }
