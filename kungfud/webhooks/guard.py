"""Which address a delivery may connect to (WIRE.md 1.2; the rule for one
address is :func:`kungfud.core.webhook.address_refused`): a host the
operator lists in ``[webhooks] allow_hosts`` may be anything; any other host
is resolved and refused if any address it resolves to is loopback, private,
link-local, multicast or otherwise not public. The delivery connects to the
address checked here (post.py pins it), so a name cannot be re-bound between
the check and the connection."""

from __future__ import annotations

import asyncio
import ipaddress
import socket

from ..core.webhook import SETTING, address_refused

__all__ = ["Refused", "resolve", "set_refusal", "RESOLVE_TIMEOUT_S"]

RESOLVE_TIMEOUT_S = 5.0


class Refused(Exception):
    """The host may not be reached (the message says why, for ``last_error``)."""


async def resolve(host: str, port: int, allow: tuple[str, ...]) -> str:
    """The address to connect to for ``host`` (lower case, no brackets)."""
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    if literal is not None:
        if host not in allow and address_refused(literal):
            raise Refused(f"address {host} is not public; the operator must list it in {SETTING}")
        return str(literal)
    loop = asyncio.get_running_loop()
    try:
        infos = await asyncio.wait_for(
            loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP), RESOLVE_TIMEOUT_S
        )
    except (OSError, asyncio.TimeoutError) as e:
        raise Refused(f"host {host} does not resolve ({e.__class__.__name__})") from None
    addrs = list(dict.fromkeys(info[4][0] for info in infos))
    if not addrs:
        raise Refused(f"host {host} does not resolve")
    if host not in allow:
        for a in addrs:
            if address_refused(ipaddress.ip_address(a.split("%", 1)[0])):
                raise Refused(f"host {host} resolves to {a}, which is not public; the operator must list it in {SETTING}")
    return addrs[0]


async def set_refusal(url: str, allow: tuple[str, ...]) -> str | None:
    """At ``webhook.set``: why the host of ``url`` may not be reached after
    resolving it; None when it may, or when the URL's text alone decides
    (the core refuses that, :func:`kungfud.core.webhook.url_refusal`)."""
    from urllib.parse import urlsplit

    from ..core.webhook import url_refusal

    if url_refusal(url, allow) is not None:
        return None
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    port = parts.port or (443 if parts.scheme == "https" else 80)
    if host in allow:
        return None
    try:
        await resolve(host, port, allow)
    except Refused as e:
        return str(e)
    return None
