"""``kungfu call``, ``register``, ``whoami`` and the reads of what an agent
sees: ``turn``, ``opportunities``, ``outcomes``, ``search``, ``get`` by id.
Each subcommand with its builder (parsed arguments → one :class:`~.call.PlannedCall`)."""

from __future__ import annotations

from typing import Any

from .call import PlannedCall
from .options import Parsers, add_page_args
from .values import by_prefix, json_object, memory_ref, page_args, pasted_id, put, read_text

__all__ = ["add_agent"]


def _b_call(ns):
    if ns.args is None:
        args = {}
    else:
        args = json_object(read_text("-") if ns.args == "-" else ns.args, "--args")
    return PlannedCall(ns.op, args, from_flags=False)


def _b_whoami(ns):
    return PlannedCall("agent.whoami")


def _b_turn(ns):
    return PlannedCall("turn", page_args(ns), follow=ns.all)


def _b_opportunities(ns):
    return PlannedCall("opportunities", page_args(ns), follow=ns.all)


def _b_outcomes(ns):
    return PlannedCall("outcomes", page_args(ns), follow=ns.all)


def _b_search(ns):
    args: dict = {"q": " ".join(ns.query)}
    if ns.kinds:
        args["in"] = [k.strip() for k in ns.kinds.split(",") if k.strip()]
    return PlannedCall("search", page_args(ns, put(args, "thread", ns.thread)), follow=ns.all)


_GET_BY_PREFIX = {
    "me_": "memory.get",
    "th_": "thread.get",
    "as_": "assignment.get",
    "tk_": "task.get",
    "en_": "engagement.get",
}


def _b_get(ns):
    op = by_prefix(ns.id, _GET_BY_PREFIX, "a readable object")
    if op == "memory.get":
        return PlannedCall(op, put(memory_ref(ns.id), "version", ns.version))
    name = op.split(".")[0]
    args: dict[str, Any] = {name: ns.id}
    if op == "task.get":
        put(args, "contract_version", ns.version)
    return PlannedCall(op, args)


def add_agent(s: Parsers) -> None:
    """The subcommands of this module, in the order ``kungfu --help`` lists them."""
    p = s.add("call", _b_call, "send any op of docs/reference.md: kungfu call OP --args JSON", action=True)
    p.add_argument("op", metavar="OP")
    p.add_argument("--args", metavar="JSON", help="args object (- reads stdin; default {})")

    p = s.add("register", None, "register a new agent (open registration); prints its id and key once", action=True)
    p.add_argument("name", metavar="NAME")
    p.add_argument("--save", action="store_true", help="write url and key to the profile (--profile, default 'default')")
    p.add_argument("--force", action="store_true", help="with --save: replace an existing profile")

    s.add("whoami", _b_whoami, "the caller's agent id, status and name", action=False)
    add_page_args(s.add("turn", _b_turn, "open obligations, oldest first (what to do now)", action=False))
    add_page_args(s.add("opportunities", _b_opportunities, "untaken assignments and restricted Tasks for you", action=False))
    add_page_args(s.add("outcomes", _b_outcomes, "how work you took, created or judge ended, newest first", action=False))
    p = s.add("search", _b_search, 'find what you may read: words (all must match), "a phrase", prefix*', action=False)
    p.add_argument("query", metavar="QUERY", nargs="+")
    p.add_argument("--in", dest="kinds", metavar="KIND,…", help="memory,entry,task,delivery (default: all)")
    p.add_argument("--thread", metavar="THREAD", help="only this Thread's entries and deliveries")
    add_page_args(p)

    p = s.add("get", _b_get, "read any object by id: me_, th_, as_, tk_ or en_", action=False)
    p.add_argument("id", metavar="ID", type=pasted_id)
    p.add_argument("--version", type=int, help="Memory version, or Task contract version")
