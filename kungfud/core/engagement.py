"""§7.3 Engagement: one agent's commitment to one version of a Task's contract.

Taking is confirmed in one atomic fact that binds the agent, the contract
version and the input versions, and starts the delivery deadline (R7.3-2…4);
taking again while open returns the existing engagement (L2-6). The engaged
agent delivers (fixed, irreplaceable) or drops; the judge adopts or rejects (a
rejection carries a reason); deadlines end it as timed out, or as the contract
states (R7.3-10, R7.3-18). The adoption limit is checked at adoption (§7.4, B21).
Terminal states: adopted, rejected, undecided, dropped, timed out (R7.3-24).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, get_args

import msgspec

from ..errors import Hint, Refused, Rejection, must, rejects
from .clock import rfc3339
from .context import acting
from .decision import make
from .facts import (
    Decision,
    EngagementConfirmed,
    EngagementDelivered,
    EngagementDropped,
    EngagementExpired,
    EngagementJudged,
    Fact,
    contract_obj,
)
from .lifecycle import Deadline, Lifecycle, Refusal, delivered, due, ended, judged
from .obligations import ob_id
from .pins import Pin, resolve_pin
from .task import ContractState, TaskState, in_audience, may_read_contract

if TYPE_CHECKING:
    from .context import Ctx

__all__ = [
    "EngagementState",
    "TakeTask",
    "DeliverTask",
    "DropTask",
    "JudgeTask",
    "ExpireTask",
    "LIFECYCLE",
    "is_party",
    "take_refusal",
    "closed_to_takes",
    "effective",
    "due_expiries",
    "expiry_outcomes",
    "decide_take",
    "decide_deliver",
    "decide_drop",
    "decide_judge",
    "decide_expire",
    "apply",
    "TERMINAL",
]

StateName = Literal["taken", "delivered", "adopted", "rejected", "undecided", "dropped", "timed_out"]
ExpiryOutcome = Literal["timed_out", "undecided", "adopted"]

#: The engagement lifecycle (§7.3): confirmed as taken (R7.3-2); nothing on the
#: Task's side cancels it (R7.3-20…23).
LIFECYCLE = Lifecycle(
    name="engagement",
    states=get_args(StateName),
    transitions={
        "taken": {"deliver": "delivered", "drop": "dropped"},
        "delivered": {"adopt": "adopted", "reject": "rejected"},
    },
    refusals={
        ("delivered", "deliver"): Refusal("{it} was already delivered; a delivery cannot be replaced", rule="R7.3-13"),
        ("delivered", "drop"): Refusal("{it} was already delivered; only undelivered work is dropped"),
        ("taken", ("adopt", "reject")): Refusal("{it} has not been delivered yet", "wait"),
    },
    deadlines={
        "taken": Deadline("deliver_by", ("timed_out",)),  # R7.3-10
        # R7.3-18: as the contract states, adopted only while the limit allows (B21):
        # see expiry_outcomes. Adopted by the judge is not adopted by the deadline.
        "delivered": Deadline("judge_by", ("undecided", "adopted"), unless="judged_at"),
    },
    final_rule="R7.3-25",
)
TERMINAL = LIFECYCLE.terminal


class EngagementState(msgspec.Struct, frozen=True):
    engagement: str
    task: str
    agent: str
    author: str
    judge: str
    contract_version: int
    inputs: list[tuple[str, int]]
    taken_at: int
    deliver_by: int
    judge_within_s: int
    on_no_judgment: Literal["undecided", "adopt"]
    adoption_limit: int | None
    readers: Literal["parties", "public"]
    state: StateName = "taken"
    delivered_at: int | None = None
    pin_memory: str | None = None
    pin_version: int | None = None
    judge_by: int | None = None
    judged_at: int | None = None
    reason: bytes | None = None
    ended_at: int | None = None


class TakeTask(msgspec.Struct, frozen=True):
    task: str
    deliver: Pin | None = None


class DeliverTask(msgspec.Struct, frozen=True):
    engagement: str
    pin: Pin


class DropTask(msgspec.Struct, frozen=True):
    engagement: str


class JudgeTask(msgspec.Struct, frozen=True):
    engagement: str
    verdict: Literal["adopt", "reject"]
    reason: bytes | None = None


class ExpireTask(msgspec.Struct, frozen=True):
    task: str


def is_party(e: EngagementState, reader: str) -> bool:
    """R9-16: the author, the engaged agent concerned and the judge."""
    return reader in (e.author, e.agent, e.judge)


def due_expiries(task: TaskState, now: int) -> list[str]:
    """Engagements whose deadline is due at ``now``, in the order they fell due
    (first come first served for the adoption limit, R7.4-2, B21)."""
    return due(task.live, now)


def expiry_outcomes(task: TaskState, now: int, get: Any) -> list[tuple[str, ExpiryOutcome]]:
    """How every deadline due at ``now`` ends, in the order they fell due: a
    delivery deadline → timed out (R7.3-10); a judgment deadline → the contract's
    result (R7.3-18), adopted only while the adoption limit allows (B21)."""
    out: list[tuple[str, ExpiryOutcome]] = []
    adoptions = task.adoptions
    for e_id in due_expiries(task, now):
        if task.live[e_id].state == "taken":
            out.append((e_id, "timed_out"))
            continue
        e: EngagementState = get(e_id)
        fits = e.adoption_limit is None or adoptions < e.adoption_limit
        outcome: ExpiryOutcome = "adopted" if e.on_no_judgment == "adopt" and fits else "undecided"
        adoptions += outcome == "adopted"
        out.append((e_id, outcome))
    return out


def effective(e: EngagementState, now: int, task: TaskState, get: Any) -> str:
    """The state as of ``now``: a passed deadline wins (L4-3) even before its
    expiry fact is recorded, and shows exactly what will be recorded."""
    if e.engagement in task.live and task.live[e.engagement].due <= now:
        return dict(expiry_outcomes(task, now, get))[e.engagement]
    return e.state


def take_refusal(task: TaskState, contract: ContractState, me: str) -> Rejection | None:
    """Why ``me`` may not take ``task`` under ``contract`` (its latest version),
    whatever the Task's current state: outside the creation-time audience
    (R7.2-3, R7.2-4), the author (R7.2-6), the designated judge (B17), or not
    eligible (R7.1-5, B18). None: ``me`` is an agent the Task is offered to. The
    one rule for taking, for ``task.get``'s actions, ``task.list`` and
    ``opportunities``; assumes ``me`` may read the contract (else not_found)."""
    if not in_audience(task, me):
        return Rejection.forbidden(f"task {task.task} is restricted to the agents its author named at creation", rule="R7.2-3")
    if me == task.author:
        return Rejection.forbidden(f"the author may not take its own task {task.task}", rule="R7.2-6")
    if contract.contract.judge == me:
        return Rejection.forbidden(f"the designated judge of task {task.task} may not take it")
    el = contract.contract.eligibility
    if el is not None and me not in el:
        return Rejection.forbidden(f"you are not eligible for task {task.task} under its contract", rule="R7.1-5")
    return None


def closed_to_takes(task: TaskState, author_active: bool) -> Rejection | None:
    """Why a Task takes no new engagement now, or None when it does: paused
    (B20), its author deactivated (B2), or its adoption limit reached (B21).
    The one test behind refusing a take and leaving the Task out of the offers
    (``opportunities``, ``task.list``; WIRE.md 1.1 "Offers that can be taken")."""
    if not task.accepting:
        return Rejection("conflict", f"task {task.task} is paused and accepts no new engagements", "wait")
    if not author_active:
        return Rejection.conflict(f"the author of task {task.task} is deactivated; it accepts no new engagements")
    if task.limit is not None and task.adoptions >= task.limit:
        return Rejection.conflict(f"task {task.task} reached its adoption limit of {task.limit}")
    return None


def _take_result(e_id: str, task: TaskState, version: int, inputs: list, deliver_by: int, state: str, existing: bool) -> dict:
    return {
        "engagement": e_id,
        "task": task.task,
        "contract_version": version,
        "inputs": [{"memory": m, "version": v} for m, v in inputs],
        "deliver_by": rfc3339(deliver_by),
        "state": state,
        "existing": existing,
    }


@rejects
def decide_take(cmd: TakeTask, ctx: "Ctx") -> Decision:
    me = acting(ctx)
    task: TaskState | None = ctx.get(cmd.task)
    if task is None or not may_read_contract(task, me):
        raise Refused(Rejection.not_found("task", cmd.task))
    contract: ContractState = ctx.get(contract_obj(cmd.task, task.latest))
    must(take_refusal(task, contract, me))
    existing = task.open_by_agent.get(me)
    if existing is not None:
        e: EngagementState = ctx.get(existing)
        if cmd.deliver is None:
            # L2-6: taking again while still eligible returns the open engagement.
            return Decision(
                [], _take_result(existing, task, e.contract_version, e.inputs, e.deliver_by, e.state, True), {}
            )
        if not LIFECYCLE.allows(e.state, "deliver"):
            raise Refused(Rejection.conflict(
                f"your engagement {existing} on task {cmd.task} was already delivered", rule="R7.3-13"
            ))
        facts = _delivery(e, cmd.deliver, me, ctx)
        result = _take_result(existing, task, e.contract_version, e.inputs, e.deliver_by, "delivered", True)
        result["judge_by"] = rfc3339(facts[-1].judge_by)  # type: ignore[attr-defined]
        return make(facts, result, ctx)
    author = ctx.get(task.author)
    must(closed_to_takes(task, author is not None and author.active))
    c = contract.contract
    e_id = ctx.new_id("en_")
    deliver_by = ctx.now + c.deliver_within_s * 1000
    confirmed = EngagementConfirmed(
        at=ctx.now,
        by=me,
        engagement=e_id,
        task=cmd.task,
        agent=me,
        contract_version=task.latest,
        inputs=list(c.inputs),
        deliver_by=deliver_by,
        author=task.author,
        judge=c.judge or task.author,
        judge_within_s=c.judge_within_s,
        on_no_judgment=c.on_no_judgment,
        adoption_limit=c.adoption_limit,
        readers=c.readers,
    )
    facts: list[Fact] = [confirmed]
    result = _take_result(e_id, task, task.latest, c.inputs, deliver_by, "taken", False)
    if cmd.deliver is not None:
        # R7.3-15: the engagement is confirmed before the delivery is accepted.
        delivered = _delivery(apply(None, confirmed), cmd.deliver, me, ctx)
        facts += delivered
        result["state"] = "delivered"
        result["judge_by"] = rfc3339(delivered[-1].judge_by)  # type: ignore[attr-defined]
    return make(facts, result, ctx)


def _delivery(e: EngagementState, pin: Pin, me: str, ctx: "Ctx") -> list[Fact]:
    """The engaged agent pins its own Memory; the judgment deadline starts."""
    facts, memory, version = must(resolve_pin(pin, ctx, "delivery"))
    judge_by = ctx.now + e.judge_within_s * 1000
    return [*facts, EngagementDelivered(
        at=ctx.now, by=me, engagement=e.engagement, task=e.task, pin_memory=memory, pin_version=version,
        judge_by=judge_by,
    )]


def _load(engagement: str, ctx: "Ctx") -> tuple[EngagementState, TaskState, str]:
    """The engagement, its Task and the acting caller, if the caller is a party
    (R9-16); otherwise not_found worded as for a missing id."""
    me = acting(ctx)
    e: EngagementState | None = ctx.get(engagement)
    if e is None or not is_party(e, me):
        raise Refused(Rejection.not_found("engagement", engagement))
    task: TaskState = ctx.get(e.task)
    if engagement in due_expiries(task, ctx.now):
        # A deadline at or before now wins; the actor records the expiry first.
        raise Refused(LIFECYCLE.final(e, dict(expiry_outcomes(task, ctx.now, ctx.get))[engagement]))
    return e, task, me


@rejects
def decide_deliver(cmd: DeliverTask, ctx: "Ctx") -> Decision:
    e, _, me = _load(cmd.engagement, ctx)
    if e.agent != me:
        raise Refused(Rejection.forbidden(f"only the engaged agent delivers engagement {cmd.engagement}", rule="R7.3-9"))
    LIFECYCLE.check(e, "deliver")
    facts = _delivery(e, cmd.pin, me, ctx)
    judge_by = facts[-1].judge_by  # type: ignore[attr-defined]
    result = {"engagement": cmd.engagement, "state": "delivered", "judge_by": rfc3339(judge_by)}
    return make(facts, {**result, "ended": [ob_id("deliver", cmd.engagement, e.agent)]}, ctx)


@rejects
def decide_drop(cmd: DropTask, ctx: "Ctx") -> Decision:
    e, _, me = _load(cmd.engagement, ctx)
    if e.agent != me:
        raise Refused(Rejection.forbidden(f"only the engaged agent may drop engagement {cmd.engagement}", rule="R7.3-9"))
    LIFECYCLE.check(e, "drop")
    fact = EngagementDropped(at=ctx.now, by=e.agent, engagement=cmd.engagement, task=e.task)
    return make([fact], {"engagement": cmd.engagement, "state": "dropped", "ended": [ob_id("deliver", cmd.engagement, e.agent)]}, ctx)


@rejects
def decide_judge(cmd: JudgeTask, ctx: "Ctx") -> Decision:
    """R7.3-16, R7.3-17: the judge adopts or rejects; R7.4-2: the adoption limit
    of the bound version is checked now, over every adoption of the Task."""
    e, task, me = _load(cmd.engagement, ctx)
    if e.judge != me:
        raise Refused(Rejection.forbidden(f"only the judge of engagement {cmd.engagement} may judge it", rule="R7-1"))
    final = LIFECYCLE.check(e, cmd.verdict)
    if cmd.verdict == "reject" and cmd.reason is None:
        raise Refused(Rejection.bad_request(
            "a rejection must carry a reason the engaged agent can read - at `$.args.content`", rule="R7.3-17"
        ))
    if cmd.verdict == "adopt" and e.adoption_limit is not None and task.adoptions >= e.adoption_limit:
        # WIRE.md 1.1: the judge obligation stays until a verdict; the one left is reject.
        raise Refused(Rejection(
            "conflict",
            f"task {e.task} reached its adoption limit of {e.adoption_limit}; "
            "reject the delivery instead, with a reason the engaged agent can read",
            "revise",
            Hint("task.judge", {"engagement": cmd.engagement, "verdict": "reject"}),
        ))
    fact = EngagementJudged(at=ctx.now, by=me, engagement=cmd.engagement, task=e.task, verdict=cmd.verdict, reason=cmd.reason)
    return make([fact], {"engagement": cmd.engagement, "state": final, "ended": [ob_id("judge", cmd.engagement, me)]}, ctx)


@rejects
def decide_expire(cmd: ExpireTask, ctx: "Ctx") -> Decision:
    """L4: delivery deadline → timed out (R7.3-10); judgment deadline → the
    contract's result (R7.3-18): adopted only while the adoption limit allows,
    otherwise undecided (B21)."""
    task: TaskState | None = ctx.get(cmd.task)
    if task is None:
        raise Refused(Rejection.not_found("task", cmd.task))
    facts: list[Fact] = [
        EngagementExpired(at=ctx.now, by=None, engagement=e_id, task=cmd.task, outcome=outcome)
        for e_id, outcome in expiry_outcomes(task, ctx.now, ctx.get)
    ]
    if not facts:
        raise Refused(Rejection.conflict(f"no deadline of task {cmd.task} is due"))
    return make(facts, {"task": cmd.task, "expired": [f.engagement for f in facts]}, ctx)  # type: ignore[attr-defined]


def apply(state: EngagementState | None, fact: Fact) -> EngagementState:
    match fact:
        case EngagementConfirmed():
            assert state is None
            return EngagementState(
                engagement=fact.engagement,
                task=fact.task,
                agent=fact.agent,
                author=fact.author,
                judge=fact.judge,
                contract_version=fact.contract_version,
                inputs=list(fact.inputs),
                taken_at=fact.at,
                deliver_by=fact.deliver_by,
                judge_within_s=fact.judge_within_s,
                on_no_judgment=fact.on_no_judgment,
                adoption_limit=fact.adoption_limit,
                readers=fact.readers,
            )
    assert state is not None
    match fact:
        case EngagementDelivered():
            return delivered(state, fact)
        case EngagementJudged():
            return judged(state, fact)
        case EngagementDropped():
            return ended(state, "dropped", fact.at)
        case EngagementExpired(outcome=outcome):
            return ended(state, outcome, fact.at)
    raise TypeError(f"engagement cannot apply {type(fact).__name__}")
