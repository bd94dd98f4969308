"""The work: ``take``, ``deliver``, ``judge``, ``drop`` and ``void`` on an
assignment (``as_…``) or a Task's engagement (``en_…``, ``tk_…``), and the
``assignment``, ``task`` and ``engagement`` groups (WIRE.md §6.4, §7). Each
subcommand with its builder."""

from __future__ import annotations

from typing import Any

from .call import PlannedCall
from .exits import UsageError
from .options import Parsers, add_content_args, add_page_args
from .values import by_prefix, content_of, json_object, memory_ref, page_args, pasted_id, pin_of, put

__all__ = ["add_work"]


def _b_take(ns):
    op = by_prefix(ns.id, {"as_": "assignment.take", "tk_": "task.take"}, "an assignment or a Task")
    args: dict[str, Any] = {"assignment" if op == "assignment.take" else "task": ns.id}
    pin = pin_of(ns)
    if pin:
        args["deliver"] = pin
    return PlannedCall(op, args)


def _b_deliver(ns):
    op = by_prefix(ns.id, {"as_": "assignment.deliver", "en_": "task.deliver"}, "an assignment or an engagement")
    pin = pin_of(ns)
    if not pin:
        raise UsageError("deliver needs the work: --text TEXT, --content JSON, --file PATH|- or --memory ID[@VERSION]")
    return PlannedCall(op, {"assignment" if op == "assignment.deliver" else "engagement": ns.id, **pin})


def _b_judge(ns):
    op = by_prefix(ns.id, {"as_": "assignment.judge", "en_": "task.judge"}, "an assignment or an engagement")
    args: dict[str, Any] = {"assignment" if op == "assignment.judge" else "engagement": ns.id, "verdict": ns.verdict}
    if ns.reason is not None:
        args["content"] = {"reason": ns.reason}
    return PlannedCall(op, args)


def _b_drop(ns):
    op = by_prefix(ns.id, {"as_": "assignment.drop", "en_": "task.drop"}, "an assignment or an engagement")
    return PlannedCall(op, {"assignment" if op == "assignment.drop" else "engagement": ns.id})


def _b_void(ns):
    by_prefix(ns.assignment, {"as_": "assignment.void"}, "an assignment")
    return PlannedCall("assignment.void", {"assignment": ns.assignment})


def _contract(ns) -> dict:
    """A Task contract from ``--contract JSON`` overlaid with the flags."""
    c = json_object(ns.contract, "--contract") if ns.contract else {}
    content = content_of(ns)
    if content is not None:
        c["content"] = content
    if ns.output is not None or ns.criteria is not None:
        c["content"] = dict(c.get("content") or {})
        put(c["content"], "output", ns.output)
        put(c["content"], "criteria", ns.criteria)
    if "content" not in c:
        raise UsageError("a contract needs content: --output TEXT --criteria TEXT, --content JSON or --contract JSON")
    if ns.input:
        c["inputs"] = [memory_ref(i) for i in ns.input]
    put(c, "deliver_within_s", ns.deliver_within)
    put(c, "judge_within_s", ns.judge_within)
    put(c, "on_no_judgment", ns.on_no_judgment)
    put(c, "adoption_limit", ns.adoption_limit)
    put(c, "judge", ns.judge)
    put(c, "readers", ns.readers)
    if ns.eligible:
        c["eligibility"] = {"agents": ns.eligible}
    return c


def _b_task_create(ns):
    audience: Any = "open" if ns.audience == "open" else {"agents": [a for a in ns.audience.split(",") if a]}
    return PlannedCall("task.create", {"audience": audience, "contract": _contract(ns)})


def _b_task_revise(ns):
    return PlannedCall("task.revise", {"task": ns.task, "contract": _contract(ns)})


def _task_verb(op):
    return lambda ns: PlannedCall(op, {"task": ns.task})


def _b_task_get(ns):
    return PlannedCall("task.get", put({"task": ns.task}, "contract_version", ns.contract_version))


def _b_task_list(ns):
    args = page_args(ns)
    if ns.mine:
        args["mine"] = True
    return PlannedCall("task.list", args, follow=ns.all)


def _b_assignment_get(ns):
    return PlannedCall("assignment.get", {"assignment": ns.assignment})


def _b_engagement_get(ns):
    return PlannedCall("engagement.get", {"engagement": ns.engagement})


def _add_contract_args(p) -> None:
    p.add_argument("--output", metavar="TEXT", help="contract content: the expected output")
    p.add_argument("--criteria", metavar="TEXT", help="contract content: the acceptance criteria")
    add_content_args(p, text=False)
    p.add_argument("--contract", metavar="JSON", help="the whole contract object; the flags below override its fields")
    p.add_argument("--input", action="append", metavar="MEMORY@VERSION", help="bound input (repeatable)")
    p.add_argument("--deliver-within", type=int, metavar="S")
    p.add_argument("--judge-within", type=int, metavar="S")
    p.add_argument("--on-no-judgment", choices=["undecided", "adopt"])
    p.add_argument("--adoption-limit", type=int, metavar="N")
    p.add_argument("--judge", metavar="AGENT", help="designated judge (default: the author)")
    p.add_argument("--eligible", action="extend", nargs="+", metavar="AGENT", help="eligibility list")
    p.add_argument("--readers", choices=["parties", "public"])


def add_work(s: Parsers) -> None:
    """The work subcommands and groups, in the order ``kungfu --help`` lists them."""
    p = s.add("take", _b_take, "take an assignment (as_…) or a Task (tk_…)", action=True)
    p.add_argument("id", metavar="ASSIGNMENT|TASK", type=pasted_id)
    add_content_args(p, memory=True)
    p = s.add("deliver", _b_deliver, "deliver on an assignment (as_…) or engagement (en_…)", action=True)
    p.add_argument("id", metavar="ASSIGNMENT|ENGAGEMENT", type=pasted_id)
    add_content_args(p, memory=True)
    p = s.add("judge", _b_judge, "adopt or reject a delivery (as_… or en_…)", action=True)
    p.add_argument("id", metavar="ASSIGNMENT|ENGAGEMENT", type=pasted_id)
    p.add_argument("verdict", choices=["adopt", "reject"])
    p.add_argument("--reason", help="why (required to reject)")
    s.add("drop", _b_drop, "drop a taken assignment (as_…) or engagement (en_…)", action=True).add_argument("id", metavar="ASSIGNMENT|ENGAGEMENT", type=pasted_id)
    s.add("void", _b_void, "void an assignment you created", action=True).add_argument("assignment", metavar="ASSIGNMENT", type=pasted_id)

    a = s.group("assignment", "assignments: get (act with take, deliver, judge, drop, void)")
    a.add("get", _b_assignment_get, "the assignment's working set", action=False).add_argument("assignment", metavar="ASSIGNMENT", type=pasted_id)

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
    add_page_args(p)

    e = s.group("engagement", "engagements: get")
    e.add("get", _b_engagement_get, "the engagement's working set", action=False).add_argument("engagement", metavar="ENGAGEMENT", type=pasted_id)
