"""``kungfu a2a …``: publish the agent's A2A card, and every A2A op from the
command line (WIRE.md 1.3 "A2A"; docs/a2a.md). Pure like the other command groups (``*_commands.py``):
parsed arguments → one :class:`~.call.PlannedCall`."""

from __future__ import annotations

import uuid

from .call import PlannedCall
from .exits import UsageError

__all__ = ["add_a2a", "A2A_COMMANDS"]

E = "urn:kungfud:a2a:kungfu:v1"

#: A command line for every A2A op (docs/cli.md has the same table).
A2A_COMMANDS: dict[str, str] = {
    "a2a.card.set": "a2a publish --name NAME --description TEXT [--skill ID:NAME:DESCRIPTION…] [--accept AGENT…]",
    "a2a.card.get": "a2a show [AGENT]",
    "a2a.card.clear": "a2a clear",
    "a2a.send": "a2a send AGENT --text TEXT [--judge] [--task TASK --verdict adopt|reject] [--message-id ID]",
    "a2a.cancel": "a2a cancel TASK",
    "a2a.task": "a2a task TASK [--history-length N]",
    "a2a.tasks": "a2a tasks [--to AGENT] [--context CONTEXT] [--state STATE] [--all]",
    "a2a.push.set": "a2a push-set TASK URL [--token TOKEN] [--scheme SCHEME --credentials TEXT] [--id ID]",
    "a2a.push.list": "a2a push-list TASK",
    "a2a.push.clear": "a2a push-clear TASK CONFIG",
}


def _skill(text: str) -> dict:
    parts = text.split(":", 2)
    if len(parts) != 3 or not all(p.strip() for p in parts):
        raise UsageError(f"--skill {text!r}: expected ID:NAME:DESCRIPTION")
    return {"id": parts[0].strip(), "name": parts[1].strip(), "description": parts[2].strip(), "tags": []}


def _b_publish(ns) -> PlannedCall:
    content: dict = {"name": ns.name, "description": ns.description}
    if ns.skill:
        content["skills"] = [_skill(s) for s in ns.skill]
    accept = {"agents": ns.accept} if ns.accept else "any"
    return PlannedCall("a2a.card.set", {"content": content, "accept": accept})


def _b_send(ns) -> PlannedCall:
    message: dict = {"messageId": ns.message_id or str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": ns.text}]}
    if ns.judge:
        message["extensions"] = [E]
    if ns.verdict and not ns.task:
        raise UsageError("--verdict judges a task: name it with --task")
    if ns.task:
        message["taskId"] = ns.task
        if ns.verdict:
            message["metadata"] = {E: {"verdict": ns.verdict}}
    # The idempotency key A2A clients get: one messageId, one effect.
    return PlannedCall("a2a.send", {"to": ns.agent, "message": message}, key=f"a2a:{ns.agent}:{message['messageId']}")


def _b_tasks(ns) -> PlannedCall:
    args = {k: v for k, v in (("to", ns.to), ("context", ns.context), ("state", ns.state),
                              ("limit", ns.limit), ("cursor", ns.cursor)) if v is not None}
    return PlannedCall("a2a.tasks", args, follow=ns.all)


def _b_push_set(ns) -> PlannedCall:
    config: dict = {"url": ns.url}
    for name in ("id", "token"):
        if getattr(ns, name):
            config[name] = getattr(ns, name)
    if ns.scheme:
        config["authentication"] = {"scheme": ns.scheme, **({"credentials": ns.credentials} if ns.credentials else {})}
    elif ns.credentials:
        raise UsageError("--credentials needs --scheme (e.g. Bearer)")
    return PlannedCall("a2a.push.set", {"task": ns.task, "config": config})


def add_a2a(s, page_args) -> None:
    """The ``a2a`` group on the parser collection ``s`` (plan.parser)."""
    g = s.group("a2a", "A2A: publish your card (A2A clients then send you work), and A2A calls; docs/a2a.md")
    p = g.add("publish", _b_publish, "publish (or replace) your A2A card", action=True)
    p.add_argument("--name", required=True)
    p.add_argument("--description", required=True)
    p.add_argument("--skill", action="append", metavar="ID:NAME:DESCRIPTION", help="a skill (repeat for more)")
    p.add_argument("--accept", nargs="+", metavar="AGENT", help="only these agents may send you work (default: any)")
    p = g.add("show", lambda ns: PlannedCall("a2a.card.get", {"agent": ns.agent} if ns.agent else {}),
              "your card (or AGENT's) and its URL", action=False)
    p.add_argument("agent", metavar="AGENT", nargs="?")
    g.add("clear", lambda ns: PlannedCall("a2a.card.clear"), "unpublish your card", action=True)
    p = g.add("send", _b_send, "send work to AGENT's card (or --task … --verdict …)", action=True)
    p.add_argument("agent", metavar="AGENT")
    p.add_argument("--text", required=True, help="the message (a verdict's reason)")
    p.add_argument("--judge", action="store_true", help="you judge the delivery (else it is adopted at its deadline)")
    p.add_argument("--task", metavar="TASK")
    p.add_argument("--verdict", choices=["adopt", "reject"])
    p.add_argument("--message-id", metavar="ID", help="the A2A messageId (default: a new one)")
    g.add("cancel", lambda ns: PlannedCall("a2a.cancel", {"task": ns.task}), "cancel your A2A task", action=True).add_argument(
        "task", metavar="TASK")
    p = g.add("task", lambda ns: PlannedCall("a2a.task", {"task": ns.task} | (
        {"history_length": ns.history_length} if ns.history_length is not None else {})),
        "your A2A task as an A2A Task object", action=False)
    p.add_argument("task", metavar="TASK")
    p.add_argument("--history-length", type=int, metavar="N")
    p = g.add("tasks", _b_tasks, "the A2A tasks you sent, newest first", action=False)
    p.add_argument("--to", metavar="AGENT")
    p.add_argument("--context", metavar="CONTEXT")
    p.add_argument("--state", metavar="STATE", help="e.g. TASK_STATE_WORKING")
    page_args(p)
    p = g.add("push-set", _b_push_set, "POST your task's status updates to URL", action=True)
    p.add_argument("task", metavar="TASK")
    p.add_argument("url", metavar="URL")
    p.add_argument("--id")
    p.add_argument("--token")
    p.add_argument("--scheme", help="Authorization scheme, e.g. Bearer")
    p.add_argument("--credentials")
    g.add("push-list", lambda ns: PlannedCall("a2a.push.list", {"task": ns.task}), "your task's push configs",
          action=False).add_argument("task", metavar="TASK")
    p = g.add("push-clear", lambda ns: PlannedCall("a2a.push.clear", {"task": ns.task, "config": ns.config}),
              "remove a push config", action=True)
    p.add_argument("task", metavar="TASK")
    p.add_argument("config", metavar="CONFIG")
