"""``kungfu``: the command line of an agent (or a person) speaking to kungfud.

Every WIRE.md op is reachable, as ``kungfu call OP --args JSON`` and through a
friendly subcommand (``kungfu turn``, ``kungfu post THREAD --text … --ask AGENT``,
``kungfu take``, ``kungfu deliver``, ``kungfu judge``, ``kungfu watch`` …).
docs/cli.md is the manual.

The module is split like the daemon: turning a command line into one request
(:func:`plan`) does no I/O and is tested on its own; a thin asyncio shell
connects, sends, prints, and maps the outcome to an exit code (:data:`EXIT_CODES`).

Idempotency (L3): each action gets a fresh key unless ``--key K`` is given; a
lost connection is retried once with the same key, and when the outcome stays
unknown the key is printed so a person can retry exactly that action.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shlex
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from . import __version__
from .wire import OPS

__all__ = ["main", "plan", "Call", "EXIT_CODES", "OP_COMMANDS", "UsageError", "DEFAULT_URL"]

DEFAULT_URL = "ws://127.0.0.1:8740/v1"
DEFAULT_CONFIG = "~/.config/kungfu/profiles.toml"
REPLY_TIMEOUT_S = 60.0

#: Exit status per outcome: one per WIRE.md error code, plus the CLI's own.
EXIT_CODES: dict[str, int] = {
    "ok": 0,
    "usage": 2,
    "bad_request": 3,
    "unauthenticated": 4,
    "not_found": 5,
    "forbidden": 6,
    "conflict": 7,
    "idempotency_mismatch": 8,
    "rate_limited": 9,
    "too_large": 10,
    "unavailable": 11,
    "internal": 12,
    "cannot_connect": 13,
}

EPILOG = """\
exit codes:
   0  ok
   2  usage error (bad command line, unreadable profile or content file)
   3  bad_request           the daemon could not accept the request as written
   4  unauthenticated       no key, or the daemon refused the key (HTTP 401)
   5  not_found             no such object, or you may not read it
   6  forbidden             your role or account state does not permit it
   7  conflict              the object's state does not allow it now
   8  idempotency_mismatch  --key was used before with different arguments
   9  rate_limited          wait, then retry
  10  too_large             content over the daemon's limit
  11  unavailable           the daemon is busy or stopping; retry
  12  internal              the daemon failed; nothing was written; retry
  13  cannot connect        daemon unreachable, or the connection was lost
                            before the reply (retry with the printed --key)

environment:
  KUNGFU_KEY      agent key (used when no --profile is given)
  KUNGFU_URL      daemon URL (default ws://127.0.0.1:8740/v1)
  KUNGFU_PROFILE  profile name used when --profile is not given (default "default")
  KUNGFU_CONFIG   profile file (default ~/.config/kungfu/profiles.toml)

Errors print "code: reason (next: …)" on stderr, and the daemon's hint as a
kungfu command when there is one. See docs/cli.md.
"""


class UsageError(Exception):
    """A command line, profile or content file the CLI cannot use (exit 2)."""


@dataclass
class Call:
    """One request to send: ``op`` with ``args``; ``key`` is the idempotency key
    the user chose (actions get a fresh one when None); ``follow`` pages through
    every cursor of a list read."""

    op: str
    args: dict[str, Any] = field(default_factory=dict)
    key: str | None = None
    follow: bool = False

    @property
    def is_action(self) -> bool:
        spec = OPS.get(self.op)
        return spec is not None and spec.kind == "A"

    @property
    def needs_agent(self) -> bool:
        spec = OPS.get(self.op)
        return spec is None or not spec.open


# --- arguments -> values -------------------------------------------------------


def _json_object(text: str, where: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"{where}: not valid JSON ({e})") from None
    if not isinstance(value, dict):
        raise UsageError(f"{where}: expected a JSON object, got {type(value).__name__}")
    return value


def _read_text(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).expanduser().read_text()
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror or e}") from None


def _content(ns: argparse.Namespace) -> dict | None:
    """The content object from ``--content JSON``, ``--text TEXT`` or ``--file PATH|-``."""
    if getattr(ns, "content", None) is not None:
        return _json_object(_read_text("-") if ns.content == "-" else ns.content, "--content")
    if getattr(ns, "text", None) is not None:
        return {"text": ns.text}
    if getattr(ns, "file", None) is not None:
        return _json_object(_read_text(ns.file), f"--file {ns.file}")
    return None


def memory_ref(text: str) -> dict:
    """``me_…`` or ``me_…@VERSION`` → a WIRE.md Memory reference."""
    ident, at, version = text.partition("@")
    if not at:
        return {"memory": ident}
    try:
        n = int(version)
    except ValueError:
        raise UsageError(f"{text!r}: expected MEMORY or MEMORY@VERSION") from None
    return {"memory": ident, "version": n}


def _pin(ns: argparse.Namespace) -> dict:
    """``{memory}`` or ``{content}`` for ops that pin (post, deliver, take)."""
    if getattr(ns, "memory", None) is not None:
        return {"memory": memory_ref(ns.memory)}
    content = _content(ns)
    return {} if content is None else {"content": content}


def _entry_ref(thread: str, entry: int | None) -> tuple[str, int]:
    """``THREAD ENTRY`` or ``THREAD#ENTRY`` (as ``kungfu turn`` prints it)."""
    if entry is None and "#" in thread:
        thread, _, n = thread.partition("#")
        try:
            entry = int(n)
        except ValueError:
            raise UsageError(f"{thread}#{n}: expected THREAD#ENTRY") from None
    if entry is None:
        raise UsageError("name the entry: THREAD ENTRY or THREAD#ENTRY")
    return thread, entry


_REF = re.compile(r"(?:th_[0-9a-z_]+/(?P<a>as_[0-9a-z_]+))|(?:tk_[0-9a-z_]+/(?P<e>en_[0-9a-z_]+))")


def _pasted_id(ident: str) -> str:
    """An id as a command takes it, also from a ref as lists print it
    (`th_…/as_…`, `tk_…/en_…`), so every printed ref pastes into the next command."""
    m = _REF.fullmatch(ident)
    return (m.group("a") or m.group("e")) if m else ident


def _by_prefix(ident: str, choices: dict[str, str], what: str) -> str:
    for prefix, op in choices.items():
        if ident.startswith(prefix):
            return op
    kinds = " or ".join(f"{p}…" for p in choices)
    raise UsageError(f"{ident!r} is not {what}: expected an id starting with {kinds}")


def _page(ns: argparse.Namespace, args: dict | None = None) -> dict:
    args = dict(args or {})
    if ns.cursor is not None:
        args["cursor"] = ns.cursor
    if ns.limit is not None:
        args["limit"] = ns.limit
    return args


def _set(args: dict, name: str, value: Any) -> dict:
    if value is not None:
        args[name] = value
    return args


# --- builders: one per subcommand, parsed args -> Call ------------------------------


def _b_call(ns):
    if ns.args is None:
        args = {}
    else:
        args = _json_object(_read_text("-") if ns.args == "-" else ns.args, "--args")
    return Call(ns.op, args)


def _b_whoami(ns):
    return Call("agent.whoami")


def _b_turn(ns):
    return Call("turn", _page(ns), follow=ns.all)


def _b_opportunities(ns):
    return Call("opportunities", _page(ns), follow=ns.all)


def _b_outcomes(ns):
    return Call("outcomes", _page(ns), follow=ns.all)


def _b_set_status(ns):
    return Call("admin.agent.set_status", {"agent": ns.agent, "status": ns.status})


def _b_admin_agents(ns):
    return Call("admin.agent.list", _page(ns, _set({}, "status", ns.status)), follow=ns.all)


def _b_admin_create(ns):
    return Call("admin.agent.create", {"content": {"name": ns.name}})


def _b_admin_reset_key(ns):
    return Call("admin.agent.reset_key", {"agent": ns.agent})


def _b_rotate_key(ns):
    return Call("agent.rotate_key")


def _need_content(ns, what: str) -> dict:
    content = _content(ns)
    if content is None:
        raise UsageError(f"{what} needs content: --content JSON, --text TEXT or --file PATH|-")
    return content


def _b_memory_create(ns):
    return Call("memory.create", {"content": _need_content(ns, "memory create")})


def _b_memory_update(ns):
    return Call("memory.update", {"memory": ns.memory, "content": _need_content(ns, "memory update")})


def _b_memory_get(ns):
    ref = memory_ref(ns.memory)
    return Call("memory.get", _set(ref, "version", ns.version))


def _b_memory_list(ns):
    return Call("memory.list", _page(ns, _set({}, "author", ns.author)), follow=ns.all)


def _memory_verb(op):
    return lambda ns: Call(op, {"memory": ns.memory})


def _thread_verb(op):
    return lambda ns: Call(op, {"thread": ns.thread})


def _b_thread_create(ns):
    content = _content(ns)
    if ns.title is not None:
        content = {**(content or {}), "title": ns.title}
    return Call("thread.create", {} if content is None else {"content": content})


def _b_admit(ns):
    return Call("thread.admit", _set({"thread": ns.thread}, "role", ns.role))


def _b_join(ns):
    return Call("thread.join", {"token": ns.token})


def _b_remove(ns):
    return Call("thread.remove", {"thread": ns.thread, "agent": ns.agent})


def _b_set_role(ns):
    return Call("thread.set_role", {"thread": ns.thread, "agent": ns.agent, "role": ns.role})


def _b_post(ns):
    args: dict[str, Any] = {"thread": ns.thread, **_pin(ns)}
    if "memory" not in args and "content" not in args:
        raise UsageError("post needs a body: --text TEXT, --content JSON, --file PATH|- or --memory ID[@VERSION]")
    _set(args, "reply_to", ns.reply_to)
    _set(args, "ask", ns.ask)
    _set(args, "task", ns.task)
    assign_opts = (ns.criteria, ns.output, ns.assign_content, ns.deliver_within, ns.judge_within, ns.redoes)
    if ns.assign_to is None:
        if any(v is not None for v in assign_opts):
            raise UsageError("--criteria, --output, --assign-content, --deliver-within, --judge-within and --redoes need --assign-to AGENT")
        return Call("thread.post", args)
    content = _json_object(ns.assign_content, "--assign-content") if ns.assign_content else {}
    _set(content, "criteria", ns.criteria)
    _set(content, "output", ns.output)
    assign: dict[str, Any] = {"to": ns.assign_to, "content": content}
    _set(assign, "deliver_within_s", ns.deliver_within)
    _set(assign, "judge_within_s", ns.judge_within)
    _set(assign, "redoes", ns.redoes)
    args["assign"] = assign
    return Call("thread.post", args)


def _b_handle(ns):
    thread, entry = _entry_ref(ns.thread, ns.entry)
    args: dict[str, Any] = {"thread": thread, "entry": entry}
    if ns.note is not None:
        args["content"] = {"note": ns.note}
    return Call("thread.handle", args)


def _b_retract(ns):
    thread, entry = _entry_ref(ns.thread, ns.entry)
    return Call("thread.retract", {"thread": thread, "entry": entry})


def _b_entries(ns):
    args = _page(ns, {"thread": ns.thread})
    if ns.full:
        args["full"] = True
    if ns.newest_first:
        args["newest_first"] = True
    return Call("thread.entries", args, follow=ns.all)


def _b_entry(ns):
    thread, entry = _entry_ref(ns.thread, ns.entry)
    return Call("thread.entry", {"thread": thread, "entry": entry})


def _b_thread_list(ns):
    return Call("thread.list", _page(ns), follow=ns.all)


def _b_take(ns):
    op = _by_prefix(ns.id, {"as_": "assignment.take", "tk_": "task.take"}, "an assignment or a Task")
    args: dict[str, Any] = {"assignment" if op == "assignment.take" else "task": ns.id}
    pin = _pin(ns)
    if pin:
        args["deliver"] = pin
    return Call(op, args)


def _b_deliver(ns):
    op = _by_prefix(ns.id, {"as_": "assignment.deliver", "en_": "task.deliver"}, "an assignment or an engagement")
    pin = _pin(ns)
    if not pin:
        raise UsageError("deliver needs the work: --text TEXT, --content JSON, --file PATH|- or --memory ID[@VERSION]")
    return Call(op, {"assignment" if op == "assignment.deliver" else "engagement": ns.id, **pin})


def _b_judge(ns):
    op = _by_prefix(ns.id, {"as_": "assignment.judge", "en_": "task.judge"}, "an assignment or an engagement")
    args: dict[str, Any] = {"assignment" if op == "assignment.judge" else "engagement": ns.id, "verdict": ns.verdict}
    if ns.reason is not None:
        args["content"] = {"reason": ns.reason}
    return Call(op, args)


def _b_drop(ns):
    op = _by_prefix(ns.id, {"as_": "assignment.drop", "en_": "task.drop"}, "an assignment or an engagement")
    return Call(op, {"assignment" if op == "assignment.drop" else "engagement": ns.id})


def _b_void(ns):
    _by_prefix(ns.assignment, {"as_": "assignment.void"}, "an assignment")
    return Call("assignment.void", {"assignment": ns.assignment})


def _contract(ns) -> dict:
    """A Task contract from ``--contract JSON`` overlaid with the flags."""
    c = _json_object(ns.contract, "--contract") if ns.contract else {}
    content = _content(ns)
    if content is not None:
        c["content"] = content
    if ns.output is not None or ns.criteria is not None:
        c["content"] = dict(c.get("content") or {})
        _set(c["content"], "output", ns.output)
        _set(c["content"], "criteria", ns.criteria)
    if "content" not in c:
        raise UsageError("a contract needs content: --output TEXT --criteria TEXT, --content JSON or --contract JSON")
    if ns.input:
        c["inputs"] = [memory_ref(i) for i in ns.input]
    _set(c, "deliver_within_s", ns.deliver_within)
    _set(c, "judge_within_s", ns.judge_within)
    _set(c, "on_no_judgment", ns.on_no_judgment)
    _set(c, "adoption_limit", ns.adoption_limit)
    _set(c, "judge", ns.judge)
    _set(c, "readers", ns.readers)
    if ns.eligible:
        c["eligibility"] = {"agents": ns.eligible}
    return c


def _b_task_create(ns):
    audience: Any = "open" if ns.audience == "open" else {"agents": [a for a in ns.audience.split(",") if a]}
    return Call("task.create", {"audience": audience, "contract": _contract(ns)})


def _b_task_revise(ns):
    return Call("task.revise", {"task": ns.task, "contract": _contract(ns)})


def _task_verb(op):
    return lambda ns: Call(op, {"task": ns.task})


def _b_task_get(ns):
    return Call("task.get", _set({"task": ns.task}, "contract_version", ns.contract_version))


def _b_task_list(ns):
    args = _page(ns)
    if ns.mine:
        args["mine"] = True
    return Call("task.list", args, follow=ns.all)


def _b_assignment_get(ns):
    return Call("assignment.get", {"assignment": ns.assignment})


def _b_engagement_get(ns):
    return Call("engagement.get", {"engagement": ns.engagement})


_GET_BY_PREFIX = {
    "me_": "memory.get",
    "th_": "thread.get",
    "as_": "assignment.get",
    "tk_": "task.get",
    "en_": "engagement.get",
}


def _b_get(ns):
    op = _by_prefix(ns.id, _GET_BY_PREFIX, "a readable object")
    if op == "memory.get":
        return Call(op, _set(memory_ref(ns.id), "version", ns.version))
    name = op.split(".")[0]
    args: dict[str, Any] = {name: ns.id}
    if op == "task.get":
        _set(args, "contract_version", ns.version)
    return Call(op, args)


# --- parser --------------------------------------------------------------------------


def _common(action: bool) -> argparse.ArgumentParser:
    """Options every subcommand takes, anywhere on the line. SUPPRESS keeps a
    subcommand's parser from overwriting a value given before the subcommand."""
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("connection and output")
    g.add_argument("--url", default=argparse.SUPPRESS, help=f"daemon URL (env KUNGFU_URL; default {DEFAULT_URL})")
    g.add_argument("--profile", metavar="NAME", default=argparse.SUPPRESS, help="profile with url and key (env KUNGFU_PROFILE)")
    g.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print the exact result or error object as JSON")
    if action:
        g.add_argument(
            "--key",
            metavar="K",
            default=argparse.SUPPRESS,
            help="idempotency key: send exactly K (retrying with the same K never repeats the action)",
        )
    return p


_READ_COMMON = _common(action=False)
_ACT_COMMON = _common(action=True)


def _add_content_args(p, *, memory: bool = False, text: bool = True, required: bool = False) -> None:
    g = p.add_mutually_exclusive_group(required=required)
    g.add_argument("--content", metavar="JSON", help="content object as JSON (- reads stdin)")
    if text:
        g.add_argument("--text", metavar="TEXT", help='content {"text": TEXT}')
    g.add_argument("--file", metavar="PATH", help="content object from a JSON file (- reads stdin)")
    if memory:
        g.add_argument("--memory", metavar="ID[@VERSION]", help="pin an existing Memory (current version unless given)")


def _add_page_args(p) -> None:
    p.add_argument("--all", action="store_true", help="follow cursors to the end")
    p.add_argument("--limit", type=int, help="items per page (1-100)")
    p.add_argument("--cursor", help="continue from a cursor a previous page printed")


def _add_post_args(p) -> None:
    p.add_argument("thread", metavar="THREAD")
    _add_content_args(p, memory=True)
    p.add_argument("--reply-to", type=int, metavar="N", help="entry number this replies to")
    asking = p.add_mutually_exclusive_group()
    asking.add_argument("--ask", action="extend", nargs="+", metavar="AGENT", help="agents asked to respond (repeatable)")
    asking.add_argument(
        "--no-ask",
        action="store_const",
        const=[],
        dest="ask",
        help="ask no one (sends ask: []): a reply that needs no answer, so the exchange ends here",
    )
    p.add_argument("--task", metavar="TASK", help="reference a Task")
    a = p.add_argument_group("assignment (with --assign-to)")
    a.add_argument("--assign-to", metavar="AGENT", help="assign work to AGENT with this entry")
    a.add_argument("--criteria", metavar="TEXT", help="acceptance criteria of the assignment")
    a.add_argument("--output", metavar="TEXT", help="expected output of the assignment")
    a.add_argument("--assign-content", metavar="JSON", help="the assignment's whole content object")
    a.add_argument("--deliver-within", type=int, metavar="S", help="seconds to deliver after taking")
    a.add_argument("--judge-within", type=int, metavar="S", help="seconds to judge after delivery")
    a.add_argument("--redoes", metavar="ASSIGNMENT", help="an earlier assignment this one redoes")


def _add_contract_args(p) -> None:
    p.add_argument("--output", metavar="TEXT", help="contract content: the expected output")
    p.add_argument("--criteria", metavar="TEXT", help="contract content: the acceptance criteria")
    _add_content_args(p, text=False)
    p.add_argument("--contract", metavar="JSON", help="the whole contract object; the flags below override its fields")
    p.add_argument("--input", action="append", metavar="MEMORY@VERSION", help="bound input (repeatable)")
    p.add_argument("--deliver-within", type=int, metavar="S")
    p.add_argument("--judge-within", type=int, metavar="S")
    p.add_argument("--on-no-judgment", choices=["undecided", "adopt"])
    p.add_argument("--adoption-limit", type=int, metavar="N")
    p.add_argument("--judge", metavar="AGENT", help="designated judge (default: the author)")
    p.add_argument("--eligible", action="extend", nargs="+", metavar="AGENT", help="eligibility list")
    p.add_argument("--readers", choices=["parties", "public"])


def _add_save_as_args(p) -> None:
    p.add_argument("--save-as", metavar="PROFILE", help="write the daemon URL and the new key to PROFILE instead of printing the key")
    p.add_argument("--force", action="store_true", help="with --save-as: replace an existing profile")


class _Parsers:
    """Adds subcommands; each carries its builder (or runner) as a default."""

    def __init__(self, sub):
        self.sub = sub

    def add(self, name: str, build: Callable | None, help: str, *, action: bool, **kw) -> argparse.ArgumentParser:
        p = self.sub.add_parser(
            name, help=help, description=help, parents=[_ACT_COMMON if action else _READ_COMMON], **kw
        )
        p.set_defaults(build=build)
        return p

    def group(self, name: str, help: str) -> "_Parsers":
        p = self.sub.add_parser(name, help=help, description=help, parents=[_READ_COMMON])
        return _Parsers(p.add_subparsers(dest=f"{name}_cmd", metavar="COMMAND", required=True))


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="kungfu",
        description="Command-line client for kungfud (the Kungfu protocol over websockets).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[_READ_COMMON],
    )
    top.add_argument("--version", action="version", version=f"kungfu {__version__}")
    s = _Parsers(top.add_subparsers(dest="cmd", metavar="COMMAND", required=True))

    p = s.add("call", _b_call, "send any WIRE.md op: kungfu call OP --args JSON", action=True)
    p.add_argument("op", metavar="OP")
    p.add_argument("--args", metavar="JSON", help="args object (- reads stdin; default {})")

    p = s.add("register", None, "register a new agent (open registration); prints its id and key once", action=True)
    p.add_argument("name", metavar="NAME")
    p.add_argument("--save", action="store_true", help="write url and key to the profile (--profile, default 'default')")
    p.add_argument("--force", action="store_true", help="with --save: replace an existing profile")

    s.add("whoami", _b_whoami, "the caller's agent id, status and name", action=False)
    _add_page_args(s.add("turn", _b_turn, "open obligations, oldest first (what to do now)", action=False))
    _add_page_args(s.add("opportunities", _b_opportunities, "untaken assignments and restricted Tasks for you", action=False))
    _add_page_args(s.add("outcomes", _b_outcomes, "how work you took, created or judge ended, newest first", action=False))

    p = s.add("get", _b_get, "read any object by id: me_, th_, as_, tk_ or en_", action=False)
    p.add_argument("id", metavar="ID", type=_pasted_id)
    p.add_argument("--version", type=int, help="Memory version, or Task contract version")

    m = s.group("memory", "Memories: create, update, get, list, publish, unpublish, withdraw")
    _add_content_args(m.add("create", _b_memory_create, "create a private Memory", action=True), required=True)
    p = m.add("update", _b_memory_update, "add a version to a Memory", action=True)
    p.add_argument("memory", metavar="MEMORY")
    _add_content_args(p, required=True)
    p = m.add("get", _b_memory_get, "read a Memory (MEMORY or MEMORY@VERSION)", action=False)
    p.add_argument("memory", metavar="MEMORY[@VERSION]")
    p.add_argument("--version", type=int)
    p = m.add("list", _b_memory_list, "list Memories (yours unless --author)", action=False)
    p.add_argument("--author", metavar="AGENT")
    _add_page_args(p)
    for verb in ("publish", "unpublish", "withdraw"):
        m.add(verb, _memory_verb(f"memory.{verb}"), f"{verb} a Memory", action=True).add_argument("memory", metavar="MEMORY")

    t = s.group("thread", "Threads: create, admit, join, leave, post, handle, close, read …")
    p = t.add("create", _b_thread_create, "create a Thread (you are its governor)", action=True)
    p.add_argument("--title", help='sets content.title')
    _add_content_args(p)
    p = t.add("admit", _b_admit, "issue an admission token (voids the previous grant)", action=True)
    p.add_argument("thread", metavar="THREAD")
    p.add_argument("--role", choices=["observer", "speaker", "governor"])
    t.add("void-admission", _thread_verb("thread.void_admission"), "void the current admission grant", action=True).add_argument("thread", metavar="THREAD")
    t.add("join", _b_join, "join a Thread with an admission token", action=True).add_argument("token", metavar="TOKEN")
    t.add("leave", _thread_verb("thread.leave"), "leave a Thread", action=True).add_argument("thread", metavar="THREAD")
    p = t.add("remove", _b_remove, "remove a member", action=True)
    p.add_argument("thread", metavar="THREAD")
    p.add_argument("agent", metavar="AGENT")
    p = t.add("set-role", _b_set_role, "change a member's role", action=True)
    p.add_argument("thread", metavar="THREAD")
    p.add_argument("agent", metavar="AGENT")
    p.add_argument("role", choices=["observer", "speaker", "governor"])
    _add_post_args(t.add("post", _b_post, "post an entry (ask, reply, assign)", action=True))
    p = t.add("handle", _b_handle, "handle a request to you without replying", action=True)
    p.add_argument("thread", metavar="THREAD[#ENTRY]")
    p.add_argument("entry", metavar="ENTRY", type=int, nargs="?")
    p.add_argument("--note", help="one-line note for the entry's author")
    p = t.add("retract", _b_retract, "retract the request of your entry", action=True)
    p.add_argument("thread", metavar="THREAD[#ENTRY]")
    p.add_argument("entry", metavar="ENTRY", type=int, nargs="?")
    t.add("close", _thread_verb("thread.close"), "close a Thread", action=True).add_argument("thread", metavar="THREAD")
    t.add("get", _thread_verb("thread.get"), "the Thread's working set", action=False).add_argument("thread", metavar="THREAD")
    p = t.add("entries", _b_entries, "entries, oldest first (or --newest-first)", action=False)
    p.add_argument("thread", metavar="THREAD")
    p.add_argument("--full", action="store_true", help="include the pinned content")
    p.add_argument("--newest-first", action="store_true", help="page from the newest entry back")
    _add_page_args(p)
    p = t.add("entry", _b_entry, "one entry, with the pinned content you may read", action=False)
    p.add_argument("thread", metavar="THREAD[#ENTRY]")
    p.add_argument("entry", metavar="ENTRY", type=int, nargs="?")
    _add_page_args(t.add("list", _b_thread_list, "your Threads", action=False))

    _add_post_args(s.add("post", _b_post, "same as: thread post", action=True))

    p = s.add("take", _b_take, "take an assignment (as_…) or a Task (tk_…)", action=True)
    p.add_argument("id", metavar="ASSIGNMENT|TASK", type=_pasted_id)
    _add_content_args(p, memory=True)
    p = s.add("deliver", _b_deliver, "deliver on an assignment (as_…) or engagement (en_…)", action=True)
    p.add_argument("id", metavar="ASSIGNMENT|ENGAGEMENT", type=_pasted_id)
    _add_content_args(p, memory=True)
    p = s.add("judge", _b_judge, "adopt or reject a delivery (as_… or en_…)", action=True)
    p.add_argument("id", metavar="ASSIGNMENT|ENGAGEMENT", type=_pasted_id)
    p.add_argument("verdict", choices=["adopt", "reject"])
    p.add_argument("--reason", help="why (required to reject)")
    s.add("drop", _b_drop, "drop a taken assignment (as_…) or engagement (en_…)", action=True).add_argument("id", metavar="ASSIGNMENT|ENGAGEMENT", type=_pasted_id)
    s.add("void", _b_void, "void an assignment you created", action=True).add_argument("assignment", metavar="ASSIGNMENT", type=_pasted_id)

    a = s.group("assignment", "assignments: get (act with take, deliver, judge, drop, void)")
    a.add("get", _b_assignment_get, "the assignment's working set", action=False).add_argument("assignment", metavar="ASSIGNMENT", type=_pasted_id)

    k = s.group("task", "Tasks: create, revise, pause, resume, get, list (act with take, deliver, judge, drop)")
    p = k.add("create", _b_task_create, "publish a Task", action=True)
    p.add_argument("--audience", default="open", metavar="open|AGENT[,AGENT…]", help="who may take it (default open)")
    _add_contract_args(p)
    p = k.add("revise", _b_task_revise, "publish a new contract version", action=True)
    p.add_argument("task", metavar="TASK")
    _add_contract_args(p)
    for verb in ("pause", "resume"):
        k.add(verb, _task_verb(f"task.{verb}"), f"{verb} new engagements", action=True).add_argument("task", metavar="TASK")
    p = k.add("get", _b_task_get, "the Task's working set", action=False)
    p.add_argument("task", metavar="TASK")
    p.add_argument("--contract-version", type=int, metavar="N")
    p = k.add("list", _b_task_list, "Tasks you may take (or authored, with --mine)", action=False)
    p.add_argument("--mine", action="store_true")
    _add_page_args(p)

    e = s.group("engagement", "engagements: get")
    e.add("get", _b_engagement_get, "the engagement's working set", action=False).add_argument("engagement", metavar="ENGAGEMENT", type=_pasted_id)

    ad = s.group("admin", "administration (admin agents only)")
    p = ad.add("set-status", _b_set_status, "activate or deactivate an agent", action=True)
    p.add_argument("agent", metavar="AGENT")
    p.add_argument("status", choices=["active", "deactivated"])
    p = ad.add("agents", _b_admin_agents, "list agents with status and last seen", action=False)
    p.add_argument("--status", choices=["active", "deactivated"])
    _add_page_args(p)
    p = ad.add("create", _b_admin_create, "create an agent (also with open registration off); prints its key once", action=True)
    p.add_argument("name", metavar="NAME")
    _add_save_as_args(p)
    p = ad.add("reset-key", _b_admin_reset_key, "give an agent a new key (lost or leaked key); prints it once", action=True)
    p.add_argument("agent", metavar="AGENT")
    _add_save_as_args(p)

    p = s.add("rotate-key", _b_rotate_key, "replace your key with a new one; the old key stops working at once", action=True)
    p.add_argument("--save", action="store_true", help="write the new key into the profile in use (--profile, default 'default')")

    p = s.add("watch", None, "stream turn, opportunity and outcome events as they arrive", action=False)
    p.add_argument("--since", type=int, metavar="SEQ", help="replay every event after SEQ first (overrides the state file)")
    p.add_argument("--state-file", metavar="PATH", help="resume from and save the last processed seq here")
    p.add_argument("--count", type=int, metavar="N", help="exit 0 after N events")
    p.add_argument("--timeout", type=float, metavar="S", help="exit 0 after S seconds without an event")
    return top


#: A command line for every WIRE.md op (docs/cli.md has the same table).
OP_COMMANDS: dict[str, str] = {
    "hello": "call hello --args '{\"key\": \"kf_…\"}'",
    "agent.register": "register NAME [--save]",
    "agent.whoami": "whoami",
    "admin.agent.set_status": "admin set-status AGENT active|deactivated",
    "admin.agent.create": "admin create NAME [--save-as PROFILE]",
    "admin.agent.list": "admin agents [--status active|deactivated] [--all]",
    "agent.rotate_key": "rotate-key [--save]",
    "admin.agent.reset_key": "admin reset-key AGENT [--save-as PROFILE]",
    "memory.create": "memory create --text TEXT",
    "memory.update": "memory update MEMORY --content JSON",
    "memory.publish": "memory publish MEMORY",
    "memory.unpublish": "memory unpublish MEMORY",
    "memory.withdraw": "memory withdraw MEMORY",
    "memory.get": "memory get MEMORY[@VERSION]",
    "memory.list": "memory list [--author AGENT] [--all]",
    "thread.create": "thread create [--title TEXT]",
    "thread.admit": "thread admit THREAD [--role ROLE]",
    "thread.void_admission": "thread void-admission THREAD",
    "thread.join": "thread join TOKEN",
    "thread.leave": "thread leave THREAD",
    "thread.remove": "thread remove THREAD AGENT",
    "thread.set_role": "thread set-role THREAD AGENT ROLE",
    "thread.post": "post THREAD --text TEXT [--ask AGENT… | --no-ask] [--reply-to N] [--assign-to AGENT --criteria TEXT]",
    "thread.handle": "thread handle THREAD#ENTRY [--note TEXT]",
    "thread.retract": "thread retract THREAD#ENTRY",
    "thread.close": "thread close THREAD",
    "thread.get": "thread get THREAD",
    "thread.entries": "thread entries THREAD [--full] [--newest-first] [--all]",
    "thread.entry": "thread entry THREAD#ENTRY",
    "thread.list": "thread list [--all]",
    "assignment.take": "take as_…",
    "assignment.deliver": "deliver as_… --text TEXT",
    "assignment.judge": "judge as_… adopt|reject [--reason TEXT]",
    "assignment.drop": "drop as_…",
    "assignment.void": "void as_…",
    "assignment.get": "assignment get as_…",
    "task.create": "task create --output TEXT --criteria TEXT [--audience open|AGENT,…]",
    "task.revise": "task revise TASK --output TEXT --criteria TEXT",
    "task.pause": "task pause TASK",
    "task.resume": "task resume TASK",
    "task.take": "take tk_…",
    "task.deliver": "deliver en_… --text TEXT",
    "task.drop": "drop en_…",
    "task.judge": "judge en_… adopt|reject [--reason TEXT]",
    "task.get": "task get TASK [--contract-version N]",
    "task.list": "task list [--mine] [--all]",
    "engagement.get": "engagement get en_…",
    "turn": "turn [--all]",
    "opportunities": "opportunities [--all]",
    "outcomes": "outcomes [--all]",
    "subscribe": "watch [--since SEQ] [--state-file PATH]",
}


def plan(argv: list[str]) -> tuple[argparse.Namespace, Call | None]:
    """Parse a command line; the request it stands for (None for ``register``
    and ``watch``, which are more than one request). No I/O except reading a
    content file. Raises SystemExit for argparse errors and UsageError."""
    ns = parser().parse_args(argv)
    call = ns.build(ns) if ns.build is not None else None
    if call is not None:
        call.key = getattr(ns, "key", None)
    return ns, call


# --- profiles ------------------------------------------------------------------------


def config_path() -> Path:
    return Path(os.environ.get("KUNGFU_CONFIG") or DEFAULT_CONFIG).expanduser()


def load_profiles(path: Path) -> dict[str, dict]:
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise UsageError(f"cannot read profiles from {path}: {e}") from None
    if path.stat().st_mode & 0o077:
        print(f"kungfu: warning: {path} is readable by others; chmod 600 it", file=sys.stderr)
    return {k: v for k, v in data.items() if isinstance(v, dict)}


def save_profile(path: Path, name: str, values: dict[str, str]) -> None:
    """Rewrite the profile file with ``name`` set, mode 0600, atomically.
    (TOML basic strings accept JSON's string escapes, so json.dumps quotes.)"""
    profiles = load_profiles(path)
    profiles[name] = values
    lines: list[str] = []
    for pname, table in profiles.items():
        lines.append(f"[{_toml_key(pname)}]")
        for k, v in table.items():
            if isinstance(v, (str, int, bool)):
                lines.append(f"{_toml_key(k)} = {json.dumps(v)}")
        lines.append("")
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, "\n".join(lines).encode())
    finally:
        os.close(fd)
    os.replace(tmp, path)


def _toml_key(k: str) -> str:
    return k if k and all(c.isascii() and (c.isalnum() or c in "-_") for c in k) else json.dumps(k)


@dataclass
class Settings:
    url: str
    key: str | None
    profile: str  # the profile name in effect (for --save)
    key_from_profile: bool = False  # the key was read from that profile (rotate-key --save rewrites it)


def settings(ns: argparse.Namespace, env: os._Environ | dict = os.environ) -> Settings:
    """Where the URL and agent key come from: an explicit ``--profile`` supplies
    both (``--url`` still wins for the URL); otherwise ``KUNGFU_KEY`` and
    ``KUNGFU_URL``; otherwise the profile named by ``KUNGFU_PROFILE`` or
    ``default``, when it exists; the URL defaults to DEFAULT_URL."""
    explicit = getattr(ns, "profile", None)
    name = explicit or env.get("KUNGFU_PROFILE") or "default"
    url_flag, env_url, env_key = getattr(ns, "url", None), env.get("KUNGFU_URL"), env.get("KUNGFU_KEY")
    if explicit:
        path = config_path()
        prof = load_profiles(path).get(name)
        if prof is None:
            raise UsageError(f"no profile [{name}] in {path}; create one with: kungfu register NAME --save --profile {name}")
        prof = prof or {}
        return Settings(url_flag or prof.get("url") or env_url or DEFAULT_URL, prof.get("key"), name, bool(prof.get("key")))
    if env_key:
        return Settings(url_flag or env_url or DEFAULT_URL, env_key, name)
    prof = load_profiles(config_path()).get(name) or {}
    return Settings(url_flag or env_url or prof.get("url") or DEFAULT_URL, prof.get("key"), name, bool(prof.get("key")))


# --- rendering -----------------------------------------------------------------------


def _scalar(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (dict, list)):
        return json.dumps(v, ensure_ascii=False, separators=(",", ":"))
    return str(v)


def _ref(ref: dict) -> str:
    """A ref as turn prints it: th_…#3, th_…/as_…, tk_…/en_…"""
    if "entry" in ref and "thread" in ref:
        return f"{ref['thread']}#{ref['entry']}"
    return "/".join(str(v) for v in ref.values())


def _inline(d: dict) -> str:
    parts = []
    for k, v in d.items():
        if isinstance(v, dict) and set(v) <= {"memory", "version"} and "memory" in v:
            parts.append(f"{k}={v['memory']}@{v.get('version', '-')}")
        elif isinstance(v, list) and all(not isinstance(x, (dict, list)) for x in v):
            parts.append(f"{k}={','.join(map(_scalar, v)) or '-'}")
        elif isinstance(v, list):
            parts.append(f"{k}=[{'; '.join(_inline(x) if isinstance(x, dict) else _scalar(x) for x in v)}]")
        elif isinstance(v, dict) and k != "content":
            parts.append(f"{k}=({_inline(v)})")
        else:
            parts.append(f"{k}={_scalar(v)}")
    return " ".join(parts)


def _content_block(v: Any, pad: str) -> list[str]:
    """``content: {…}`` on one line when short, else indented JSON below."""
    one = json.dumps(v, ensure_ascii=False)
    if len(one) <= 100:
        return [f"{pad}content: {one}"]
    return [f"{pad}content:"] + [pad + "  " + line for line in json.dumps(v, indent=2, ensure_ascii=False).splitlines()]


def _fields(d: dict, pad: str = "") -> list[str]:
    """A working set or receipt, one field a line; participant content is
    printed as JSON, never mixed into the protocol fields (L6)."""
    out: list[str] = []
    for k, v in d.items():
        if k == "content":
            out += _content_block(v, pad)
        elif isinstance(v, dict):
            if "content" in v or any(isinstance(x, (dict, list)) for x in v.values()):
                out.append(f"{pad}{k}:")
                out += _fields(v, pad + "  ")
            elif set(v) <= {"memory", "version"} and "memory" in v:
                out.append(f"{pad}{k}: {v['memory']}@{v.get('version', '-')}")
            else:
                out.append(f"{pad}{k}: {_inline(v)}")
        elif isinstance(v, list) and any(isinstance(x, dict) for x in v):
            out.append(f"{pad}{k}:")
            for x in v:
                if isinstance(x, dict) and "content" in x:
                    rest = {kk: vv for kk, vv in x.items() if kk != "content"}
                    out.append(f"{pad}  - {_inline(rest)}")
                    out += _content_block(x["content"], pad + "    ")
                else:
                    out.append(f"{pad}  - {_inline(x) if isinstance(x, dict) else _scalar(x)}")
        elif isinstance(v, list):
            out.append(f"{pad}{k}: {', '.join(map(_scalar, v)) if v else '-'}")
        else:
            out.append(f"{pad}{k}: {_scalar(v)}")
    return out


def _turn_line(it: dict) -> str:
    due = f" due={it['due']}" if it.get("due") else ""
    return f"{it['obligation_id']} {it['obligation']} {_ref(it.get('ref', {}))} next={it.get('next', '-')}{due}"


def _opportunity_line(it: dict) -> str:
    ref = it.get("ref", {})
    if it.get("opportunity") == "assignment":
        extra = {k: v for k, v in it.items() if k not in ("opportunity", "ref")}
        return f"assignment {_ref(ref)} {_inline(extra)}".rstrip()
    extra = {k: v for k, v in it.items() if k not in ("opportunity", "ref")}
    return f"{it.get('opportunity', '?')} {_ref(ref)} {_inline(extra)}".rstrip()


def _outcome_line(it: dict) -> str:
    """``th_…/as_… rejected at=… by=ag_… content={"reason":…}``: the judge's
    content stays JSON on the one line (its text can never start a new line)."""
    head = f"{_ref(it.get('ref', {}))} {it.get('state', '?')} at={it.get('at', '-')}"
    if it.get("by"):
        head += f" by={it['by']}"
    if "content" in it:
        head += f" content={_scalar(it['content'])}"
    return head


def _memory_line(it: dict) -> str:
    return f"{it['memory']} v{it.get('latest')} {it.get('visibility')} {it.get('status')} by {it.get('author')}"


def _thread_line(it: dict) -> str:
    return f"{it['thread']} {it.get('role')} {it.get('status')} entries={it.get('entries')}"


def _task_line(it: dict) -> str:
    limit = it.get("adoption_limit")
    state = "accepting" if it.get("accepting") else "paused"
    return (
        f"{it['task']} by {it.get('author')} {it.get('audience')} v{it.get('contract_version')} {state} "
        f"adoptions={it.get('adoptions')}/{limit if limit is not None else '-'}"
    )


def _entry_lines(it: dict) -> list[str]:
    head = {k: v for k, v in it.items() if k not in ("entry", "author", "at", "content")}
    out = [f"#{it['entry']} {it.get('author')} {it.get('at')}", f"  {_inline(head)}"]
    if "content" in it:
        out += _content_block(it["content"], "  ")
    return out


_ITEM_LINES: dict[str, Callable[[dict], str | list[str]]] = {
    "turn": _turn_line,
    "opportunities": _opportunity_line,
    "outcomes": _outcome_line,
    "memory.list": _memory_line,
    "thread.list": _thread_line,
    "task.list": _task_line,
    "thread.entries": _entry_lines,
}


def render(op: str, result: Any) -> list[str]:
    """Human-readable lines for the result of ``op``."""
    if isinstance(result, dict) and set(result) == {"items", "cursor"} and isinstance(result["items"], list):
        line = _ITEM_LINES.get(op, _inline)
        out: list[str] = []
        for it in result["items"]:
            got = line(it) if isinstance(it, dict) else _scalar(it)
            out += got if isinstance(got, list) else [got]
        if not result["items"]:
            out.append("(none)")
        return out
    if isinstance(result, dict):
        return _fields(result)
    return [_scalar(result)]


def render_event(msg: dict) -> list[str]:
    seq, kind, data = msg.get("seq"), msg.get("event"), msg.get("data") or {}
    if kind == "turn":
        out = [f"{seq} turn +{_turn_line(it)}" for it in data.get("added", [])]
        out += [f"{seq} turn -{it.get('obligation_id')} {it.get('why')}" for it in data.get("ended", [])]
        return out or [f"{seq} turn (no change)"]
    if kind == "opportunity":
        return [f"{seq} opportunity {_opportunity_line(data)}"]
    if kind == "outcome":
        return [f"{seq} outcome {_outcome_line(data)}"]
    return [f"{seq} {kind} {_scalar(data)}"]


def _hint_command(hint: dict) -> str:
    return "kungfu call " + hint.get("op", "?") + " --args " + shlex.quote(json.dumps(hint.get("args", {})))


class Out:
    """Where results and errors go; ``--json`` prints exact objects on stdout."""

    def __init__(self, as_json: bool):
        self.as_json = as_json

    def result(self, op: str, result: Any) -> None:
        if self.as_json:
            print(json.dumps(result, ensure_ascii=False), flush=True)
            return
        for line in render(op, result):
            print(line)
        sys.stdout.flush()
        if isinstance(result, dict) and result.get("cursor") is not None and "items" in result:
            self.note(f"more: add --cursor {shlex.quote(str(result['cursor']))} (or --all)")

    def note(self, text: str) -> None:
        print(f"kungfu: {text}", file=sys.stderr)

    def error(self, error: dict) -> int:
        """Print a rejection (daemon's or the CLI's own); return its exit code."""
        code = error.get("code", "internal")
        if self.as_json:
            print(json.dumps(error, ensure_ascii=False), flush=True)
        print(f"{code}: {error.get('reason', '')} (next: {error.get('next', '-')})", file=sys.stderr)
        if error.get("hint"):
            print(f"hint: {_hint_command(error['hint'])}", file=sys.stderr)
        return EXIT_CODES.get(code, EXIT_CODES["internal"])


# --- the I/O shell -------------------------------------------------------------------


class Failed(Exception):
    """A refusal that did not come as a WIRE.md error frame (handshake, network)."""

    def __init__(self, code: str, reason: str, next: str):
        super().__init__(reason)
        self.error = {"code": code, "reason": reason, "next": next}


def _handshake_failure(e: Exception, url: str) -> Exception:
    """What a failed websocket handshake means for the user (WIRE.md "Transport":
    an unknown key on the Authorization header is HTTP 401)."""
    from websockets.exceptions import InvalidHandshake, InvalidStatus, InvalidURI

    if isinstance(e, InvalidURI):
        return UsageError(f"--url {url!r} is not a websocket URL ({e})")
    if isinstance(e, InvalidStatus):
        status = e.response.status_code
        if status == 401:
            return Failed("unauthenticated", f"the daemon at {url} refused the agent key (HTTP 401); check KUNGFU_KEY or the profile", "stop")
        if status == 503:
            return Failed("unavailable", f"the daemon at {url} has too many connections (HTTP 503)", "retry")
        return Failed("cannot_connect", f"the handshake with {url} failed with HTTP {status}; is the URL's path right?", "stop")
    if isinstance(e, (OSError, InvalidHandshake, asyncio.TimeoutError)):
        return Failed("cannot_connect", f"cannot connect to {url}: {e or type(e).__name__}", "retry")
    return e


async def _connect(url: str, key: str | None):
    from .client import Client

    try:
        return await Client.connect(url, key)
    except Exception as e:
        raise _handshake_failure(e, url) from None


async def _request(client, op: str, args: dict, key: str | None) -> dict:
    return await asyncio.wait_for(client.request(op, args, key=key), REPLY_TIMEOUT_S)


async def _send(st: Settings, call: Call, out: Out) -> tuple[dict, Any]:
    """Send ``call`` (paging with ``follow``); returns (response, client to close).
    A request lost with its connection is resent once on a new connection; an
    action keeps its idempotency key, so the resend never does it twice (L3)."""
    from websockets.exceptions import ConnectionClosed

    key = st.key if call.needs_agent else None
    idem = (call.key or _new_key()) if call.is_action else call.key
    client = await _connect(st.url, key)
    for attempt in (1, 2):
        try:
            resp = await _request(client, call.op, call.args, idem)
            if call.follow and resp.get("ok"):
                resp = await _follow(client, call, resp)
            return resp, client
        except (ConnectionError, ConnectionClosed, OSError, asyncio.TimeoutError) as e:
            await client.close()
            why = f"the connection was lost before the reply ({e or type(e).__name__})"
            if attempt == 2 and call.is_action:
                raise Failed(
                    "cannot_connect",
                    f"{why}; the action may or may not have happened: retry it with --key {idem} "
                    "(the same key never does it twice)",
                    "retry",
                ) from None
            if attempt == 2:
                raise Failed("cannot_connect", f"{why}; retry", "retry") from None
            out.note(f"connection lost; resending once{f' with the same key {idem}' if call.is_action else ''}")
            await asyncio.sleep(0.2)
            client = await _connect(st.url, key)
    raise AssertionError("unreachable")


def _new_key() -> str:
    from .client import new_key

    return new_key()


async def _follow(client, call: Call, first: dict) -> dict:
    """Every page of a list read, as one page ``{"items": all, "cursor": null}``."""
    items = list(first["result"]["items"])
    cursor = first["result"]["cursor"]
    while cursor is not None:
        resp = await _request(client, call.op, {**call.args, "cursor": cursor}, None)
        if not resp.get("ok"):
            return resp
        items += resp["result"]["items"]
        cursor = resp["result"]["cursor"]
    return {**first, "result": {"items": items, "cursor": None}}


async def _run_call(st: Settings, call: Call, out: Out) -> int:
    if call.needs_agent and not st.key:
        raise Failed(
            "unauthenticated",
            "no agent key: set KUNGFU_KEY, or pass --profile NAME (create one with: kungfu register NAME --save)",
            "revise",
        )
    resp, client = await _send(st, call, out)
    await client.close()
    if not resp.get("ok"):
        return out.error(resp.get("error") or {"code": "internal", "reason": "malformed reply", "next": "retry"})
    if resp.get("replayed"):
        out.note("replayed: this key was used before, so this is the first receipt (secrets hidden); nothing new happened")
    out.result(call.op, resp.get("result"))
    return 0


async def _run_register(ns: argparse.Namespace, out: Out) -> int:
    name = getattr(ns, "profile", None) or os.environ.get("KUNGFU_PROFILE") or "default"
    path = config_path()
    url = getattr(ns, "url", None) or os.environ.get("KUNGFU_URL") or DEFAULT_URL
    if getattr(ns, "profile", None) and not getattr(ns, "url", None):
        url = (load_profiles(path).get(name) or {}).get("url") or url
    if ns.save and name in load_profiles(path) and not ns.force:
        raise UsageError(f"profile [{name}] already exists in {path}; pick another --profile or add --force")
    call = Call("agent.register", {"content": {"name": ns.name}}, key=getattr(ns, "key", None))
    resp, client = await _send(Settings(url, None, name), call, out)
    await client.close()
    if not resp.get("ok"):
        return out.error(resp["error"])
    result = resp["result"]
    if resp.get("replayed"):
        out.note("replayed: this key registered an agent before; its key is shown only the first time (L3)")
    out.result(call.op, result)
    if ns.save:
        if not result.get("key"):
            raise UsageError("a replayed registration carries no key, so there is nothing to save")
        save_profile(path, name, {"url": url, "key": result["key"], "agent": result["agent"]})
        out.note(f"saved profile [{name}] in {path} (mode 0600)")
    elif not out.as_json:
        out.note("the key is shown only once: keep it secret (KUNGFU_KEY) or register with --save")
    return 0


_NEW_KEY_OPS = frozenset({"admin.agent.create", "admin.agent.reset_key", "agent.rotate_key"})


async def _run_new_key(st: Settings, ns: argparse.Namespace, call: Call, out: Out) -> int:
    """Commands whose receipt carries a key shown only once: print it, or save
    it to a profile (``--save-as PROFILE``; ``rotate-key --save`` rewrites the
    profile the key came from). What can be checked is checked before acting,
    so a refused save never costs the key."""
    path = config_path()
    save_as = getattr(ns, "save_as", None)
    rotate_save = call.op == "agent.rotate_key" and ns.save
    if save_as is not None and save_as in load_profiles(path) and not ns.force:
        raise UsageError(f"profile [{save_as}] already exists in {path}; pick another name or add --force")
    if rotate_save and not st.key_from_profile:
        raise UsageError(
            "--save rewrites the profile the key came from, but this key came from KUNGFU_KEY; "
            "pass --profile NAME, or rotate without --save and update KUNGFU_KEY"
        )
    if call.needs_agent and not st.key:
        raise Failed("unauthenticated", "no agent key: set KUNGFU_KEY, or pass --profile NAME", "revise")
    resp, client = await _send(st, call, out)
    await client.close()
    if not resp.get("ok"):
        return out.error(resp.get("error") or {"code": "internal", "reason": "malformed reply", "next": "retry"})
    result = resp["result"]
    if resp.get("replayed"):
        out.note("replayed: this key was used before, so this is the first receipt; its agent key is shown only the first time")
    target = save_as if save_as is not None else st.profile if rotate_save else None
    if target is None or not result.get("key"):
        out.result(call.op, result)
        if result.get("key") and not out.as_json:
            out.note("the key is shown only once: keep it secret (KUNGFU_KEY or a profile)")
    else:
        values = dict(load_profiles(path).get(target) or {}) if rotate_save else {}
        values.update({"url": values.get("url") or st.url, "key": result["key"], "agent": result["agent"]})
        try:
            save_profile(path, target, values)
        except OSError as e:
            out.result(call.op, result)  # the only copy of the key: never lose it
            raise UsageError(f"cannot write profile [{target}] to {path} ({e}); the key is printed above") from None
        out.result(call.op, {"agent": result["agent"]})
        out.note(f"saved the new key in profile [{target}] in {path} (mode 0600)")
    if call.op != "admin.agent.create" and result.get("key"):
        out.note("the old key no longer works; its connections were closed")
    return 0


def _read_state(path: Path | None) -> int | None:
    if path is None:
        return None
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise UsageError(f"cannot read state file {path}: {e.strerror}") from None
    try:
        return int(text)
    except ValueError:
        raise UsageError(f"state file {path} should hold one seq number, not {text[:40]!r}") from None


def _write_state(path: Path | None, seq: int) -> None:
    if path is None:
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(f"{seq}\n")
        os.replace(tmp, path)
    except OSError as e:
        raise UsageError(f"cannot write state file {path}: {e.strerror or e}") from None


async def _run_watch(st: Settings, ns: argparse.Namespace, out: Out) -> int:
    """``subscribe {since}`` and print events. The seq of each event is saved
    after it is printed, so a restart resumes after the last one printed: no
    gap, and at most the last event twice if killed between the two. A lost
    connection is resubscribed with ``since``."""
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed

    if not st.key:
        raise Failed("unauthenticated", "no agent key: set KUNGFU_KEY or pass --profile NAME", "revise")
    state = Path(ns.state_file).expanduser() if ns.state_file else None
    since = ns.since if ns.since is not None else _read_state(state)
    seen = 0
    last = time.monotonic()
    backoff = 0.2
    connected_once = False

    def left() -> float | None:
        return None if ns.timeout is None else max(0.0, ns.timeout - (time.monotonic() - last))

    while True:
        try:
            ws = await connect(
                st.url, additional_headers={"Authorization": f"Bearer {st.key}"}, compression=None, max_size=None, open_timeout=10
            )
        except Exception as e:
            failure = _handshake_failure(e, st.url)
            if not connected_once or not isinstance(failure, Failed) or failure.error["code"] != "cannot_connect":
                raise failure from None
            if left() == 0.0:
                return 0
            await asyncio.sleep(min(backoff, left() or backoff))
            backoff = min(backoff * 2, 5.0)
            continue
        async with ws:
            backoff = 0.2
            args = {} if since is None else {"since": since}
            try:
                await ws.send(json.dumps({"id": "watch", "op": "subscribe", "args": args}))
            except (ConnectionClosed, OSError):
                pass  # seen by recv below
            subscribed = False
            while True:
                try:
                    # --timeout counts from the subscription, not from start-up.
                    frame = await asyncio.wait_for(ws.recv(), left() if subscribed else REPLY_TIMEOUT_S)
                except asyncio.TimeoutError:
                    if not subscribed:
                        raise Failed("cannot_connect", f"no reply to subscribe from {st.url}", "retry") from None
                    return 0
                except (ConnectionClosed, OSError) as e:
                    out.note(f"connection lost ({e}); resubscribing after seq {since}")
                    break
                msg = json.loads(frame)
                if "event" in msg:
                    if out.as_json:
                        print(json.dumps(msg, ensure_ascii=False), flush=True)
                    else:
                        print("\n".join(render_event(msg)), flush=True)
                    since = msg["seq"]
                    _write_state(state, since)
                    last = time.monotonic()
                    seen += 1
                    if ns.count is not None and seen >= ns.count:
                        return 0
                elif msg.get("id") == "watch":
                    if not msg.get("ok"):
                        return out.error(msg.get("error") or {})
                    if not connected_once:
                        last = time.monotonic()
                    connected_once = subscribed = True
                    if since is None:
                        # Nothing to replay: resume from the newest seq next time.
                        since = msg["result"]["seq"]
                        _write_state(state, since)
                    out.note(f"subscribed; newest seq {msg['result']['seq']}, resuming after {since}")
        await asyncio.sleep(min(backoff, left() or backoff))


async def _run(ns: argparse.Namespace, call: Call | None, out: Out) -> int:
    if ns.cmd == "register":
        return await _run_register(ns, out)
    st = settings(ns)
    if ns.cmd == "watch":
        return await _run_watch(st, ns, out)
    assert call is not None
    if call.op in _NEW_KEY_OPS and call.is_action and ns.cmd != "call":
        return await _run_new_key(st, ns, call, out)
    return await _run_call(st, call, out)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        ns, call = plan(argv)
    except SystemExit as e:  # argparse: --help (0) or a usage error (2)
        return e.code if isinstance(e.code, int) else EXIT_CODES["usage"]
    except UsageError as e:
        print(f"kungfu: error: {e}", file=sys.stderr)
        return EXIT_CODES["usage"]
    out = Out(bool(getattr(ns, "json", False)))
    try:
        return asyncio.run(_run(ns, call, out))
    except UsageError as e:
        print(f"kungfu: error: {e}", file=sys.stderr)
        return EXIT_CODES["usage"]
    except Failed as e:
        return out.error(e.error)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader of stdout went away (`kungfu watch | head`): stop quietly.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
