"""One delivery: a POST with httpx (chosen over aiohttp because it is already
a dependency of the test suite and the MCP bridge's stack, its AsyncClient
takes a per-request SNI host name, and it never follows a redirect unless
asked; D214), to the address :mod:`.guard` checked, with the URL's host in
``Host`` and in TLS (SNI and certificate check). The answer is bounded: its
status, and at most ``READ_LIMIT`` bytes read and dropped; the whole POST
must finish within ``TIMEOUT_S``.

What went wrong is told in two ways (D329): the agent's ``webhook.get``
shows one of a few stable categories (``CATEGORIES``), which tell a receiver's
owner what to fix and nothing about the services around it; the detail (the
exception, the exact status) goes to the operator's log."""

from __future__ import annotations

import asyncio
import logging
import ssl
from typing import Any
from urllib.parse import urlunsplit

import httpx

from .guard import Refused, Target, target
from .sign import headers

__all__ = ["post", "send", "refused", "TIMEOUT_S", "READ_LIMIT", "new_client", "CATEGORIES"]

log = logging.getLogger("kungfud.webhooks")

TIMEOUT_S = 10.0
READ_LIMIT = 4096
CATEGORIES = (
    "timeout", "refused", "tls", "dns", "address_refused", "protocol",
    "http_status 1xx", "http_status 3xx", "http_status 4xx", "http_status 5xx",
    "failed",  # any of the above, on a host allow_hosts opens on every port (D328)
)


def new_client(connections: int) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        follow_redirects=False,
        timeout=httpx.Timeout(TIMEOUT_S),
        limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
        trust_env=False,  # no proxy from the environment: the checked address is the one connected to
        headers={"user-agent": "kungfud-webhooks"},
    )


async def post(
    client: httpx.AsyncClient, url: str, allow: tuple[str, ...], key: bytes, msg_id: str, timestamp: int, body: bytes,
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


async def send(
    client: httpx.AsyncClient, t: Target, key: bytes, msg_id: str, timestamp: int, body: bytes, span: Any = None,
    extra: dict[str, str] | None = None,
) -> str | None:
    """POST ``body`` to the checked target ``t``: None on a 2xx within the
    timeout; else the category (the detail to the log). ``span``: an object
    whose ``headers`` the POST carries too (a tracing span's traceparent);
    ``key`` empty: no signature; ``extra``: headers of the caller's own."""
    shown = f"[{t.addr}]" if ":" in t.addr else t.addr
    pinned = urlunsplit((t.scheme, f"{shown}:{t.port}", t.path, t.query, ""))
    hdrs = headers(key, msg_id, timestamp, body) if key else {"webhook-id": msg_id, "webhook-timestamp": str(timestamp)}
    hdrs.update(extra or {})
    hdrs["host"] = t.netloc
    if span is not None:
        hdrs.update(span.headers)
    extensions = {"sni_hostname": t.host} if t.scheme == "https" else {}
    try:
        async with asyncio.timeout(TIMEOUT_S):
            async with client.stream("POST", pinned, content=body, headers=hdrs, extensions=extensions) as resp:
                read = 0
                async for chunk in resp.aiter_raw():
                    read += len(chunk)
                    if read >= READ_LIMIT:
                        break
                status = resp.status_code
    except (TimeoutError, httpx.TimeoutException):
        return _failed(t, msg_id, "timeout", f"no answer within {TIMEOUT_S:g} s")
    except httpx.ConnectError as e:
        return _failed(t, msg_id, "tls" if _tls(e) else "refused", _short(e))
    except httpx.HTTPError as e:
        return _failed(t, msg_id, "protocol", f"{e.__class__.__name__} ({_short(e)})")
    if 200 <= status < 300:
        return None
    detail = f"HTTP {status}" + (": a redirect, not followed" if 300 <= status < 400 else "")
    return _failed(t, msg_id, f"http_status {min(max(status // 100, 1), 5)}xx", detail)


def _failed(t: Target, msg_id: str, category: str, detail: str) -> str:
    log.info("webhook %s to %s failed: %s (%s)", msg_id, _where(t), category, detail)
    return "failed" if t.coarse else category  # a host open on every port maps no service (D328)


def _where(t: Target) -> str:
    return t.origin  # the scheme, host and port only: a path or query may carry the receiver's own secrets


def _tls(e: BaseException) -> bool:
    seen: BaseException | None = e
    for _ in range(8):  # the cause chain: httpx → httpcore → ssl
        if seen is None:
            return False
        if isinstance(seen, ssl.SSLError) or "SSL" in str(seen) or "CERTIFICATE" in str(seen).upper():
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _short(e: BaseException) -> str:
    text = str(e) or e.__class__.__name__
    return text[:120]
