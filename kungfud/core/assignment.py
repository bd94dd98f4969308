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

from ..errors import Refused, Rejection, must, rejects
from .clock import rfc3339
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
from .lifecycle import Deadline, Lifecycle, Refusal, delivered, ended, judged
from .members import may_speak, membership, owes
from .obligations import ob_id
from .pins import Pin, resolve_pin
from .thread_state import ThreadState

if TYPE_CHECKING:
    from .context import Ctx

__all__ = [
    "AssignSpec",
    "AssignmentState",
    "Take",
    "Deliver",
    "Judge",
    "Drop",
    "Void",
    "Expire",
    "LIFECYCLE",
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


class Take(msgspec.Struct, frozen=True):
    assignment: str
    deliver: Pin | None = None


class Deliver(msgspec.Struct, frozen=True):
    assignment: str
    pin: Pin


class Judge(msgspec.Struct, frozen=True):
    assignment: str
    verdict: Literal["adopt", "reject"]
    reason: bytes | None = None


class Drop(msgspec.Struct, frozen=True):
    assignment: str


class Void(msgspec.Struct, frozen=True):
    assignment: str


class Expire(msgspec.Struct, frozen=True):
    """Record every expiry of ``thread`` due at ``ctx.now`` (a deadline, no agent)."""

    thread: str


@rejects
def creation_facts(spec: AssignSpec, thread: ThreadState, entry: int, ctx: "Ctx") -> tuple[str, list[Fact]]:
    me = acting(ctx)
    if not may_speak(ctx, thread.thread, spec.to):
        raise Refused(Rejection.bad_request(
            f"an assignment is addressed to one member who may speak; {spec.to} is not - at `$.args.assign.to`"
        ))
    if len(spec.content) > ctx.limits.max_content_bytes:
        raise Refused(Rejection.too_large(len(spec.content), ctx.limits.max_content_bytes, "the assignment's content"))
    if spec.redoes is not None:
        old = ctx.get(spec.redoes)
        if old is None or old.thread != thread.thread:
            raise Refused(Rejection.not_found("assignment", f"{spec.redoes} in thread {thread.thread}"))
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


def _load(assignment: str, ctx: "Ctx") -> tuple[AssignmentState, ThreadState, str]:
    """The assignment, its Thread and the acting caller, if the caller may read
    them (a current member, R9-9); otherwise not_found worded as for a missing id."""
    me = acting(ctx)
    state: AssignmentState | None = ctx.get(assignment)
    thread = ctx.get(state.thread) if state is not None else None
    if state is None or thread is None or membership(ctx, thread.thread, me) is None:
        raise Refused(Rejection.not_found("assignment", assignment))
    if effective(state, ctx.now) != state.state:
        # B5: a deadline at or before now wins; the actor records the expiry first.
        raise Refused(LIFECYCLE.final(state, effective(state, ctx.now)))
    return state, thread, me


def _delivery(state: AssignmentState, pin: Pin, me: str, ctx: "Ctx") -> list[Fact]:
    """R6.4-22: the taker pins its own Memory; the judgment deadline starts."""
    facts, memory, version = must(resolve_pin(pin, ctx, "delivery"))
    judge_by = ctx.now + state.judge_within_s * 1000
    return [*facts, AssignmentDelivered(
        at=ctx.now, by=me, assignment=state.assignment, thread=state.thread,
        pin_memory=memory, pin_version=version, judge_by=judge_by,
    )]


@rejects
def decide_take(cmd: Take, ctx: "Ctx") -> Decision:
    """R6.4-19…21: the addressee binds it; ends its pending response to the
    carrying entry; may deliver in the same action (L2-2)."""
    state, thread, me = _load(cmd.assignment, ctx)
    if state.to != me:
        raise Refused(Rejection.forbidden(f"assignment {cmd.assignment} is addressed to another member; only it may take it"))
    LIFECYCLE.check(state, "take")
    if not thread.open:
        raise Refused(Rejection.conflict(f"thread {state.thread} is closed"))
    deliver_by = ctx.now + state.deliver_within_s * 1000
    responded = state.entry if owes(ctx, state.thread, state.entry, me) else None
    facts: list[Fact] = [
        AssignmentTaken(
            at=ctx.now, by=me, assignment=cmd.assignment, thread=state.thread, taker=me, deliver_by=deliver_by,
            response_entry=responded,
        )
    ]
    ended = [ob_id("respond", f"{state.thread}.{responded}", me)] if responded is not None else []
    result: dict = {"assignment": cmd.assignment, "state": "taken", "deliver_by": rfc3339(deliver_by), "ended": ended}
    if cmd.deliver is not None:
        delivered = _delivery(state, cmd.deliver, me, ctx)
        facts += delivered
        ended.append(ob_id("deliver", cmd.assignment, me))
        result.update(state="delivered", judge_by=rfc3339(delivered[-1].judge_by))  # type: ignore[attr-defined]
    return make(facts, result, ctx)


@rejects
def decide_deliver(cmd: Deliver, ctx: "Ctx") -> Decision:
    """R6.4-22, R6.4-23, R6.4-9: the taker fixes the output once."""
    state, _, me = _load(cmd.assignment, ctx)
    if state.taker != me:
        raise Refused(Rejection.forbidden(f"only the member that took assignment {cmd.assignment} delivers it"))
    LIFECYCLE.check(state, "deliver")
    facts = _delivery(state, cmd.pin, me, ctx)
    judge_by = facts[-1].judge_by  # type: ignore[attr-defined]
    result = {"assignment": cmd.assignment, "state": "delivered", "judge_by": rfc3339(judge_by)}
    return make(facts, {**result, "ended": [ob_id("deliver", cmd.assignment, me)]}, ctx)


@rejects
def decide_judge(cmd: Judge, ctx: "Ctx") -> Decision:
    """R6.4-24…26: the creator, while its right to judge stands; a rejection
    carries a reason the taker can read. Allowed on a closed Thread (R6.5-6)."""
    state, _, me = _load(cmd.assignment, ctx)
    if state.creator != me:
        raise Refused(Rejection.forbidden(f"only the creator of assignment {cmd.assignment} judges it"))
    if state.forfeited:
        raise Refused(Rejection.forbidden(
            f"your right to judge assignment {cmd.assignment} was forfeited when your membership ended",
            rule="R6.2-13",
        ))
    final = LIFECYCLE.check(state, cmd.verdict)
    if cmd.verdict == "reject" and cmd.reason is None:
        raise Refused(Rejection.bad_request(
            "a rejection must carry a reason the taker can read - at `$.args.content`", rule="R6.4-26"
        ))
    fact = AssignmentJudged(
        at=ctx.now, by=me, assignment=cmd.assignment, thread=state.thread, verdict=cmd.verdict, reason=cmd.reason
    )
    return make([fact], {"assignment": cmd.assignment, "state": final, "ended": [ob_id("judge", cmd.assignment, me)]}, ctx)


@rejects
def decide_drop(cmd: Drop, ctx: "Ctx") -> Decision:
    """R6.4-27, R6.4-28: the taker ends it without delivery, only before delivery."""
    state, _, me = _load(cmd.assignment, ctx)
    if state.taker != me:
        raise Refused(Rejection.forbidden(f"only the member that took assignment {cmd.assignment} may drop it"))
    LIFECYCLE.check(state, "drop")
    fact = AssignmentDropped(at=ctx.now, by=me, assignment=cmd.assignment, thread=state.thread)
    return make([fact], {"assignment": cmd.assignment, "state": "dropped", "ended": [ob_id("deliver", cmd.assignment, me)]}, ctx)


@rejects
def decide_void(cmd: Void, ctx: "Ctx") -> Decision:
    """R6.4-29: the creator ends an undelivered assignment at any time."""
    state, _, me = _load(cmd.assignment, ctx)
    if state.creator != me:
        raise Refused(Rejection.forbidden(f"only the creator of assignment {cmd.assignment} may void it"))
    LIFECYCLE.check(state, "void")
    fact = AssignmentVoided(at=ctx.now, by=me, assignment=cmd.assignment, thread=state.thread)
    ended = [ob_id("deliver", cmd.assignment, state.taker)] if state.state == "taken" and state.taker else []
    return make([fact], {"assignment": cmd.assignment, "state": "voided", "ended": ended}, ctx)


@rejects
def decide_expire(cmd: Expire, ctx: "Ctx") -> Decision:
    """L4: every deadline of the Thread that is due at ``ctx.now`` ends its
    assignment — delivery → timed out (R6.4-13), judgment → undecided (R6.4-12)."""
    thread = ctx.get(cmd.thread)
    if thread is None:
        raise Refused(Rejection.not_found("thread", cmd.thread))
    facts: list[Fact] = [
        AssignmentExpired(
            at=ctx.now, by=None, assignment=asg, thread=cmd.thread,
            outcome=LIFECYCLE.deadlines[ctx.get(asg).state].outcomes[0],  # type: ignore[arg-type]
        )
        for asg in due_expiries(ctx, cmd.thread, ctx.now)
    ]
    if not facts:
        raise Refused(Rejection.conflict(f"no deadline of thread {cmd.thread} is due"))
    return make(facts, {"thread": cmd.thread, "expired": [f.assignment for f in facts]}, ctx)  # type: ignore[attr-defined]


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
        case AssignmentDelivered():
            return delivered(state, fact)
        case AssignmentJudged():
            return judged(state, fact)
        case AssignmentDropped():
            return ended(state, "dropped", fact.at)
        case AssignmentVoided() | ThreadClosed():
            return ended(state, "voided", fact.at)
        case AssignmentExpired(outcome=outcome):
            return ended(state, outcome, fact.at)
        case MembershipEnded(voided=voided) if state.assignment in voided:
            return ended(state, "voided", fact.at)
        case MembershipEnded():
            return rep(state, forfeited=True)
    raise TypeError(f"assignment cannot apply {type(fact).__name__}")
