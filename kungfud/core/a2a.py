"""A2A work as a restricted Task (WIRE.md 1.3 "A2A"; §7).

``a2a.send`` without ``taskId`` is ``task.create`` by the caller — author and
judge — with the card's agent the only named taker, adoption limit 1, readers
"parties" (:func:`decide_send`); with ``taskId`` it is the client's verdict on
the delivery that awaits it, decided by the engagement's own ``judge``.
``a2a.cancel`` stops new engagements for good and never cuts off a taker
(R7.3-20…23). No new engine: the Task, its engagements and deadlines are §7's;
this module adds the A2A marker of a Task — the sub-object ``tk_….a2a``
(whom it was sent to, its context, how it is judged, the caller's messages,
the cancel) — and the contexts ``cx_…`` (one object each, owned by the agent
it was made for).

Judging is fixed at creation: with the extension (``client_judges``) the
client adopts or rejects (INPUT_REQUIRED); otherwise the contract has
``judge_within_s = [a2a] auto_adopt_s`` and ``on_no_judgment "adopt"``, so the
Task completes through the deadline R7.3-18 defines, never an invented verdict.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import msgspec

from ..errors import Hint, DecisionRefused, Rejection, rejects
from .a2a_card import card_obj, no_card, published
from .a2a_push import ClearPush, PushCleared, PushState, SetPush, configured, push_obj, set_result
from .a2a_view import CANCELED, COMPLETED, INPUT_REQUIRED, SUBMITTED, TERMINAL, E, state_of
from .context import acting, fits
from .decision import fold_into, make
from .engagement import decide_judge, effective
from .facts import Decision, Fact
from .task import ContractSpec, CreateTask, TaskState, decide_create
from .task_facts import (
    EngagementConfirmed,
    EngagementDelivered,
    EngagementDropped,
    EngagementExpired,
    EngagementJudged,
    TaskAcceptingSet,
)
from .work import Judge

if TYPE_CHECKING:
    from .context import Ctx

__all__ = [
    "A2ATaskState", "ContextState", "TaskOpened", "ContextOpened", "MessageAdded", "Canceled", "Send", "Cancel",
    "a2a_obj", "is_a2a_obj", "decide_send", "decide_cancel", "apply", "apply_context", "unsupported",
    "not_cancelable", "UNSUPPORTED", "NOT_CANCELABLE", "current", "mine", "Progressed", "progressing",
    "decide_push_set", "decide_push_clear",
]

#: The reason prefixes a2a-http maps to UnsupportedOperationError (-32004) and
#: TaskNotCancelableError (-32002) (docs/wire.md "A2A ops").
UNSUPPORTED = "unsupported operation: "
NOT_CANCELABLE = "task not cancelable: "

_SUB = ".a2a"
_TASK_ID = re.compile(r"tk_[0-9a-z_]{1,60}")
_CONTEXT_ID = re.compile(r"cx_[0-9a-z_]{1,60}")


def a2a_obj(task: str) -> str:
    """The Task's A2A marker (no wire id contains ``.a2a``)."""
    return task + _SUB


def is_a2a_obj(obj: str) -> bool:
    return obj.startswith("tk_") and obj.endswith(_SUB)


class ContextOpened(Fact, frozen=True, tag="a2a.context_opened"):
    context: str
    owner: str

    touches = ("context",)


class TaskOpened(Fact, frozen=True, tag="a2a.task_opened"):
    task: str
    author: str
    to: str
    context: str
    client_judges: bool
    message: bytes  # the caller's message as sent (JSON)

    def objects(self) -> tuple[str, ...]:
        return (a2a_obj(self.task),)


class MessageAdded(Fact, frozen=True, tag="a2a.message_added"):
    """A follow-up message of the caller (a verdict), kept for ``history``."""

    task: str
    message: bytes

    def objects(self) -> tuple[str, ...]:
        return (a2a_obj(self.task),)


class Canceled(Fact, frozen=True, tag="a2a.canceled"):
    task: str

    def objects(self) -> tuple[str, ...]:
        return (a2a_obj(self.task),)


class Progressed(Fact, frozen=True, tag="a2a.progressed"):
    """An A2A-visible change of the Task (WIRE.md 1.3 "A2A": State, the
    ``a2a_task`` event): its A2A state and generation after the action,
    recorded in the same action as the facts that changed it."""

    task: str
    state: str
    generation: int

    def objects(self) -> tuple[str, ...]:
        return (a2a_obj(self.task),)


class ContextState(msgspec.Struct, frozen=True):
    context: str
    owner: str
    created_at: int


class A2ATaskState(msgspec.Struct, frozen=True):
    task: str
    author: str
    to: str
    context: str
    client_judges: bool
    created_at: int
    messages: list[bytes]
    canceled_at: int | None = None
    state: str = SUBMITTED  # as of its last recorded change (a deadline not yet recorded aside)
    generation: int = 1
    changed_at: int | None = None  # its last recorded A2A-visible change (a2a.tasks' order; None: created_at)

    @property
    def changed(self) -> int:
        """When its last recorded A2A-visible change happened (creation first)."""
        return self.created_at if self.changed_at is None else self.changed_at


class Send(msgspec.Struct, frozen=True):
    """``a2a.send`` as the core needs it; the command builder read the message."""

    to: str
    message: bytes  # the message as sent (JSON)
    role: str
    contract_content: bytes  # {criteria, a2a: {parts, reference_tasks}}
    client_judges: bool
    task: str | None = None  # message.taskId
    context: str | None = None  # message.contextId
    verdict: str | None = None  # metadata[E].verdict
    reason: bytes | None = None  # {"reason": the text parts joined}; None without text
    deliver_within_s: int | None = None
    judge_within_s: int | None = None
    push: SetPush | None = None  # configuration's push config, set in the same action (task "")


class Cancel(msgspec.Struct, frozen=True):
    task: str
    to: str | None = None


def unsupported(reason: str, task: str, to: str) -> Rejection:
    return Rejection(
        "conflict", UNSUPPORTED + reason, "revise",
        Hint("a2a.send", {"to": to, "message": {"referenceTaskIds": [task]}}),
    )


def not_cancelable(reason: str, task: str, to: str, hint: Hint | None = None) -> Rejection:
    return Rejection("conflict", NOT_CANCELABLE + reason, "revise" if hint else "stop", hint)


def mine(task: str, me: str, ctx: "Ctx", to: str | None) -> A2ATaskState:
    """The caller's A2A Task; anything else (malformed, another's, not made
    through A2A, sent to another agent) is not_found with the same bytes."""
    a: A2ATaskState | None = ctx.get(a2a_obj(task)) if _TASK_ID.fullmatch(task) else None
    if a is None or a.author != me or (to is not None and a.to != to):
        raise DecisionRefused(Rejection.not_found("task", task))
    return a


def current(a: A2ATaskState, t: TaskState, ctx: "Ctx") -> tuple[str, str | None, str | None]:
    """(A2A state, the open engagement, its effective state) as of ``ctx.now``."""
    live = ctx.query("live", a.task, 1)
    open_e, eff = None, None
    if live:
        open_e = live[0][0]
        eff = effective(ctx.get(open_e), ctx.now, t, ctx.get, ctx.query)
    adopted = t.adoptions > 0
    return state_of(adopted, eff, a.client_judges, a.canceled_at is not None), open_e, eff


@rejects
def decide_send(cmd: Send, ctx: "Ctx") -> Decision:
    me = acting(ctx)
    if cmd.role != "ROLE_USER":
        raise DecisionRefused(Rejection.bad_request(f"message.role must be ROLE_USER, not {cmd.role!r} (in `message.role`)"))
    fits(cmd.message, ctx, "the message")
    return _create(cmd, me, ctx) if cmd.task is None else _verdict(cmd, me, ctx)


def _create(cmd: Send, me: str, ctx: "Ctx") -> Decision:
    if cmd.verdict is not None:
        raise DecisionRefused(Rejection.bad_request(
            f"a verdict (metadata[{E}].verdict) judges an existing task: name it in `message.taskId`"
        ))
    if cmd.to == me:
        raise DecisionRefused(Rejection.forbidden("an agent may not send A2A work to itself"))
    card = ctx.get(card_obj(cmd.to))
    agent = ctx.get(cmd.to)
    if not published(card) or agent is None or not agent.active:
        raise DecisionRefused(no_card(cmd.to))
    if card.accept is not None and me not in card.accept:
        raise DecisionRefused(Rejection.forbidden(f"agent {cmd.to} accepts A2A work only from the agents its card names"))
    spec = ContractSpec(
        content=cmd.contract_content,
        deliver_within_s=cmd.deliver_within_s,
        judge_within_s=cmd.judge_within_s if cmd.client_judges else ctx.limits.a2a_auto_adopt_s,
        on_no_judgment="undecided" if cmd.client_judges else "adopt",
        adoption_limit=1,
        readers="parties",
    )
    created = decide_create(CreateTask([cmd.to], spec), ctx)
    if isinstance(created, Rejection):
        raise DecisionRefused(created)
    task = created.result["task"]
    facts: list[Fact] = list(created.facts)
    known: ContextState | None = ctx.get(cmd.context) if cmd.context and _CONTEXT_ID.fullmatch(cmd.context) else None
    if known is not None and known.owner == me:
        context = known.context
    else:  # a contextId the daemon did not make for this caller: a new one
        context = ctx.new_id("cx_")
        facts.append(ContextOpened(at=ctx.now, by=me, context=context, owner=me))
    facts.append(TaskOpened(
        at=ctx.now, by=me, task=task, author=me, to=cmd.to, context=context, client_judges=cmd.client_judges,
        message=cmd.message,
    ))
    if cmd.push is not None:  # configuration.taskPushNotificationConfig: in the same action
        facts.append(configured(msgspec.structs.replace(cmd.push, task=task), ctx, me))
    return make(facts, {"task": task, "context": context, "state": SUBMITTED}, ctx)


def _verdict(cmd: Send, me: str, ctx: "Ctx") -> Decision:
    assert cmd.task is not None
    a = mine(cmd.task, me, ctx, cmd.to)
    t: TaskState = ctx.get(cmd.task)
    state, open_e, _ = current(a, t, ctx)
    again = "send a new message with referenceTaskIds naming this task"
    if state in TERMINAL:
        raise DecisionRefused(unsupported(f"task {cmd.task} is {state}; {again}", cmd.task, cmd.to))
    if cmd.verdict is None:
        raise DecisionRefused(unsupported(
            f"a message to task {cmd.task} must carry metadata[{E}].verdict (adopt or reject); {again}",
            cmd.task, cmd.to,
        ))
    if not a.client_judges:
        raise DecisionRefused(unsupported(
            f"task {cmd.task} is judged by its deadline (it was not created with the extension {E}); {again}",
            cmd.task, cmd.to,
        ))
    if cmd.verdict not in ("adopt", "reject"):
        raise DecisionRefused(Rejection.bad_request(
            f"metadata[{E}].verdict must be \"adopt\" or \"reject\", not {cmd.verdict!r}"
        ))
    if state != INPUT_REQUIRED or open_e is None:
        raise DecisionRefused(Rejection("conflict", f"no delivery of task {cmd.task} awaits your verdict (it is {state})", "wait"))
    if cmd.verdict == "reject" and cmd.reason is None:
        raise DecisionRefused(Rejection.bad_request(
            "a rejection must carry its reason as the message's text parts", rule="R7.3-17"
        ))
    judged = decide_judge(Judge(open_e, cmd.verdict, cmd.reason if cmd.verdict == "reject" else None), ctx)  # type: ignore[arg-type]
    if isinstance(judged, Rejection):
        raise DecisionRefused(judged)
    facts = [*judged.facts, MessageAdded(at=ctx.now, by=me, task=cmd.task, message=cmd.message)]
    after = COMPLETED if cmd.verdict == "adopt" else state_of(False, None, True, a.canceled_at is not None)
    d = make(facts, {"task": cmd.task, "engagement": open_e, "verdict": cmd.verdict, "state": after}, ctx)
    more = progressed(d, ctx)
    return Decision([*d.facts, *more], d.result, fold_into(dict(d.states), more, ctx.get))



@rejects
def decide_cancel(cmd: Cancel, ctx: "Ctx") -> Decision:
    """Stops new engagements for good; an open engagement runs to its end
    (R7.3-20…23). Refused while a delivery awaits the client's verdict."""
    me = acting(ctx)
    a = mine(cmd.task, me, ctx, cmd.to)
    t: TaskState = ctx.get(cmd.task)
    state, open_e, eff = current(a, t, ctx)
    if state == COMPLETED:
        raise DecisionRefused(not_cancelable(f"task {cmd.task} is already completed", cmd.task, a.to))
    if state == INPUT_REQUIRED:
        raise DecisionRefused(not_cancelable(
            f"a delivery of task {cmd.task} awaits your verdict; judge it first", cmd.task, a.to,
            Hint("a2a.send", {"to": a.to, "message": {"taskId": cmd.task, "metadata": {E: {"verdict": "adopt"}}}}),
        ))
    if a.canceled_at is not None:  # canceled before: the same answer, nothing written
        return Decision([], {"task": cmd.task, "state": state}, {})
    facts: list[Fact] = [Canceled(at=ctx.now, by=me, task=cmd.task)]
    if t.accepting:
        facts.append(TaskAcceptingSet(at=ctx.now, by=me, task=cmd.task, accepting=False))
    after = state_of(False, eff, a.client_judges, True) if open_e else CANCELED
    facts.append(Progressed(at=ctx.now, by=me, task=cmd.task, state=after, generation=a.generation + 1))
    return make(facts, {"task": cmd.task, "state": after}, ctx)


@rejects
def decide_push_set(cmd: SetPush, ctx: "Ctx") -> Decision:
    """``a2a.push.set``: the author adds (or, by id, replaces) a push config."""
    me = acting(ctx)
    a = mine(cmd.task, me, ctx, cmd.to)
    state, _, _ = current(a, ctx.get(cmd.task), ctx)
    if state in TERMINAL:
        raise DecisionRefused(Rejection.conflict(f"task {cmd.task} is {state}: it sends no more notifications"))
    fact = configured(cmd, ctx, me)
    return make([fact], set_result(fact), ctx)


@rejects
def decide_push_clear(cmd: ClearPush, ctx: "Ctx") -> Decision:
    me = acting(ctx)
    mine(cmd.task, me, ctx, cmd.to)
    before: PushState | None = ctx.get(push_obj(cmd.task))
    if before is None or not any(c.id == cmd.id for c in before.configs):
        raise DecisionRefused(Rejection.not_found("push config", cmd.id))
    return make([PushCleared(at=ctx.now, by=me, task=cmd.task, id=cmd.id)], {"cleared": True}, ctx)


#: The engagement facts that are A2A-visible changes (one each).
_CHANGES = (EngagementConfirmed, EngagementDelivered, EngagementJudged, EngagementExpired, EngagementDropped)


def progressed(d: Decision, ctx: "Ctx") -> list[Fact]:
    """The :class:`Progressed` fact of each A2A Task whose engagements ``d``
    changed: its state after ``d`` and its generation one higher per change.
    A Task's engagements follow one another (one taker, one open engagement
    at a time, R7.3-8), so the last one ``d`` touched is its latest."""
    out: list[Fact] = []
    counted: dict[str, tuple[int, str]] = {}
    for f in d.facts:
        if isinstance(f, _CHANGES):
            n, _ = counted.get(f.task, (0, ""))
            counted[f.task] = (n + 1, f.engagement)
    for task, (n, en) in counted.items():
        a: A2ATaskState | None = d.states.get(a2a_obj(task)) or ctx.get(a2a_obj(task))
        if a is None:
            continue
        t: TaskState = d.states.get(task) or ctx.get(task)
        e = d.states.get(en) or ctx.get(en)
        after = state_of(t.adoptions > 0, e.state, a.client_judges, a.canceled_at is not None)
        out.append(Progressed(at=ctx.now, by=ctx.caller.agent if ctx.caller else None, task=task, state=after,
                              generation=a.generation + n))
    return out


def progressing(decide: Any) -> Any:
    """``decide`` followed by :func:`progressed`: for every action that can move
    an engagement of an A2A Task (take, deliver, drop, judge, a deadline)."""

    def run(cmd: Any, ctx: "Ctx") -> Any:
        d = decide(cmd, ctx)
        if isinstance(d, Rejection):
            return d
        more = progressed(d, ctx)
        if not more:
            return d
        return Decision([*d.facts, *more], d.result, fold_into(dict(d.states), more, ctx.get))

    return run


def apply(state: A2ATaskState | None, fact: Fact) -> A2ATaskState:
    rep = msgspec.structs.replace
    match fact:
        case TaskOpened():
            return A2ATaskState(
                fact.task, fact.author, fact.to, fact.context, fact.client_judges, fact.at, [fact.message]
            )
    assert state is not None
    match fact:
        case MessageAdded(message=message):
            return rep(state, messages=[*state.messages, message])
        case Canceled():
            return rep(state, canceled_at=fact.at)
        case Progressed():
            return rep(state, state=fact.state, generation=fact.generation, changed_at=fact.at)
    raise TypeError(f"a2a task cannot apply {type(fact).__name__}")


def apply_context(state: Any, fact: Fact) -> ContextState:
    if isinstance(fact, ContextOpened):
        return ContextState(fact.context, fact.owner, fact.at)
    raise TypeError(f"a2a context cannot apply {type(fact).__name__}")

