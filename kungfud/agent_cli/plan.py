"""The command line -> :func:`plan`: the argument parser (every subcommand with
its builder) and the table of a command line for every WIRE.md op.

Pure like the builders: turning a command line into one request does no I/O
(except reading a content file) and is tested on its own.
"""

from __future__ import annotations

import argparse
from typing import Callable

from .. import __version__
from ..handshake import DEFAULT_URL
from ..event_kinds import DEFAULT_KINDS, KINDS
from .wake import add_wake_args
from .builders import (
    Call,
    _b_admin_agents,
    _b_admin_create,
    _b_admin_reset_key,
    _b_admit,
    _b_assignment_get,
    _b_call,
    _b_deliver,
    _b_drop,
    _b_engagement_get,
    _b_entries,
    _b_thread_assignments,
    _b_entry,
    _b_get,
    _b_handle,
    _b_join,
    _b_judge,
    _b_memory_create,
    _b_memory_get,
    _b_memory_list,
    _b_memory_update,
    _b_opportunities,
    _b_outcomes,
    _b_search,
    _b_post,
    _b_remove,
    _b_retract,
    _b_rotate_key,
    _b_set_role,
    _b_set_status,
    _b_take,
    _b_task_create,
    _b_task_get,
    _b_task_list,
    _b_task_revise,
    _b_thread_create,
    _b_thread_list,
    _b_turn,
    _b_void,
    _b_webhook,
    _b_webhook_set,
    _b_whoami,
    _memory_verb,
    _pasted_id,
    _task_verb,
    _thread_verb,
)

from .a2a import A2A_COMMANDS, add_a2a

__all__ = ["plan", "parser", "OP_COMMANDS", "EPILOG"]

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
  14  runaway               kungfu wake stopped: more runs than --max-runs N --per S

environment:
  KUNGFU_KEY      agent key (used when no --profile is given)
  KUNGFU_URL      daemon URL (default ws://127.0.0.1:8740/v1)
  KUNGFU_PROFILE  profile name used when --profile is not given (default "default")
  KUNGFU_CONFIG   profile file (default ~/.config/kungfu/profiles.toml)

Errors print "code: reason (next: …)" on stderr, and the daemon's hint as a
kungfu command when there is one. See docs/cli.md.
"""


# --- parser --------------------------------------------------------------------------


def _common(action: bool) -> argparse.ArgumentParser:
    """Options every subcommand takes, anywhere on the line. SUPPRESS keeps a
    subcommand's parser from overwriting a value given before the subcommand."""
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("connection and output")
    g.add_argument("--url", default=argparse.SUPPRESS, help=f"daemon URL (env KUNGFU_URL; default {DEFAULT_URL})")
    g.add_argument("--profile", metavar="NAME", default=argparse.SUPPRESS, help="profile with url and key (env KUNGFU_PROFILE)")
    g.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print the exact result or error object as JSON")
    g.add_argument(
        "--ids", action="store_true", default=argparse.SUPPRESS,
        help='show agents by id only (default: by name, as "alice", where you may read it)',
    )
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

    p = s.add("call", _b_call, "send any op of docs/reference.md: kungfu call OP --args JSON", action=True)
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
    p = s.add("search", _b_search, 'find what you may read: words (all must match), "a phrase", prefix*', action=False)
    p.add_argument("query", metavar="QUERY", nargs="+")
    p.add_argument("--in", dest="kinds", metavar="KIND,…", help="memory,entry,task,delivery (default: all)")
    p.add_argument("--thread", metavar="THREAD", help="only this Thread's entries and deliveries")
    _add_page_args(p)

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
    p = t.add("assignments", _b_thread_assignments, "the Thread's assignments, live and ended, newest first", action=False)
    p.add_argument("thread", metavar="THREAD")
    p.add_argument("--state", choices=["live", "ended"], help="only live or only ended ones")
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

    k = s.group("key", "scoped keys: create, list, revoke (a key that can do less; docs/operations.md)")
    p = k.add("create", lambda ns: Call("agent.key.create", {"scope": ns.scope, "label": ns.label or f"{ns.scope} key", **(
        {"expires_in_s": ns.expires_in} if ns.expires_in else {})}), "a key with fewer rights; prints it once", action=True)
    p.add_argument("--scope", required=True, choices=["read", "worker", "a2a"], help="read: reads; worker: reads and doing work; a2a: the a2a.* ops")
    p.add_argument("--label", metavar="TEXT", help="what or who holds it (shown by key list)")
    p.add_argument("--expires-in", type=_duration, metavar="DURATION", help="seconds, or 90m, 12h, 30d (default: never)")
    k.add("list", lambda ns: Call("agent.key.list"), "your live scoped keys (never the keys)", action=False)
    k.add("revoke", lambda ns: Call("agent.key.revoke", {"key_id": ns.key_id}), "revoke a scoped key; its connections close",
          action=True).add_argument("key_id", metavar="KEY_ID")

    w = s.group("webhook", "webhook: set, get, clear (your events POSTed to a URL, signed; docs/webhooks.md)")
    p = w.add("set", _b_webhook_set, "POST your events to URL (replaces any); prints the signing secret once", action=True)
    # dest is not "url": that is the global --url (the daemon's), which a
    # positional of the same dest overwrote (issue 37).
    p.add_argument("hook_url", metavar="URL", help="where to POST your events (https://, or http:// to an allowed host)")
    p.add_argument("--events", metavar="KIND,…", help=f"{','.join(KINDS)} (default: {','.join(DEFAULT_KINDS)})")
    w.add("get", _b_webhook("webhook.get"), "your webhook: state, delivered seq, pending, last error", action=False)
    w.add("clear", _b_webhook("webhook.clear"), "stop POSTing your events", action=True)

    add_a2a(s, _add_page_args)

    p = s.add("watch", None, "stream turn, opportunity and outcome events (and open Tasks offered) as they arrive", action=False)
    p.add_argument("--since", type=int, metavar="SEQ", help="replay every event after SEQ first (overrides the state file)")
    p.add_argument("--state-file", metavar="PATH", help="resume from and save the last processed seq here")
    p.add_argument("--count", type=int, metavar="N", help="exit 0 after N events")
    p.add_argument("--timeout", type=float, metavar="S", help="exit 0 after S seconds without an event")
    p.add_argument("--open-tasks", action="store_true", help="also a task_offered event for each open Task you may take")

    add_wake_args(s.add("wake", None, "run a command whenever events arrive (an agent that sleeps until woken)", action=False))
    return top


def _duration(text: str) -> int:
    """``3600``, ``90m``, ``12h``, ``30d`` -> seconds."""
    unit = {"s": 1, "m": 60, "h": 3600, "d": 86400}.get(text[-1:].lower())
    try:
        return int(text[:-1]) * unit if unit else int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (seconds, or 90m, 12h, 30d)") from None


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
    "thread.assignments": "thread assignments THREAD [--state live|ended] [--all]",
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
    "subscribe": "watch [--since SEQ] [--state-file PATH] [--open-tasks]",
    "agent.key.create": "key create --scope read|worker|a2a [--label TEXT] [--expires-in DURATION]",
    "agent.key.list": "key list",
    "agent.key.revoke": "key revoke KEY_ID",
    "webhook.set": "webhook set URL [--events KIND,…]",
    "webhook.get": "webhook get",
    "webhook.clear": "webhook clear",
    "search": "search QUERY [--in KIND,…] [--thread THREAD]",
    **A2A_COMMANDS,
}


def plan(argv: list[str]) -> tuple[argparse.Namespace, Call | None]:
    """Parse a command line; the request it stands for (None for ``register``,
    ``watch`` and ``wake``, which are more than one request). No I/O except reading a
    content file. Raises SystemExit for argparse errors and UsageError."""
    ns = parser().parse_args(argv)
    call = ns.build(ns) if ns.build is not None else None
    if call is not None:
        call.key = getattr(ns, "key", None) or call.key  # a2a send: derived from the messageId
    return ns, call
