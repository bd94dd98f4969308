"""Which address a delivery may connect to (WIRE.md 1.2; the rule for one
address is :func:`kungfud.core.webhook.address_refused`): a host and port the
operator lists in ``[webhooks] allow_hosts`` (:func:`kungfud.core.webhook.allows`,
D328) may be anything; any other host is resolved and refused if any address
it resolves to is loopback, private, link-local, multicast or otherwise not
public. The delivery connects to the address checked here (post.py pins it),
so a name cannot be re-bound between the check and the connection.

A refusal carries a stable category for ``webhook.get``'s ``last_error``
(``dns``, ``address_refused``: D329) and the detail for the operator's log."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from urllib.parse import urlsplit

from ..core.webhook import SETTING, address_refused, allows, default_port, every_port

__all__ = ["Refused", "Target", "resolve", "target", "set_refusal", "RESOLVE_TIMEOUT_S"]

RESOLVE_TIMEOUT_S = 5.0


class Refused(Exception):
    """The host may not be reached: the message (why) for ``webhook.set``'s
    refusal, ``category`` for ``webhook.get`` (``dns`` or ``address_refused``),
    ``detail`` (the address it resolved to) for the operator's log only: an
    agent learns that a name leads somewhere non-public, not where (D329)."""

    def __init__(self, message: str, category: str = "address_refused", detail: str = ""):
        super().__init__(message)
        self.category = category
        self.detail = detail


class Target:
    """Where one delivery goes: the URL's parts and the checked address."""

    __slots__ = ("scheme", "host", "port", "netloc", "path", "query", "addr", "coarse")

    def __init__(self, url: str, addr: str = ""):
        parts = urlsplit(url)
        self.scheme = parts.scheme
        self.host = (parts.hostname or "").lower()
        self.port = parts.port or default_port(parts.scheme)
        self.netloc = parts.netloc.rsplit("@", 1)[-1]
        self.path = parts.path or "/"
        self.query = parts.query
        self.addr = addr
        self.coarse = False  # every port of the host is listed: a failure is told as "failed" only (D328)

    @property
    def origin(self) -> str:
        """``scheme://host:port``: what POST slots are shared between (slots.py)."""
        return f"{self.scheme}://{f'[{self.host}]' if ':' in self.host else self.host}:{self.port}"


async def resolve(host: str, port: int, allow: tuple[str, ...], scheme: str = "https") -> str:
    """The address to connect to for ``host`` (lower case, no brackets) on ``port``."""
    allowed = allows(allow, host, port, scheme)
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    if literal is not None:
        if not allowed and address_refused(literal):
            raise Refused(f"address {host} is not public; the operator must list it (and its port) in {SETTING}")
        return str(literal)
    loop = asyncio.get_running_loop()
    try:
        infos = await asyncio.wait_for(
            loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP), RESOLVE_TIMEOUT_S
        )
    except (OSError, asyncio.TimeoutError) as e:
        raise Refused(f"host {host} does not resolve ({e.__class__.__name__})", "dns") from None
    addrs = list(dict.fromkeys(info[4][0] for info in infos))
    if not addrs:
        raise Refused(f"host {host} does not resolve", "dns")
    if not allowed:
        for a in addrs:
            if address_refused(ipaddress.ip_address(a.split("%", 1)[0])):
                raise Refused(
                    f"host {host} resolves to an address that is not public; the operator must list it (and its "
                    f"port) in {SETTING}",
                    detail=f"resolves to {a}",
                )
    return addrs[0]


async def target(url: str, allow: tuple[str, ...]) -> Target:
    """The checked destination of a delivery to ``url`` (raises :class:`Refused`).
    Run before a POST slot is taken: a slow resolver holds no slot (D330)."""
    t = Target(url)
    t.addr = await resolve(t.host, t.port, allow, t.scheme)
    t.coarse = every_port(allow, t.host)
    return t


async def set_refusal(url: str, allow: tuple[str, ...]) -> str | None:
    """At ``webhook.set``: why the host of ``url`` may not be reached after
    resolving it; None when it may, or when the URL's text alone decides
    (the core refuses that, :func:`kungfud.core.webhook.url_refusal`)."""
    from ..core.webhook import url_refusal

    if url_refusal(url, allow) is not None:
        return None
    t = Target(url)
    if allows(allow, t.host, t.port, t.scheme):
        return None
    try:
        await resolve(t.host, t.port, allow, t.scheme)
    except Refused as e:
        return str(e)
    return None
