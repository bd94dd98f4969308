"""Who may open a websocket before it has authenticated (WIRE.md "Transport":
nothing a client sends slows other connections; §12 R12-11; D231, D232).

- :func:`foreign` — the request's ``Host`` and ``Origin``. A daemon listening
  on loopback answers only requests addressed to a loopback name (or a host
  the operator allows): a page on another site cannot reach it through DNS
  rebinding. An ``Origin``, when present, must be the daemon's own (the
  console's: the scheme and the ``Host`` the request came to) or one the
  operator allows. Clients that send no ``Origin`` (CLI, library, MCP bridge,
  agents) are unaffected: only browsers send one, and a browser applies no CORS
  to websockets, so this check is the only thing between a web page and the
  daemon.
- :func:`duplicated` — a request that sends a header the server reads more
  than once (two ``Host``, ``Origin`` or ``Authorization`` headers: which one
  would count?) is answered 400 before anything else is read, and logs nothing
  (WIRE.md "Transport": nothing a client sends crashes the daemon).
- :class:`Unauthenticated` — connections that have not authenticated yet (no
  valid ``Authorization`` header, no ``hello`` so far) have a budget of their
  own, daemon-wide and per peer address (IPv6: per /64), so they cannot take
  the slots of agents with a key; each such connection is closed when it has
  not authenticated within ``hello_within_s`` (the server's handler).
"""

from __future__ import annotations

import asyncio
import ipaddress
from typing import Any, Callable

__all__ = ["address_key", "foreign", "duplicated", "READ_HEADERS", "is_loopback", "Unauthenticated", "Slot", "hello_deadline"]

#: Every request header the daemon's port reads itself (its upgrade, the
#: console, the door; websockets checks its own ``Sec-WebSocket-*`` and
#: ``Upgrade``): each may come once at most. Tracing's carriers too (WIRE.md 1.3).
READ_HEADERS = ("Host", "Origin", "Authorization", "traceparent", "tracestate")


def address_key(peer: Any) -> str:
    """What per-address budgets count against: the peer's address, something
    a client cannot multiply for free (IPv6: its /64, which one host usually
    holds whole; an IPv4-mapped address: the IPv4 one). Behind a proxy, every
    client shares the proxy's address."""
    host = peer[0] if isinstance(peer, tuple) and peer else str(peer)
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return f"addr:{host}"
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return f"addr:{ip.ipv4_mapped}"
        return f"addr:{ipaddress.IPv6Network((ip, 64), strict=False)}"
    return f"addr:{ip}"


def is_loopback(host: str) -> bool:
    """``host`` (a name or address, IPv6 with or without brackets) is this host only."""
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def _split_host(value: str) -> str:
    """The host name of a ``Host`` header value (``name:port``, ``[::1]:port``)."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:].split("]", 1)[0]
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def duplicated(headers: Any, names: tuple[str, ...] = READ_HEADERS) -> tuple[int, str] | None:
    """(400, body) when ``headers`` (websockets' ``Headers``, or pairs) hold one
    of ``names`` more than once (names compare without case); else None."""
    pairs = headers.raw_items() if hasattr(headers, "raw_items") else headers
    wanted = {n.lower(): n for n in names}
    seen: set[str] = set()
    for name, _ in pairs:
        low = name.lower()
        if low in wanted:
            if low in seen:
                return 400, f"the {wanted[low]} header may appear once; this request sends it more than once\n"
            seen.add(low)
    return None


def foreign(
    headers: Any, listen_host: str, allowed_hosts: tuple[str, ...] | list[str], allowed_origins: tuple[str, ...] | list[str]
) -> tuple[int, str] | None:
    """None when the request may go on; else (HTTP status, body) to answer:
    421 for a ``Host`` a loopback daemon does not answer to, 403 for a foreign
    ``Origin``."""
    host_header = headers.get("Host")
    if is_loopback(listen_host):
        name = _split_host(host_header or "")
        allowed = {h.lower() for h in allowed_hosts}
        if not (is_loopback(name) or name in allowed or (host_header or "").strip().lower() in allowed):
            return 421, "this daemon listens on loopback and answers only to a loopback Host (or [server] allowed_hosts)\n"
    origin = headers.get("Origin")
    if origin is None:
        return None
    origin = origin.strip().rstrip("/").lower()
    if host_header is not None and origin in (f"http://{host_header.strip().lower()}", f"https://{host_header.strip().lower()}"):
        return None  # the console's own origin: the page this daemon served
    if origin in {o.strip().rstrip("/").lower() for o in allowed_origins}:
        return None
    return 403, "cross-origin requests are refused: this Origin is not the daemon's own nor in [server] allowed_origins\n"


class Slot:
    """One unauthenticated connection's place in the budget; given back once
    (when it authenticates, or when it is gone, whichever comes first)."""

    __slots__ = ("_release",)

    def __init__(self, release: Callable[[], None]):
        self._release: Callable[[], None] | None = release

    def free(self) -> None:
        if self._release is not None:
            release, self._release = self._release, None
            release()


class Unauthenticated:
    """The budget of connections that have not authenticated: at most ``total``
    at once, and ``per_address`` from one peer address (:func:`address_key`)."""

    def __init__(self, total: int, per_address: int):
        self.total = total
        self.per_address = per_address
        self.count = 0
        self.by_address: dict[str, int] = {}

    def take(self, address: str) -> Slot | str:
        """A slot for a new connection from ``address``, or why there is none."""
        if self.count >= self.total:
            return "too many connections waiting to authenticate; retry later, or connect with Authorization: Bearer <key>"
        held = self.by_address.get(address, 0)
        if held >= self.per_address:
            return f"too many unauthenticated connections from this address (limit {self.per_address}); authenticate or close some"
        self.count += 1
        self.by_address[address] = held + 1
        return Slot(lambda: self._give_back(address))

    def _give_back(self, address: str) -> None:
        self.count -= 1
        left = self.by_address[address] - 1
        if left:
            self.by_address[address] = left
        else:
            del self.by_address[address]


def hello_deadline(conn: Any, within_s: float) -> asyncio.TimerHandle:
    """Close ``conn`` (a :class:`~.connection.Conn` not authenticated yet) with
    1008 when it has not authenticated within ``within_s`` of connecting or of
    its last admitted registration (``conn.hello_by``, which the server moves
    on), once no request of it is in flight. Returns the first timer."""
    loop = asyncio.get_running_loop()
    conn.hello_by = loop.time() + within_s

    def check() -> None:
        if conn.agent is not None or conn.closed:
            return
        if conn.in_flight or loop.time() < conn.hello_by:  # a registration under way, or a recent one
            loop.call_later(max(0.5, conn.hello_by - loop.time()), check)
            return
        why = f"authenticate (hello) within {within_s:g} s of connecting"
        asyncio.ensure_future(conn.close(1008, why))

    return loop.call_later(within_s, check)
