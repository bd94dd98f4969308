"""An agent's account and keys: ``kungfu admin …`` (status, list, create,
reset a key), ``rotate-key``, scoped keys (``key …``, WIRE.md 1.3) and its
webhook (``webhook …``, WIRE.md 1.2). Each subcommand with its builder."""

from __future__ import annotations

from ..event_kinds import DEFAULT_KINDS, KINDS
from .call import PlannedCall
from .options import Parsers, add_page_args, add_save_as_args, duration
from .values import page_args, put

__all__ = ["add_account"]


def _b_set_status(ns):
    return PlannedCall("admin.agent.set_status", {"agent": ns.agent, "status": ns.status})


def _b_admin_agents(ns):
    return PlannedCall("admin.agent.list", page_args(ns, put({}, "status", ns.status)), follow=ns.all)


def _b_admin_create(ns):
    return PlannedCall("admin.agent.create", {"content": {"name": ns.name}})


def _b_admin_reset_key(ns):
    return PlannedCall("admin.agent.reset_key", {"agent": ns.agent})


def _b_rotate_key(ns):
    return PlannedCall("agent.rotate_key")


def _b_webhook_set(ns):
    return PlannedCall("webhook.set", put({"url": ns.hook_url}, "events", ns.events.split(",") if ns.events else None))


def _b_webhook(op: str):
    return lambda ns: PlannedCall(op)


def add_account(s: Parsers) -> None:
    """The ``admin`` group, ``rotate-key``, and the ``key`` and ``webhook`` groups."""
    ad = s.group("admin", "administration (admin agents only)")
    p = ad.add("set-status", _b_set_status, "activate or deactivate an agent", action=True)
    p.add_argument("agent", metavar="AGENT")
    p.add_argument("status", choices=["active", "deactivated"])
    p = ad.add("agents", _b_admin_agents, "list agents with status and last seen", action=False)
    p.add_argument("--status", choices=["active", "deactivated"])
    add_page_args(p)
    p = ad.add("create", _b_admin_create, "create an agent (also with open registration off); prints its key once", action=True)
    p.add_argument("name", metavar="NAME")
    add_save_as_args(p)
    p = ad.add("reset-key", _b_admin_reset_key, "give an agent a new key (lost or leaked key); prints it once", action=True)
    p.add_argument("agent", metavar="AGENT")
    add_save_as_args(p)

    p = s.add("rotate-key", _b_rotate_key, "replace your key with a new one; the old key stops working at once", action=True)
    p.add_argument("--save", action="store_true", help="write the new key into the profile in use (--profile, default 'default')")

    k = s.group("key", "scoped keys: create, list, revoke (a key that can do less; docs/operations.md)")
    p = k.add("create", lambda ns: PlannedCall("agent.key.create", {"scope": ns.scope, "label": ns.label or f"{ns.scope} key", **(
        {"expires_in_s": ns.expires_in} if ns.expires_in else {})}), "a key with fewer rights; prints it once", action=True)
    p.add_argument("--scope", required=True, choices=["read", "worker", "a2a"], help="read: reads; worker: reads and doing work; a2a: the a2a.* ops")
    p.add_argument("--label", metavar="TEXT", help="what or who holds it (shown by key list)")
    p.add_argument("--expires-in", type=duration, metavar="DURATION", help="seconds, or 90m, 12h, 30d (default: never)")
    k.add("list", lambda ns: PlannedCall("agent.key.list"), "your live scoped keys (never the keys)", action=False)
    k.add("revoke", lambda ns: PlannedCall("agent.key.revoke", {"key_id": ns.key_id}), "revoke a scoped key; its connections close",
          action=True).add_argument("key_id", metavar="KEY_ID")

    w = s.group("webhook", "webhook: set, get, clear (your events POSTed to a URL, signed; docs/webhooks.md)")
    p = w.add("set", _b_webhook_set, "POST your events to URL (replaces any); prints the signing secret once", action=True)
    # dest is not "url": that is the global --url (the daemon's), which a
    # positional of the same dest overwrote (issue 37).
    p.add_argument("hook_url", metavar="URL", help="where to POST your events (https://, or http:// to an allowed host)")
    p.add_argument("--events", metavar="KIND,…", help=f"{','.join(KINDS)} (default: {','.join(DEFAULT_KINDS)})")
    w.add("get", _b_webhook("webhook.get"), "your webhook: state, delivered seq, pending, last error", action=False)
    w.add("clear", _b_webhook("webhook.clear"), "stop POSTing your events", action=True)
