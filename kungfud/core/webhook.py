"""Webhooks (WIRE.md 1.2 "Webhooks: events for agents that hold no
connection"): an agent's one endpoint, set and cleared by the agent itself,
cleared by its deactivation and by ``admin.agent.reset_key`` (D210).

The registration is the state of the agent's sub-object ``ag_….webhook``,
folded from the facts :class:`WebhookSet` and :class:`WebhookCleared` like
every other state, so it is durable, cleared in the same atomic action as a
deactivation or key reset, and rebuilt by ``kungfud check``. The signing key
is in the fact and the state (the daemon signs with it); the wire shows it
once, in ``webhook.set``'s first reply (the receipt nulls ``secret``, D211).

Which URLs may be set is decided here once, on the URL alone (scheme, host
shape, literal addresses): :func:`url_refusal`; :func:`address_refused` is the
rule for one address, applied again by the delivery runner to every address a
host name resolves to (kungfud/webhooks/guard.py). No I/O here.
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
from typing import TYPE_CHECKING, Literal
from urllib.parse import urlsplit

import msgspec

from ..conventions import allow_entry
from ..errors import DecisionRefused, Rejection, rejects
from ..event_kinds import DEFAULT_KINDS, KINDS
from .agent import require_active
from .facts import Decision, Fact

if TYPE_CHECKING:
    from .context import Ctx

__all__ = [
    "WebhookState", "WebhookSet", "WebhookCleared", "SetWebhook", "ClearWebhook", "webhook_obj", "EVENTS",
    "webhook_agent", "DEFAULT_EVENTS", "decide_set", "decide_clear", "cleared_by", "apply", "secret_of", "url_refusal",
    "address_refused", "MAX_URL", "SETTING", "allow_entry", "allows", "default_port",
]

EVENTS = KINDS  # a webhook may name every kind (kungfud/event_kinds.py)
DEFAULT_EVENTS = DEFAULT_KINDS
MAX_URL = 2048
SETTING = "[webhooks] allow_hosts"


_SUB = ".webhook"


def webhook_obj(agent: str) -> str:
    """The agent's webhook sub-object (no wire id contains ``.webhook``)."""
    return agent + _SUB


def webhook_agent(obj: str) -> str | None:
    """The agent whose webhook sub-object ``obj`` is (None: any other object
    or name)."""
    return obj[: -len(_SUB)] if obj.endswith(_SUB) else None


class WebhookSet(Fact, frozen=True, tag="agent.webhook_set"):
    agent: str
    url: str
    events: tuple[str, ...]
    key: bytes  # the signing key (32 bytes); shown once as the secret
    since: int  # deliveries start after this seq (no back-fill)
    hook: str  # this registration's id: the runner's cursor names it

    def objects(self) -> tuple[str, ...]:
        return (webhook_obj(self.agent),)


class WebhookCleared(Fact, frozen=True, tag="agent.webhook_cleared"):
    agent: str
    why: Literal["cleared", "deactivated", "key_reset"]

    def objects(self) -> tuple[str, ...]:
        return (webhook_obj(self.agent),)


class WebhookState(msgspec.Struct, frozen=True):
    agent: str
    url: str | None = None  # None: no endpoint (cleared)
    events: tuple[str, ...] = ()
    key: bytes = b""
    since: int = 0
    hook: str = ""
    set_at: int = 0


class SetWebhook(msgspec.Struct, frozen=True):
    url: str
    events: tuple[str, ...] | None = None


class ClearWebhook(msgspec.Struct, frozen=True):
    pass


def secret_of(key: bytes) -> str:
    """The Standard Webhooks secret form of a signing key."""
    return "whsec_" + base64.b64encode(key).decode()


# IPv6 forms that carry an IPv4 address in their last 32 bits (D327): a
# connection to one may reach that IPv4 address (a NAT64 gateway, SIIT), so it
# is judged by it. ::ffff:0:0/96 (mapped) is Python's ipv4_mapped; 2002::/16
# (6to4) carries it in bits 16–48, Python's sixtofour.
_EMBED_LAST32 = (
    ipaddress.IPv6Network("64:ff9b::/96"),  # NAT64, the well-known prefix (RFC 6052)
    ipaddress.IPv6Network("::ffff:0:0:0/96"),  # IPv4-translated (RFC 2765, SIIT)
    ipaddress.IPv6Network("::/96"),  # IPv4-compatible ::a.b.c.d (RFC 4291, deprecated)
)
# Local-use NAT64 (RFC 8215): the network's own translator, addresses placed as
# it chooses; never a public receiver.
_NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")


def _embedded(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if any(ip in net for net in _EMBED_LAST32):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def address_refused(ip: "ipaddress.IPv4Address | ipaddress.IPv6Address") -> bool:
    """An address a webhook may not reach unless its host is allowed by the
    operator: loopback, private, link-local (cloud metadata at
    169.254.169.254), multicast, unspecified, reserved, shared — anything not
    globally routable. An IPv6 form that embeds an IPv4 address (mapped,
    NAT64, 6to4, IPv4-compatible, IPv4-translated) is judged by the IPv4
    address as well (D327)."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip in _NAT64_LOCAL:
            return True
        v4 = _embedded(ip)
        if v4 is not None and (v4.is_multicast or not v4.is_global):
            return True
        if ip.ipv4_mapped is not None:
            return False  # judged as the IPv4 address alone (Python calls ::ffff:0:0/96 reserved)
    return ip.is_multicast or not ip.is_global


def default_port(scheme: str) -> int:
    return 443 if scheme == "https" else 80


def allows(allow_hosts: tuple[str, ...], host: str, port: int, scheme: str) -> bool:
    """Whether the operator's ``allow_hosts`` lists ``host`` (lower case, no
    brackets) on ``port`` for a URL of ``scheme`` (D328): an entry naming a
    port allows that port only; a bare host (WIRE.md 1.2's ``"127.0.0.1"``)
    and ``host:*`` allow every port — a failure there is then told to the
    agent only as ``failed`` (:func:`every_port`), so it maps no service."""
    for text in allow_hosts:
        entry = allow_entry(text)
        if entry is None or entry[0] != host:
            continue
        want = entry[1]
        if want is None or want == -1 or want == port:
            return True
    return False


def every_port(allow_hosts: tuple[str, ...], host: str) -> bool:
    """Whether ``allow_hosts`` opens every port of ``host`` (a bare entry or
    ``host:*``): what a delivery there failed on is then logged for the
    operator and shown to the agent as ``failed`` only (D328, D329; security
    review round 4 finding 3: categories told a closed port, a non-HTTP
    service and an HTTP service apart)."""
    for text in allow_hosts:
        entry = allow_entry(text)
        if entry is not None and entry[0] == host and entry[1] in (None, -1):
            return True
    return False


def url_refusal(url: str, allow_hosts: tuple[str, ...]) -> str | None:
    """Why ``url`` may not be a webhook endpoint, on its text alone; None
    when it may (a host name is resolved and checked again at every delivery)."""
    if len(url) > MAX_URL:
        return f"url is {len(url)} characters; the limit is {MAX_URL}"
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # raises for a bad port
    except ValueError as e:
        return f"url is not a valid URL ({e})"
    if parts.scheme not in ("https", "http"):
        return "url must start with https:// (or http:// to a host listed in " + SETTING + ")"
    if not host:
        return "url has no host"
    if parts.username is not None or parts.password is not None:
        return "url may not carry a user name or password"
    if parts.fragment:
        return "url may not carry a #fragment"
    if any(c.isspace() or ord(c) < 32 for c in url):
        return "url may not contain spaces or control characters"
    host = host.lower()
    allowed = allows(allow_hosts, host, parts.port or default_port(parts.scheme), parts.scheme)
    if parts.scheme == "http" and not allowed:
        return f"http:// is only for hosts and ports the operator lists in {SETTING}; use https://"
    if allowed:
        return None
    if host == "localhost" or host.endswith(".localhost"):
        return f"host {host} is loopback; the operator must list it (and its port) in {SETTING}"
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return None  # a name: resolved and checked at delivery (and by the server at set)
    if address_refused(ip):
        return f"address {host} is loopback, private, link-local or otherwise not public; the operator must list it (and its port) in {SETTING}"
    return None


@rejects
def decide_set(cmd: SetWebhook, ctx: "Ctx") -> Decision | Rejection:
    """``webhook.set``: the caller's endpoint, replacing any (a new secret)."""
    if (r := require_active(ctx)) is not None:
        raise DecisionRefused(r)
    assert ctx.caller is not None
    reason = url_refusal(cmd.url, ctx.limits.webhook_allow_hosts)
    if reason is not None:
        raise DecisionRefused(Rejection("bad_request", reason, "revise"))
    events = DEFAULT_EVENTS if cmd.events is None else tuple(e for e in EVENTS if e in cmd.events)
    if not events:
        raise DecisionRefused(Rejection("bad_request", f"events must name at least one of {', '.join(EVENTS)}", "revise"))
    agent = ctx.caller.agent
    obj = webhook_obj(agent)
    before = ctx.get(obj)  # its version guards a concurrent set or clear (L5)
    # 32 bytes derived from the daemon's secret source (the core draws no randomness itself).
    key = hashlib.sha256(ctx.new_secret().encode()).digest()
    since = ctx.feed_seq()
    fact = WebhookSet(at=ctx.now, by=agent, agent=agent, url=cmd.url, events=events, key=key, since=since,
                      hook=ctx.new_id("wh_"))
    result = {"url": cmd.url, "events": list(events), "secret": secret_of(key), "since": since}
    return Decision([fact], result, {obj: apply(before, fact)})


@rejects
def decide_clear(cmd: ClearWebhook, ctx: "Ctx") -> Decision | Rejection:
    """``webhook.clear``: no endpoint any more (also when there was none)."""
    if (r := require_active(ctx)) is not None:
        raise DecisionRefused(r)
    assert ctx.caller is not None
    agent = ctx.caller.agent
    obj = webhook_obj(agent)
    before = ctx.get(obj)
    fact = WebhookCleared(at=ctx.now, by=agent, agent=agent, why="cleared")
    return Decision([fact], {"cleared": True}, {obj: apply(before, fact)})


def cleared_by(agent: str, why: Literal["deactivated", "key_reset"], ctx: "Ctx") -> list[Fact]:
    """The fact that clears ``agent``'s endpoint in the same action as its
    deactivation or key reset; none when it has no endpoint."""
    state = ctx.get(webhook_obj(agent))
    if state is None or state.url is None:
        return []
    by = ctx.caller.agent if ctx.caller is not None else None
    return [WebhookCleared(at=ctx.now, by=by, agent=agent, why=why)]


def apply(state: WebhookState | None, fact: Fact) -> WebhookState:
    if isinstance(fact, WebhookSet):
        return WebhookState(fact.agent, fact.url, fact.events, fact.key, fact.since, fact.hook, fact.at)
    if isinstance(fact, WebhookCleared):
        return WebhookState(fact.agent)
    raise TypeError(f"webhook cannot apply {type(fact).__name__}")
