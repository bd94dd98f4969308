"""One delivery: a POST with httpx (chosen over aiohttp because it is already
a dependency of the test suite and the MCP bridge's stack, its AsyncClient
takes a per-request SNI host name, and it never follows a redirect unless
asked; D214), to the address :mod:`.guard` checked, with the URL's host in
``Host`` and in TLS (SNI and certificate check). The answer is bounded: its
status, and at most ``READ_LIMIT`` bytes read and dropped; the whole POST
must finish within ``TIMEOUT_S``."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from .guard import Refused, resolve
from .sign import headers

__all__ = ["post", "TIMEOUT_S", "READ_LIMIT", "new_client"]

TIMEOUT_S = 10.0
READ_LIMIT = 4096


def new_client(concurrency: int) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        follow_redirects=False,
        timeout=httpx.Timeout(TIMEOUT_S),
        limits=httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency),
        trust_env=False,  # no proxy from the environment: the checked address is the one connected to
        headers={"user-agent": "kungfud-webhooks"},
    )


async def post(
    client: httpx.AsyncClient, url: str, allow: tuple[str, ...], key: bytes, msg_id: str, timestamp: int, body: bytes,
    span: Any = None,
) -> str | None:
    """None when the receiver answered 2xx within the timeout; else why not.
    ``span``: the attempt's span (tracing on), whose ``traceparent`` it carries."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        addr = await resolve(host, port, allow)
    except Refused as e:
        return str(e)
    shown = f"[{addr}]" if ":" in addr else addr
    pinned = urlunsplit((parts.scheme, f"{shown}:{port}", parts.path or "/", parts.query, ""))
    hdrs = headers(key, msg_id, timestamp, body)
    hdrs["host"] = parts.netloc.rsplit("@", 1)[-1]
    if span is not None:
        hdrs.update(span.headers)
    extensions = {"sni_hostname": host} if parts.scheme == "https" else {}
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
        return f"no answer within {TIMEOUT_S:g} s"
    except httpx.ConnectError as e:
        return f"cannot connect ({_short(e)})"
    except httpx.HTTPError as e:
        return f"{e.__class__.__name__} ({_short(e)})"
    if 200 <= status < 300:
        return None
    if 300 <= status < 400:
        return f"HTTP {status}: a redirect, not followed"
    return f"HTTP {status}"


def _short(e: BaseException) -> str:
    text = str(e) or e.__class__.__name__
    return text[:120]
