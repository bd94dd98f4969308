"""One delivery: a POST on :mod:`.http1`'s kept-alive connections (D390;
httpx until then, D214), to the address :mod:`.guard` checked, with the URL's
host in ``Host`` and in TLS (SNI and certificate check), never following a
redirect. The answer is bounded: its status, and at most ``READ_LIMIT`` bytes
of its body read and dropped; the whole POST must finish within ``TIMEOUT_S``.

What went wrong is told in two ways (D329): the agent's ``webhook.get``
shows one of a few stable categories (``CATEGORIES``), which tell a receiver's
owner what to fix and nothing about the services around it; the detail (the
exception, the exact status) goes to the operator's log."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from .guard import Refused, Target, target
from .http1 import READ_LIMIT, Connections, PostFailure
from .sign import signature

__all__ = ["post", "send", "refused", "TIMEOUT_S", "READ_LIMIT", "new_client", "CATEGORIES", "request"]

log = logging.getLogger("kungfud.webhooks")

TIMEOUT_S = 10.0
CATEGORIES = (
    "timeout", "refused", "tls", "dns", "address_refused", "protocol",
    "http_status 1xx", "http_status 3xx", "http_status 4xx", "http_status 5xx",
    "failed",  # any of the above, on a host allow_hosts opens on every port (D328)
)


def new_client(connections: int) -> Connections:
    """Kept-alive connections for up to ``connections`` POSTs at once."""
    return Connections(idle_max=max(4, connections))


async def post(
    client: Connections, url: str, allow: tuple[str, ...], key: bytes, msg_id: str, timestamp: int, body: bytes,
    span: Any = None, extra: dict[str, str] | None = None,
) -> str | None:
    """Check ``url``'s destination, then :func:`send`: None when the receiver
    answered 2xx within the timeout; else the category of what went wrong.
    ``key`` empty: no signature (an A2A push config has no secret); ``extra``:
    headers of its own (its content type, ``Authorization``)."""
    try:
        t = await target(url, allow)
    except Refused as e:
        return refused(e, url, msg_id)
    return await send(client, t, key, msg_id, timestamp, body, span, extra)


def refused(e: Refused, url: str, msg_id: str) -> str:
    """The category of a destination :mod:`.guard` refused; the detail logged."""
    log.info("webhook %s to %s not sent: %s (%s%s)", msg_id, _where(Target(url)), e.category, e,
             f"; {e.detail}" if e.detail else "")
    return e.category


def request(
    t: Target, key: bytes, msg_id: str, timestamp: int, body: bytes, span: Any = None,
    extra: dict[str, str] | None = None,
) -> bytes:
    """The whole request, one buffer: the Standard Webhooks headers (signed
    when ``key``), the caller's ``extra`` and the span's (WIRE.md 1.2)."""
    more = b""
    if extra or span is not None:
        hdrs = {**(extra or {}), **(span.headers if span is not None else {})}
        for name, value in hdrs.items():
            if "\r" in value or "\n" in value or "\r" in name or "\n" in name:
                raise ValueError(f"header {name!r}: a line break")
            more += b"%s: %s\r\n" % (name.encode("latin-1"), value.encode("latin-1"))
    ctype = b"" if (extra and "content-type" in extra) or not key else b"content-type: application/json\r\n"
    sig = b"webhook-signature: %s\r\n" % signature(key, msg_id, timestamp, body).encode() if key else b""
    return b"POST %s HTTP/1.1\r\nhost: %s\r\nuser-agent: kungfud-webhooks\r\n%swebhook-id: %s\r\nwebhook-timestamp: %d\r\n%s%scontent-length: %d\r\n\r\n%s" % (
        t.target, t.host_header, ctype, msg_id.encode(), timestamp, sig, more, len(body), body,
    )


async def send(
    client: Connections, t: Target, key: bytes, msg_id: str, timestamp: int, body: bytes, span: Any = None,
    extra: dict[str, str] | None = None,
) -> str | None:
    """POST ``body`` to the checked target ``t``: None on a 2xx within the
    timeout; else the category (the detail to the log). ``span``: an object
    whose ``headers`` the POST carries too (a tracing span's traceparent);
    ``key`` empty: no signature; ``extra``: headers of the caller's own."""
    try:
        req = request(t, key, msg_id, timestamp, body, span, extra)
    except ValueError as e:
        return _failed(t, msg_id, "protocol", str(e))
    try:
        async with asyncio.timeout(TIMEOUT_S):
            status = await client.post(t.scheme, t.addr, t.port, t.host, req)
    except TimeoutError:
        return _failed(t, msg_id, "timeout", f"no answer within {TIMEOUT_S:g} s")
    except PostFailure as e:
        return _failed(t, msg_id, e.category, _short(e))
    if 200 <= status < 300:
        return None
    detail = f"HTTP {status}" + (": a redirect, not followed" if 300 <= status < 400 else "")
    return _failed(t, msg_id, f"http_status {min(max(status // 100, 1), 5)}xx", detail)


def _failed(t: Target, msg_id: str, category: str, detail: str) -> str:
    log.info("webhook %s to %s failed: %s (%s)", msg_id, _where(t), category, detail)
    return "failed" if t.coarse else category  # a host open on every port maps no service (D328)


def _where(t: Target) -> str:
    return t.origin  # the scheme, host and port only: a path or query may carry the receiver's own secrets


def _short(e: BaseException) -> str:
    text = str(e) or e.__class__.__name__
    return text[:120]
