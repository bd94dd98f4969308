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

from typing import TYPE_CHECKING, Literal

import msgspec

from ..errors import Rejection
from .agent import require_active
from .clock import deadline_passed, rfc3339
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
from .members import may_speak, membership, owes
from .obligations import ob_id
from .pins import Pin, resolve_pin

if TYPE_CHECKING:
    from .context import Ctx
    from .thread import ThreadState

__all__ = [
    "AssignSpec",
    "AssignmentState",
    "Take",
    "Deliver",
    "Judge",
    "Drop",
    "Void",
    "Expire",
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
TERMINAL = frozenset({"adopted", "rejected", "undecided", "dropped", "timed_out", "voided"})


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


def creation_facts(
    spec: AssignSpec, thread: "ThreadState", entry: int, ctx: "Ctx"
) -> tuple[str, list[Fact]] | Rejection:
    assert ctx.caller is not None
    if not may_speak(ctx, thread.thread, spec.to):
        return Rejection.bad_request(
            f"an assignment is addressed to one member who may speak; {spec.to} is not - at `$.args.assign.to`"
        )
    if len(spec.content) > ctx.limits.max_content_bytes:
        return Rejection("too_large", "the assignment's content is too large", "revise")
    if spec.redoes is not None:
        old = ctx.get(spec.redoes)
        if old is None or old.thread != thread.thread:
            return Rejection.not_found("assignment", f"{spec.redoes} in thread {thread.thread}")
    asg = ctx.new_id("as_")
    fact = AssignmentCreated(
        at=ctx.now,
        by=ctx.caller.agent,
        assignment=asg,
        thread=thread.thread,
        entry=entry,
        creator=ctx.caller.agent,
        to=spec.to,
        content=spec.content,
        deliver_within_s=spec.deliver_within_s or ctx.limits.deliver_within_s,
        judge_within_s=spec.judge_within_s or ctx.limits.judge_within_s,
        redoes=spec.redoes,
    )
    return asg, [fact]


def effective(state: AssignmentState, now: int) -> StateName:
    """The state as of ``now``: a passed deadline wins even before its expiry fact
    is recorded (L4-3), so no reader ever sees an expired obligation."""
    if state.state == "taken" and state.deliver_by is not None and state.deliver_by <= now:
        return "timed_out"
    if state.state == "delivered" and state.judge_by is not None and state.judge_by <= now:
        return "undecided"
    return state.state


def due_expiries(ctx: "Ctx", thread: str, now: int) -> list[str]:
    """Assignments of ``thread`` whose deadline is due at ``now``, in the order
    they fell due: only the due rows of the ``due`` query are read (D93)."""
    limit = 8
    while True:
        rows = ctx.due(thread, limit)
        due = [a for d, a in rows if d <= now]
        if len(due) < limit:  # a row not yet due was read, or there are no more
            return due
        limit *= 4


def _load(cmd_assignment: str, ctx: "Ctx") -> tuple[AssignmentState | None, "ThreadState | None", Rejection | None]:
    """The assignment and its Thread, if the caller may read them (a current
    member, R9-9); otherwise not_found worded as for a missing id."""
    if (r := require_active(ctx)) is not None:
        return None, None, r
    assert ctx.caller is not None
    state: AssignmentState | None = ctx.get(cmd_assignment)
    thread = ctx.get(state.thread) if state is not None else None
    if state is None or thread is None or membership(ctx, thread.thread, ctx.caller.agent) is None:
        return None, None, Rejection.not_found("assignment", cmd_assignment)
    if effective(state, ctx.now) != state.state:
        # B5: a deadline at or before now wins; the actor records the expiry first.
        return None, None, _terminal(state, effective(state, ctx.now))
    return state, thread, None


def _terminal(state: AssignmentState, name: StateName | None = None) -> Rejection:
    """``name``: the state as of now when a deadline has passed but its expiry
    is not recorded yet (it is then the same refusal as after the expiry)."""
    name = name or state.state
    if name == "timed_out" and state.deliver_by is not None:
        return deadline_passed("assignment", state.assignment, name, state.deliver_by)
    if name == "undecided" and state.judge_by is not None:
        return deadline_passed("assignment", state.assignment, name, state.judge_by)
    return Rejection.conflict(f"assignment {state.assignment} is {state.state.replace('_', ' ')}; that state is final")


def decide_take(cmd: Take, ctx: "Ctx") -> Decision | Rejection:
    """R6.4-19…21: the addressee binds it; ends its pending response to the
    carrying entry; may deliver in the same action (L2-2)."""
    state, thread, r = _load(cmd.assignment, ctx)
    if r is not None:
        return r
    assert state is not None and thread is not None and ctx.caller is not None
    me = ctx.caller.agent
    if state.to != me:
        return Rejection.forbidden(f"assignment {cmd.assignment} is addressed to another member; only it may take it")
    if state.state != "open":
        return _terminal(state) if state.state in TERMINAL else Rejection.conflict(f"assignment {cmd.assignment} was already taken")
    if not thread.open:
        return Rejection.conflict(f"thread {state.thread} is closed")
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
        delivered = _delivery_facts(state, cmd.deliver, ctx)
        if isinstance(delivered, Rejection):
            return delivered
        facts += delivered
        judge_by = delivered[-1].judge_by  # type: ignore[attr-defined]
        ended.append(ob_id("deliver", cmd.assignment, me))
        result.update(state="delivered", judge_by=rfc3339(judge_by))
    return make(facts, result, ctx)


def _delivery_facts(state: AssignmentState, pin: Pin, ctx: "Ctx") -> list[Fact] | Rejection:
    pinned = resolve_pin(pin, ctx, "delivery")
    if isinstance(pinned, Rejection):
        return pinned
    facts, memory, version = pinned
    assert ctx.caller is not None
    judge_by = ctx.now + state.judge_within_s * 1000
    return [
        *facts,
        AssignmentDelivered(
            at=ctx.now, by=ctx.caller.agent, assignment=state.assignment, thread=state.thread,
            pin_memory=memory, pin_version=version, judge_by=judge_by,
        ),
    ]


def decide_deliver(cmd: Deliver, ctx: "Ctx") -> Decision | Rejection:
    """R6.4-22, R6.4-23, R6.4-9: the taker fixes the output once."""
    state, thread, r = _load(cmd.assignment, ctx)
    if r is not None:
        return r
    assert state is not None and ctx.caller is not None
    me = ctx.caller.agent
    if state.taker != me:
        return Rejection.forbidden(f"only the member that took assignment {cmd.assignment} delivers it")
    if state.state != "taken":
        if state.state == "delivered":
            return Rejection.conflict(f"assignment {cmd.assignment} was already delivered; a delivery cannot be replaced", rule="R6.4-9")
        return _terminal(state)
    facts = _delivery_facts(state, cmd.pin, ctx)
    if isinstance(facts, Rejection):
        return facts
    judge_by = facts[-1].judge_by  # type: ignore[attr-defined]
    return make(
        facts,
        {
            "assignment": cmd.assignment,
            "state": "delivered",
            "judge_by": rfc3339(judge_by),
            "ended": [ob_id("deliver", cmd.assignment, me)],
        },
        ctx,
    )


def decide_judge(cmd: Judge, ctx: "Ctx") -> Decision | Rejection:
    """R6.4-24…26: the creator, while its right to judge stands; a rejection
    carries a reason the taker can read. Allowed on a closed Thread (R6.5-6)."""
    state, thread, r = _load(cmd.assignment, ctx)
    if r is not None:
        return r
    assert state is not None and ctx.caller is not None
    me = ctx.caller.agent
    if state.creator != me:
        return Rejection.forbidden(f"only the creator of assignment {cmd.assignment} judges it")
    if state.forfeited:
        return Rejection.forbidden(
            f"your right to judge assignment {cmd.assignment} was forfeited when your membership ended",
            rule="R6.2-13",
        )
    if state.state != "delivered":
        if state.state in TERMINAL:
            return _terminal(state)
        return Rejection("conflict", f"assignment {cmd.assignment} has not been delivered yet", "wait")
    if cmd.verdict == "reject" and cmd.reason is None:
        return Rejection.bad_request("a rejection must carry a reason the taker can read - at `$.args.content`", rule="R6.4-26")
    fact = AssignmentJudged(
        at=ctx.now, by=me, assignment=cmd.assignment, thread=state.thread, verdict=cmd.verdict, reason=cmd.reason
    )
    final = "adopted" if cmd.verdict == "adopt" else "rejected"
    return make([fact], {"assignment": cmd.assignment, "state": final, "ended": [ob_id("judge", cmd.assignment, me)]}, ctx)


def decide_drop(cmd: Drop, ctx: "Ctx") -> Decision | Rejection:
    """R6.4-27, R6.4-28: the taker ends it without delivery, only before delivery."""
    state, thread, r = _load(cmd.assignment, ctx)
    if r is not None:
        return r
    assert state is not None and ctx.caller is not None
    me = ctx.caller.agent
    if state.taker != me:
        return Rejection.forbidden(f"only the member that took assignment {cmd.assignment} may drop it")
    if state.state != "taken":
        if state.state == "delivered":
            return Rejection.conflict(f"assignment {cmd.assignment} was already delivered; only undelivered work is dropped")
        return _terminal(state)
    fact = AssignmentDropped(at=ctx.now, by=me, assignment=cmd.assignment, thread=state.thread)
    return make([fact], {"assignment": cmd.assignment, "state": "dropped", "ended": [ob_id("deliver", cmd.assignment, me)]}, ctx)


def decide_void(cmd: Void, ctx: "Ctx") -> Decision | Rejection:
    """R6.4-29: the creator ends an undelivered assignment at any time."""
    state, thread, r = _load(cmd.assignment, ctx)
    if r is not None:
        return r
    assert state is not None and ctx.caller is not None
    me = ctx.caller.agent
    if state.creator != me:
        return Rejection.forbidden(f"only the creator of assignment {cmd.assignment} may void it")
    if state.state not in ("open", "taken"):
        if state.state == "delivered":
            return Rejection.conflict(f"assignment {cmd.assignment} was delivered; only undelivered work is voided")
        return _terminal(state)
    fact = AssignmentVoided(at=ctx.now, by=me, assignment=cmd.assignment, thread=state.thread)
    ended = [ob_id("deliver", cmd.assignment, state.taker)] if state.state == "taken" and state.taker else []
    return make([fact], {"assignment": cmd.assignment, "state": "voided", "ended": ended}, ctx)


def decide_expire(cmd: Expire, ctx: "Ctx") -> Decision | Rejection:
    """L4: every deadline of the Thread that is due at ``ctx.now`` ends its
    assignment — delivery → timed out (R6.4-13), judgment → undecided (R6.4-12)."""
    thread = ctx.get(cmd.thread)
    if thread is None:
        return Rejection.not_found("thread", cmd.thread)
    facts: list[Fact] = []
    for asg in due_expiries(ctx, cmd.thread, ctx.now):
        a: AssignmentState = ctx.get(asg)
        outcome: Literal["timed_out", "undecided"] = "timed_out" if a.state == "taken" else "undecided"
        facts.append(AssignmentExpired(at=ctx.now, by=None, assignment=asg, thread=cmd.thread, outcome=outcome))
    if not facts:
        return Rejection.conflict(f"no deadline of thread {cmd.thread} is due")
    return make(facts, {"thread": cmd.thread, "expired": [f.assignment for f in facts]}, ctx)  # type: ignore[attr-defined]


def apply(state: AssignmentState | None, fact: Fact) -> AssignmentState:
    rep = msgspec.structs.replace
    if isinstance(fact, AssignmentCreated):
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
    if isinstance(fact, AssignmentTaken):
        return rep(state, state="taken", taker=fact.taker, taken_at=fact.at, deliver_by=fact.deliver_by)
    if isinstance(fact, AssignmentDelivered):
        return rep(
            state, state="delivered", delivered_at=fact.at, pin_memory=fact.pin_memory, pin_version=fact.pin_version,
            judge_by=fact.judge_by,
        )
    if isinstance(fact, AssignmentJudged):
        final: StateName = "adopted" if fact.verdict == "adopt" else "rejected"
        return rep(state, state=final, judged_at=fact.at, reason=fact.reason, ended_at=fact.at)
    if isinstance(fact, AssignmentDropped):
        return rep(state, state="dropped", ended_at=fact.at)
    if isinstance(fact, AssignmentVoided):
        return rep(state, state="voided", ended_at=fact.at)
    if isinstance(fact, AssignmentExpired):
        return rep(state, state=fact.outcome, ended_at=fact.at)
    if isinstance(fact, MembershipEnded):
        if state.assignment in fact.voided:
            return rep(state, state="voided", ended_at=fact.at)
        return rep(state, forfeited=True)
    if isinstance(fact, ThreadClosed):
        return rep(state, state="voided", ended_at=fact.at)
    raise TypeError(f"assignment cannot apply {type(fact).__name__}")
