"""§6.4 Assignments: the unit of work inside a Thread.

Created with an entry by a member who may speak, addressed to exactly one member
who may speak (R6.4-1, R6.4-2); content fixed at creation (R6.4-15). Take binds
it and starts the delivery deadline (R6.4-5); delivery starts the judgment
deadline; the creator adopts or rejects while its right stands; deadlines that
pass end it as timed out or undecided and win over in-flight actions (R6.4-12…14,
L4-3). Terminal states are irreversible (R6.4-17, R6.4-18). Taking, delivering,
judging, dropping and voiding need membership, not the right to speak (R6.2-6).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, get_args

import msgspec

from ..errors import DecisionRefused, Rejection, rejects
from .timestamps import rfc3339
from .context import acting
from .decision import make
from .facts import (
    AssignmentCreated,
    AssignmentDelivered,
    AssignmentDropped,
    AssignmentExpired,
    AssignmentJudged,
    AssignmentTaken,
    AssignmentVoided,
    Decision,
    Fact,
    MembershipEnded,
    ThreadClosed,
)
from .lifecycle import Deadline, Lifecycle, Party, Refusal
from .members import may_speak, membership, owes
from .obligations import ob_id
from .thread_state import ThreadState
from .work import Take, Void, Work, ended

if TYPE_CHECKING:
    from .context import Ctx

__all__ = [
    "AssignSpec",
    "AssignmentState",
    "LIFECYCLE",
    "WORK",
    "creation_facts",
    "effective",
    "due_expiries",
    "decide_take",
    "decide_deliver",
    "decide_judge",
    "decide_drop",
    "decide_void",
    "decide_expire",
    "apply",
    "TERMINAL",
]

StateName = Literal["open", "taken", "delivered", "adopted", "rejected", "undecided", "dropped", "timed_out", "voided"]

#: The assignment lifecycle (§6.4). A membership's end or the Thread's close
#: voids undelivered work by a fact of the Thread (R6.2-11, R6.5-4), not a verb.
LIFECYCLE = Lifecycle(
    name="assignment",
    states=get_args(StateName),
    transitions={
        "open": {"take": "taken", "void": "voided"},
        "taken": {"deliver": "delivered", "drop": "dropped", "void": "voided"},
        "delivered": {"adopt": "adopted", "reject": "rejected"},
    },
    refusals={
        (("taken", "delivered"), "take"): Refusal("{it} was already taken"),
        ("delivered", "deliver"): Refusal("{it} was already delivered; a delivery cannot be replaced", rule="R6.4-9"),
        ("delivered", "drop"): Refusal("{it} was already delivered; only undelivered work is dropped"),
        ("delivered", "void"): Refusal("{it} was delivered; only undelivered work is voided"),
        (("open", "taken"), ("adopt", "reject")): Refusal("{it} has not been delivered yet", "wait"),
    },
    deadlines={
        "taken": Deadline("deliver_by", ("timed_out",)),  # R6.4-13
        "delivered": Deadline("judge_by", ("undecided",)),  # R6.4-12
    },
    parties={
        "take": Party("to", "{it} is addressed to another member; only it may take it"),  # R6.4-19
        "deliver": Party("taker", "only the member that took {it} delivers it"),  # R6.4-22
        "drop": Party("taker", "only the member that took {it} may drop it"),  # R6.4-27
        ("adopt", "reject"): Party("creator", "only the creator of {it} judges it"),  # R6.4-24
        "void": Party("creator", "only the creator of {it} may void it"),  # R6.4-29
    },
)
TERMINAL = LIFECYCLE.terminal


class AssignSpec(msgspec.Struct, frozen=True):
    to: str
    content: bytes  # {"criteria": …, "output"?: …}
    deliver_within_s: int | None = None
    judge_within_s: int | None = None
    redoes: str | None = None


class AssignmentState(msgspec.Struct, frozen=True):
    assignment: str
    thread: str
    entry: int
    creator: str
    to: str
    content: bytes
    deliver_within_s: int
    judge_within_s: int
    created_at: int
    state: StateName = "open"
    redoes: str | None = None
    taker: str | None = None
    taken_at: int | None = None
    deliver_by: int | None = None
    delivered_at: int | None = None
    pin_memory: str | None = None
    pin_version: int | None = None
    judge_by: int | None = None
    judged_at: int | None = None
    reason: bytes | None = None
    forfeited: bool = False  # creator's membership ended after delivery (R6.2-13)
    ended_at: int | None = None


@rejects
def creation_facts(spec: AssignSpec, thread: ThreadState, entry: int, ctx: "Ctx") -> tuple[str, list[Fact]]:
    me = acting(ctx)
    if not may_speak(ctx, thread.thread, spec.to):
        raise DecisionRefused(Rejection.bad_request(
            f"an assignment is addressed to one member who may speak; {spec.to} is not (in `assign.to`)"
        ))
    if len(spec.content) > ctx.limits.max_content_bytes:
        raise DecisionRefused(Rejection.too_large(len(spec.content), ctx.limits.max_content_bytes, "the assignment's content"))
    if spec.redoes is not None:
        old = ctx.get(spec.redoes)
        if old is None or old.thread != thread.thread:
            raise DecisionRefused(Rejection.not_found("assignment", f"{spec.redoes} in thread {thread.thread}"))
    asg = ctx.new_id("as_")
    fact = AssignmentCreated(
        at=ctx.now,
        by=me,
        assignment=asg,
        thread=thread.thread,
        entry=entry,
        creator=me,
        to=spec.to,
        content=spec.content,
        deliver_within_s=spec.deliver_within_s or ctx.limits.deliver_within_s,
        judge_within_s=spec.judge_within_s or ctx.limits.judge_within_s,
        redoes=spec.redoes,
    )
    return asg, [fact]


def effective(state: AssignmentState, now: int) -> str:
    """The state as of ``now``: a passed deadline wins even before its expiry
    fact is recorded (L4-3), so no reader ever sees an expired obligation."""
    return LIFECYCLE.effective(state, now)


def due_expiries(ctx: "Ctx", thread: str, now: int) -> list[str]:
    """Assignments of ``thread`` whose deadline is due at ``now``, in the order
    they fell due: only the due rows of the ``due`` query are read (D93)."""
    limit = 8
    while True:
        rows = ctx.due(thread, limit)
        found = [a for d, a in rows if d <= now]
        if len(found) < limit:  # a row not yet due was read, or there are no more
            return found
        limit *= 4


class _Assignments(Work):
    """An assignment's own rules, as the shared verbs ask them (:mod:`kungfud.core.work`)."""

    def readable(self, state: AssignmentState, me: str, ctx: "Ctx") -> bool:
        """R9-9: a current member of its Thread."""
        return membership(ctx, state.thread, me) is not None

    def as_of(self, state: AssignmentState, owner: ThreadState, ctx: "Ctx") -> str:
        return effective(state, ctx.now)

    def due(self, owner: ThreadState, ctx: "Ctx") -> list[tuple[str, str]]:
        """Delivery → timed out (R6.4-13), judgment → undecided (R6.4-12)."""
        return [(a, LIFECYCLE.deadlines[ctx.get(a).state].outcomes[0]) for a in due_expiries(ctx, owner.thread, ctx.now)]

    def right_to_judge(self, state: AssignmentState) -> None:
        """R6.2-13: the creator's right to judge ends with its membership after delivery."""
        if state.forfeited:
            raise DecisionRefused(Rejection.forbidden(
                f"your right to judge assignment {state.assignment} was forfeited when your membership ended",
                rule="R6.2-13",
            ))


WORK = _Assignments(
    LIFECYCLE, "thread", (AssignmentDelivered, AssignmentJudged, AssignmentDropped, AssignmentExpired),
    reason=("the taker", "R6.4-26"),
)


@rejects
def decide_take(cmd: Take, ctx: "Ctx") -> Decision:
    """R6.4-19…21: the addressee binds it; ends its pending response to the
    carrying entry; may deliver in the same action (L2-2)."""
    state, thread, me = WORK.load(cmd.work, ctx)
    LIFECYCLE.check(state, "take", me)
    if not thread.open:
        raise DecisionRefused(Rejection.conflict(f"thread {state.thread} is closed"))
    deliver_by = ctx.now + state.deliver_within_s * 1000
    responded = state.entry if owes(ctx, state.thread, state.entry, me) else None
    facts: list[Fact] = [
        AssignmentTaken(
            at=ctx.now, by=me, assignment=cmd.work, thread=state.thread, taker=me, deliver_by=deliver_by,
            response_entry=responded,
        )
    ]
    ended = [ob_id("respond", f"{state.thread}.{responded}", me)] if responded is not None else []
    result: dict = {"assignment": cmd.work, "state": "taken", "deliver_by": rfc3339(deliver_by), "ended": ended}
    if cmd.deliver is not None:
        delivered = WORK.delivery(state, cmd.deliver, me, ctx)
        facts += delivered
        ended.append(ob_id("deliver", cmd.work, me))
        result.update(state="delivered", judge_by=rfc3339(delivered[-1].judge_by))  # type: ignore[attr-defined]
    return make(facts, result, ctx)


# The verbs an assignment shares with an engagement (:mod:`kungfud.core.work`):
# the taker fixes the output once (R6.4-22, R6.4-23, R6.4-9) or ends it without
# delivery, only before delivery (R6.4-27, R6.4-28); the creator adopts or
# rejects while its right to judge stands (R6.4-24…26, R6.2-13), on a closed
# Thread too (R6.5-6); every deadline of the Thread due now ends its assignment —
# delivery → timed out (R6.4-13), judgment → undecided (R6.4-12) (L4).
decide_deliver, decide_drop, decide_judge, decide_expire = WORK.deliver, WORK.drop, WORK.judge, WORK.expire


@rejects
def decide_void(cmd: Void, ctx: "Ctx") -> Decision:
    """R6.4-29: the creator ends an undelivered assignment at any time."""
    state, _, me = WORK.load(cmd.work, ctx)
    LIFECYCLE.check(state, "void", me)
    fact = AssignmentVoided(at=ctx.now, by=me, **WORK.ids(state))
    ended = [ob_id("deliver", cmd.work, state.taker)] if state.state == "taken" and state.taker else []
    return WORK.decided([fact], cmd.work, "voided", ended, ctx)


def apply(state: AssignmentState | None, fact: Fact) -> AssignmentState:
    rep = msgspec.structs.replace
    match fact:
        case AssignmentCreated():
            assert state is None
            return AssignmentState(
                assignment=fact.assignment,
                thread=fact.thread,
                entry=fact.entry,
                creator=fact.creator,
                to=fact.to,
                content=fact.content,
                deliver_within_s=fact.deliver_within_s,
                judge_within_s=fact.judge_within_s,
                created_at=fact.at,
                redoes=fact.redoes,
            )
    assert state is not None
    match fact:
        case AssignmentTaken(taker=taker, deliver_by=deliver_by):
            return rep(state, state="taken", taker=taker, taken_at=fact.at, deliver_by=deliver_by)
        case AssignmentVoided() | ThreadClosed():
            return ended(state, "voided", fact.at)
        case MembershipEnded(voided=voided) if state.assignment in voided:
            return ended(state, "voided", fact.at)
        case MembershipEnded():
            return rep(state, forfeited=True)
    return WORK.apply(state, fact)  # delivered, judged, dropped, expired: as for any work
