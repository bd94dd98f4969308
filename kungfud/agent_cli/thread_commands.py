"""``kungfu thread …`` and ``kungfu post``: a Thread's membership, its
entries (post, handle, retract) and its reads (WIRE.md §6). Each subcommand
with its builder."""

from __future__ import annotations

from typing import Any

from .call import PlannedCall
from .exits import UsageError
from .options import Parsers, add_content_args, add_page_args
from .values import content_of, entry_ref, json_object, page_args, pin_of, put

__all__ = ["add_thread"]


def _thread_verb(op):
    return lambda ns: PlannedCall(op, {"thread": ns.thread})


def _b_thread_create(ns):
    content = content_of(ns)
    if ns.title is not None:
        content = {**(content or {}), "title": ns.title}
    return PlannedCall("thread.create", {} if content is None else {"content": content})


def _b_admit(ns):
    return PlannedCall("thread.admit", put({"thread": ns.thread}, "role", ns.role))


def _b_join(ns):
    return PlannedCall("thread.join", {"token": ns.token})


def _b_remove(ns):
    return PlannedCall("thread.remove", {"thread": ns.thread, "agent": ns.agent})


def _b_set_role(ns):
    return PlannedCall("thread.set_role", {"thread": ns.thread, "agent": ns.agent, "role": ns.role})


def _b_post(ns):
    args: dict[str, Any] = {"thread": ns.thread, **pin_of(ns)}
    if "memory" not in args and "content" not in args:
        raise UsageError("post needs a body: --text TEXT, --content JSON, --file PATH|- or --memory ID[@VERSION]")
    put(args, "reply_to", ns.reply_to)
    put(args, "ask", ns.ask)
    put(args, "task", ns.task)
    assign_opts = (ns.criteria, ns.output, ns.assign_content, ns.deliver_within, ns.judge_within, ns.redoes)
    if ns.assign_to is None:
        if any(v is not None for v in assign_opts):
            raise UsageError("--criteria, --output, --assign-content, --deliver-within, --judge-within and --redoes need --assign-to AGENT")
        return PlannedCall("thread.post", args)
    content = json_object(ns.assign_content, "--assign-content") if ns.assign_content else {}
    put(content, "criteria", ns.criteria)
    put(content, "output", ns.output)
    assign: dict[str, Any] = {"to": ns.assign_to, "content": content}
    put(assign, "deliver_within_s", ns.deliver_within)
    put(assign, "judge_within_s", ns.judge_within)
    put(assign, "redoes", ns.redoes)
    args["assign"] = assign
    return PlannedCall("thread.post", args)


def _b_handle(ns):
    thread, entry = entry_ref(ns.thread, ns.entry)
    args: dict[str, Any] = {"thread": thread, "entry": entry}
    if ns.note is not None:
        args["content"] = {"note": ns.note}
    return PlannedCall("thread.handle", args)


def _b_retract(ns):
    thread, entry = entry_ref(ns.thread, ns.entry)
    return PlannedCall("thread.retract", {"thread": thread, "entry": entry})


def _b_entries(ns):
    args = page_args(ns, {"thread": ns.thread})
    if ns.full:
        args["full"] = True
    if ns.newest_first:
        args["newest_first"] = True
    return PlannedCall("thread.entries", args, follow=ns.all)


def _b_thread_assignments(ns):
    return PlannedCall("thread.assignments", page_args(ns, put({"thread": ns.thread}, "state", ns.state)), follow=ns.all)


def _b_entry(ns):
    thread, entry = entry_ref(ns.thread, ns.entry)
    return PlannedCall("thread.entry", {"thread": thread, "entry": entry})


def _b_thread_list(ns):
    return PlannedCall("thread.list", page_args(ns), follow=ns.all)


def _add_post_args(p) -> None:
    p.add_argument("thread", metavar="THREAD")
    add_content_args(p, memory=True)
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


def add_thread(s: Parsers) -> None:
    """The ``thread`` group, then ``post`` (the same as ``thread post``)."""
    t = s.group("thread", "Threads: create, admit, join, leave, post, handle, close, read …")
    p = t.add("create", _b_thread_create, "create a Thread (you are its governor)", action=True)
    p.add_argument("--title", help='sets content.title')
    add_content_args(p)
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
    add_page_args(p)
    p = t.add("assignments", _b_thread_assignments, "the Thread's assignments, live and ended, newest first", action=False)
    p.add_argument("thread", metavar="THREAD")
    p.add_argument("--state", choices=["live", "ended"], help="only live or only ended ones")
    add_page_args(p)
    p = t.add("entry", _b_entry, "one entry, with the pinned content you may read", action=False)
    p.add_argument("thread", metavar="THREAD[#ENTRY]")
    p.add_argument("entry", metavar="ENTRY", type=int, nargs="?")
    add_page_args(t.add("list", _b_thread_list, "your Threads", action=False))

    _add_post_args(s.add("post", _b_post, "same as: thread post", action=True))
