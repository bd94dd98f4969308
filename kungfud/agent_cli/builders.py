"""Parsed arguments -> one request: the :class:`Call` each subcommand stands for.

Pure: no I/O except reading a content file (``--file``, ``-`` for stdin). One
builder per subcommand; :mod:`.plan` attaches each to its parser.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..wire import OPS
from .exits import UsageError

__all__ = ["Call", "memory_ref", "FLAG_OF"]

#: The wire fields a subcommand fills from a flag, and that flag: a rejection
#: that names the field is shown naming what the user typed (issue 37).
FLAG_OF = {
    "assign.to": "--assign-to", "assign.content": "--assign-content", "assign.redoes": "--redoes",
    "assign.deliver_within_s": "--deliver-within", "assign.judge_within_s": "--judge-within",
    "contract.deliver_within_s": "--deliver-within", "contract.judge_within_s": "--judge-within",
    "contract.adoption_limit": "--adoption-limit", "contract.on_no_judgment": "--on-no-judgment",
    "contract.judge": "--judge", "contract.eligibility": "--eligible", "contract.inputs": "--input",
    "reply_to": "--reply-to", "content.reason": "--reason", "content.note": "--note", "limit": "--limit",
    "ask": "--ask", "thread": "THREAD",
}
# The daemon's "put it in content" phrases, for the flags that fill those fields.
_PHRASES = {'`"content": {"reason": "…"}`': "`--reason TEXT`", '`"content": {"note": "…"}`': "`--note TEXT`"}


@dataclass
class Call:
    """One request to send: ``op`` with ``args``; ``key`` is the idempotency key
    the user chose (actions get a fresh one when None); ``follow`` pages through
    every cursor of a list read."""

    op: str
    args: dict[str, Any] = field(default_factory=dict)
    key: str | None = None
    follow: bool = False
    from_flags: bool = True  # False for ``kungfu call``, whose user wrote the wire fields

    def in_flags(self, reason: str) -> str:
        """A rejection's reason in the words of the command line: ``assign.deliver_within_s``
        becomes ``--deliver-within`` (unchanged for ``kungfu call``)."""
        if not self.from_flags:
            return reason
        for phrase, flag in _PHRASES.items():
            reason = reason.replace(phrase, flag)
        def flag(m: re.Match) -> str:
            field = re.sub(r"\[\d+\]", "", m.group(1))  # ask[0]: the first --ask
            return f"`{FLAG_OF.get(field, m.group(1))}`"

        return re.sub(r"`([a-z_.\[\]0-9]+)`", flag, reason)

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
    return Call(ns.op, args, from_flags=False)


def _b_whoami(ns):
    return Call("agent.whoami")


def _b_turn(ns):
    return Call("turn", _page(ns), follow=ns.all)


def _b_opportunities(ns):
    return Call("opportunities", _page(ns), follow=ns.all)


def _b_outcomes(ns):
    return Call("outcomes", _page(ns), follow=ns.all)


def _b_search(ns):
    args: dict = {"q": " ".join(ns.query)}
    if ns.kinds:
        args["in"] = [k.strip() for k in ns.kinds.split(",") if k.strip()]
    return Call("search", _page(ns, _set(args, "thread", ns.thread)), follow=ns.all)


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


def _b_webhook_set(ns):
    return Call("webhook.set", _set({"url": ns.hook_url}, "events", ns.events.split(",") if ns.events else None))


def _b_webhook(op: str):
    return lambda ns: Call(op)


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


def _b_thread_assignments(ns):
    return Call("thread.assignments", _page(ns, _set({"thread": ns.thread}, "state", ns.state)), follow=ns.all)


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
