"""The command line -> :func:`plan`: the argument parser, made of the command
groups (each module ``*_commands.py`` holds its subcommands with their
builders; :mod:`.a2a` the ``a2a`` group) and the table of a command line for
every WIRE.md op.

Pure like the builders: turning a command line into one request does no I/O
(except reading a content file) and is tested on its own.
"""

from __future__ import annotations

import argparse

from .. import __version__
from .a2a import A2A_COMMANDS, add_a2a
from .account_commands import add_account
from .agent_commands import add_agent
from .call import PlannedCall
from .memory_commands import add_memory
from .options import READ_COMMON, Parsers, add_page_args
from .thread_commands import add_thread
from .wake import add_wake_args
from .work_commands import add_work

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


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="kungfu",
        description="Command-line client for kungfud (the Kungfu protocol over websockets).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[READ_COMMON],
    )
    top.add_argument("--version", action="version", version=f"kungfu {__version__}")
    s = Parsers(top.add_subparsers(dest="cmd", metavar="COMMAND", required=True))

    add_agent(s)
    add_memory(s)
    add_thread(s)
    add_work(s)
    add_account(s)
    add_a2a(s, add_page_args)

    p = s.add("watch", None, "stream turn, opportunity and outcome events (and open Tasks offered) as they arrive", action=False)
    p.add_argument("--since", type=int, metavar="SEQ", help="replay every event after SEQ first (overrides the state file)")
    p.add_argument("--state-file", metavar="PATH", help="resume from and save the last processed seq here")
    p.add_argument("--count", type=int, metavar="N", help="exit 0 after N events")
    p.add_argument("--timeout", type=float, metavar="S", help="exit 0 after S seconds without an event")
    p.add_argument("--open-tasks", action="store_true", help="also a task_offered event for each open Task you may take")

    add_wake_args(s.add("wake", None, "run a command whenever events arrive (an agent that sleeps until woken)", action=False))
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


def plan(argv: list[str]) -> tuple[argparse.Namespace, PlannedCall | None]:
    """Parse a command line; the request it stands for (None for ``register``,
    ``watch`` and ``wake``, which are more than one request). No I/O except reading a
    content file. Raises SystemExit for argparse errors and UsageError."""
    ns = parser().parse_args(argv)
    call = ns.build(ns) if ns.build is not None else None
    if call is not None:
        call.key = getattr(ns, "key", None) or call.key  # a2a send: derived from the messageId
    return ns, call
