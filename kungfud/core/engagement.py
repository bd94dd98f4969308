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

from ..errors import Hint, DecisionRefused, Rejection, must, rejects
from .timestamps import rfc3339
from .context import acting
from .decision import make
from .facts import Decision, Fact
from .task_facts import (
    EngagementConfirmed,
    EngagementDelivered,
    EngagementDropped,
    EngagementExpired,
    EngagementJudged,
    contract_obj,
)
from .lifecycle import Deadline, Lifecycle, Party, Refusal
from .task import ContractState, TaskState, in_audience, may_read_contract
from .work import Judge, Take, Work

if TYPE_CHECKING:
    from .context import Ctx

__all__ = [
    "EngagementState",
    "LIFECYCLE",
    "WORK",
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
    parties={
        "deliver": Party("agent", "only the engaged agent delivers {it}", rule="R7.3-9"),
        "drop": Party("agent", "only the engaged agent may drop {it}", rule="R7.3-9"),
        ("adopt", "reject"): Party("judge", "only the judge of {it} may judge it", rule="R7-1"),
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


def is_party(e: EngagementState, reader: str) -> bool:
    """R9-16: the author, the engaged agent concerned and the judge."""
    return reader in (e.author, e.agent, e.judge)


def due_expiries(query: Any, task: str, now: int) -> list[str]:
    """Engagements of ``task`` whose deadline is due at ``now``, in the order
    they fell due (first come first served for the adoption limit, R7.4-2,
    B21): only the due rows of the ``due`` query are read (D271, as D93)."""
    limit = 8
    while True:
        rows = query("due", task, limit)
        found = [e for d, e in rows if d <= now]
        if len(found) < limit:  # a row not yet due was read, or there are no more
            return found
        limit *= 4


def expiry_outcomes(task: TaskState, now: int, get: Any, query: Any) -> list[tuple[str, ExpiryOutcome]]:
    """How every deadline due at ``now`` ends, in the order they fell due: a
    delivery deadline → timed out (R7.3-10); a judgment deadline → the contract's
    result (R7.3-18), adopted only while the adoption limit allows (B21).
    ``get``/``query``: the reader's (a decision's ``ctx``, or a view)."""
    out: list[tuple[str, ExpiryOutcome]] = []
    adoptions = task.adoptions
    for e_id in due_expiries(query, task.task, now):
        e: EngagementState = get(e_id)
        if e.state == "taken":
            out.append((e_id, "timed_out"))
            continue
        fits = e.adoption_limit is None or adoptions < e.adoption_limit
        outcome: ExpiryOutcome = "adopted" if e.on_no_judgment == "adopt" and fits else "undecided"
        adoptions += outcome == "adopted"
        out.append((e_id, outcome))
    return out


def effective(e: EngagementState, now: int, task: TaskState, get: Any, query: Any) -> str:
    """The state as of ``now``: a passed deadline wins (L4-3) even before its
    expiry fact is recorded, and shows exactly what will be recorded."""
    due_at = LIFECYCLE.due(e)
    if e.state in ("taken", "delivered") and due_at is not None and due_at <= now:
        return dict(expiry_outcomes(task, now, get, query))[e.engagement]
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
def decide_take(cmd: Take, ctx: "Ctx") -> Decision:
    me = acting(ctx)
    task: TaskState | None = ctx.get(cmd.work)
    if task is None or not may_read_contract(task, me):
        raise DecisionRefused(Rejection.not_found("task", cmd.work))
    contract: ContractState = ctx.get(contract_obj(cmd.work, task.latest))
    must(take_refusal(task, contract, me))
    mine = ctx.live(cmd.work, me, 1)  # R7.3-8: its open engagement, if any (D271)
    existing = mine[0][0] if mine else None
    if existing is not None:
        e: EngagementState = ctx.get(existing)
        if cmd.deliver is None:
            # L2-6: taking again while still eligible returns the open engagement.
            return Decision(
                [], _take_result(existing, task, e.contract_version, e.inputs, e.deliver_by, e.state, True), {}
            )
        if not LIFECYCLE.allows(e.state, "deliver"):
            raise DecisionRefused(Rejection.conflict(
                f"your engagement {existing} on task {cmd.work} was already delivered", rule="R7.3-13"
            ))
        facts = WORK.delivery(e, cmd.deliver, me, ctx)
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
        task=cmd.work,
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
        delivered = WORK.delivery(apply(None, confirmed), cmd.deliver, me, ctx)
        facts += delivered
        result["state"] = "delivered"
        result["judge_by"] = rfc3339(delivered[-1].judge_by)  # type: ignore[attr-defined]
    return make(facts, result, ctx)


class _Engagements(Work):
    """An engagement's own rules, as the shared verbs ask them (:mod:`kungfud.core.work`)."""

    def readable(self, state: EngagementState, me: str, ctx: "Ctx") -> bool:
        """R9-16: a party to it."""
        return is_party(state, me)

    def as_of(self, state: EngagementState, owner: TaskState, ctx: "Ctx") -> str:
        return effective(state, ctx.now, owner, ctx.get, ctx.query)

    def due(self, owner: TaskState, ctx: "Ctx") -> list[tuple[str, str]]:
        return list(expiry_outcomes(owner, ctx.now, ctx.get, ctx.query))

    def may_adopt(self, state: EngagementState, owner: TaskState, cmd: Judge) -> None:
        """R7.4-2: the adoption limit of the bound version is checked now, over
        every adoption of the Task. WIRE.md 1.1: the judge obligation stays until
        a verdict; the one left is reject."""
        if state.adoption_limit is not None and owner.adoptions >= state.adoption_limit:
            raise DecisionRefused(Rejection(
                "conflict",
                f"task {state.task} reached its adoption limit of {state.adoption_limit}; "
                "reject the delivery instead, with a reason the engaged agent can read",
                "revise",
                Hint("task.judge", {"engagement": cmd.work, "verdict": "reject"}),
            ))


WORK = _Engagements(
    LIFECYCLE, "task", (EngagementDelivered, EngagementJudged, EngagementDropped, EngagementExpired),
    reason=("the engaged agent", "R7.3-17"),
)
# The verbs an engagement shares with an assignment (:mod:`kungfud.core.work`):
# the engaged agent fixes the output once (R7.3-9, R7.3-11, R7.3-13) or drops
# it before delivery; the judge adopts or rejects (R7.3-16, R7.3-17) within the
# adoption limit (R7.4-2); a delivery deadline ends it as timed out (R7.3-10), a
# judgment deadline as the contract states (R7.3-18), adopted only while the
# adoption limit allows, otherwise undecided (B21).
decide_deliver, decide_drop, decide_judge, decide_expire = WORK.deliver, WORK.drop, WORK.judge, WORK.expire


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
    return WORK.apply(state, fact)
