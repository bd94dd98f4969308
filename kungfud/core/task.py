"""§7 Task: a work contract offered to agents outside any Thread.

An author offers a contract (§7.1) to an audience fixed at creation (§7.2);
eligible agents take it on in one atomic fact that binds the contract version
and input versions (§7.3, :mod:`kungfud.core.engagement`); the requester — the
author, or a judge it designates (R7-1) — judges; the adoption limit is checked
at adoption (§7.4). Revising makes a new version that binds only later
engagements (R7.1-9); pausing stops new engagements only (B20). Nothing here can
cancel an engagement (R7.3-20…23).

TaskState keeps the Task's header and counters; its live engagements (the open
one of each agent, running deadlines) are rows derived from the engagements
themselves, read through the ``live`` and ``due`` queries (D271, as D93 for a
Thread's assignments). Contract versions are sub-objects ``tk_….vN``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import msgspec

from ..errors import DecisionRefused, Rejection, rejects
from .agent import AgentState
from .context import acting, fits
from .decision import make
from .facts import Decision, Fact
from .task_facts import (
    Contract,
    EngagementConfirmed,
    EngagementDelivered,
    EngagementDropped,
    EngagementExpired,
    EngagementJudged,
    TaskAcceptingSet,
    TaskCreated,
    TaskRevised,
)

if TYPE_CHECKING:
    from .context import Ctx

__all__ = [
    "ContractSpec",
    "ContractState",
    "TaskState",
    "CreateTask",
    "Revise",
    "SetAccepting",
    "may_read_contract",
    "in_audience",
    "validate_contract",
    "decide_create",
    "decide_revise",
    "decide_set_accepting",
    "apply",
    "apply_contract",
]


class ContractSpec(msgspec.Struct, frozen=True):
    """A contract as requested; validated into a :class:`Contract`."""

    content: bytes
    inputs: list[tuple[str, int]] = []
    deliver_within_s: int | None = None
    judge_within_s: int | None = None
    on_no_judgment: Literal["undecided", "adopt"] = "undecided"
    adoption_limit: int | None = None
    judge: str | None = None
    eligibility: list[str] | None = None
    readers: Literal["parties", "public"] = "parties"


class ContractState(msgspec.Struct, frozen=True):
    task: str
    version: int
    contract: Contract
    created_at: int


class TaskState(msgspec.Struct, frozen=True):
    task: str
    author: str
    audience: list[str] | None  # None: open
    created_at: int
    latest: int  # current contract version
    accepting: bool
    adoptions: int
    judges: list[str]  # every designated judge of any version (they read the contract layer, R9-14)
    limit: int | None = None  # adoption limit of the current version
    engagements: int = 0  # engagements ever confirmed
    # Its live engagements are not here (D271): the ``live`` and ``due`` queries.


class CreateTask(msgspec.Struct, frozen=True):
    audience: list[str] | None
    contract: ContractSpec


class Revise(msgspec.Struct, frozen=True):
    task: str
    contract: ContractSpec


class SetAccepting(msgspec.Struct, frozen=True):
    task: str
    accepting: bool


def may_read_contract(task: TaskState, reader: str) -> bool:
    """R9-13, R9-14: an open Task's contract layer is readable by anyone; a
    restricted one's by the author, the named agents and every judge of any
    version (D22). Reading grants nothing else: who may take is
    :func:`in_audience`."""
    if task.audience is None:
        return True
    return reader == task.author or reader in task.audience or reader in task.judges


def in_audience(task: TaskState, agent: str) -> bool:
    """R7.2-2, R7.2-3, R7.2-4: the audience fixed at creation — anyone for an open
    Task, only the agents named at creation for a restricted one. Being (or having
    been) a designated judge, or named in a later version's eligibility, adds no
    one (that list only narrows, B18)."""
    return task.audience is None or agent in task.audience


def validate_contract(spec: ContractSpec, ctx: "Ctx") -> Contract:
    """§7.1: required inputs are versions of the author's own valid Memories
    (R7.1-2); deadlines default (B3); a designated judge is an active agent (R7-2).
    The contract as recorded, or :class:`~kungfud.errors.DecisionRefused`."""
    me = acting(ctx)
    fits(spec.content, ctx, "the contract's content")
    for memory, version in spec.inputs:
        m = ctx.get(memory)
        if m is None or m.author != me or not 1 <= version <= m.latest:
            raise DecisionRefused(Rejection.bad_request(
                f"required input {memory} version {version} is not a version of one of your own Memories"
                " (in `contract.inputs`)",
                rule="R7.1-2",
            ))
        if not m.valid:
            raise DecisionRefused(Rejection.conflict(f"memory {memory} is withdrawn and cannot be a required input", rule="R5-11"))
    if spec.judge is not None:
        j: AgentState | None = ctx.get(spec.judge)
        if j is None or not j.active:
            raise DecisionRefused(Rejection.bad_request(
                f"the designated judge {spec.judge} is not an active agent (in `contract.judge`)", rule="R7-2"
            ))
    if spec.eligibility is not None and len(set(spec.eligibility)) != len(spec.eligibility):
        raise DecisionRefused(Rejection.bad_request(
            "`eligibility.agents` names an agent more than once (in `contract.eligibility`)"
        ))
    return Contract(
        inputs=list(spec.inputs),
        deliver_within_s=spec.deliver_within_s or ctx.limits.deliver_within_s,
        judge_within_s=spec.judge_within_s or ctx.limits.judge_within_s,
        content=spec.content,
        on_no_judgment=spec.on_no_judgment,
        adoption_limit=spec.adoption_limit,
        judge=spec.judge,
        eligibility=spec.eligibility,
        readers=spec.readers,
    )


def _contract_result(task: str, version: int) -> dict:
    return {"task": task, "contract_version": version}


@rejects
def decide_create(cmd: CreateTask, ctx: "Ctx") -> Decision:
    me = acting(ctx)
    if cmd.audience is not None:
        if len(set(cmd.audience)) != len(cmd.audience):
            raise DecisionRefused(Rejection.bad_request("`audience.agents` names an agent more than once (in `audience`)"))
        # D41: whether each named id is an agent is not checked — the answer would
        # tell the caller which ids exist (contrast D3); a name that is no agent
        # can never take (R7.2-3).
        if me in cmd.audience:
            raise DecisionRefused(Rejection.bad_request(
                "the author cannot be in its own Task's audience (in `audience`)", rule="R7.2-6"
            ))
    contract = validate_contract(cmd.contract, ctx)
    task = ctx.new_id("tk_")
    fact = TaskCreated(at=ctx.now, by=me, task=task, author=me, audience=cmd.audience, contract=contract)
    return make([fact], _contract_result(task, 1), ctx)


def _authored(task_id: str, ctx: "Ctx") -> tuple[TaskState, str]:
    """The Task and its author acting on it (R7.1-8, B20); others who may read
    its contract are forbidden, the rest get not_found."""
    me = acting(ctx)
    task: TaskState | None = ctx.get(task_id)
    if task is None or not may_read_contract(task, me):
        raise DecisionRefused(Rejection.not_found("task", task_id))
    if task.author != me:
        raise DecisionRefused(Rejection.forbidden(f"only the author of task {task_id} may change it"))
    return task, me


@rejects
def decide_revise(cmd: Revise, ctx: "Ctx") -> Decision:
    """R7.1-8, R7.1-9: a new version binding only later engagements."""
    task, me = _authored(cmd.task, ctx)
    contract = validate_contract(cmd.contract, ctx)
    version = task.latest + 1
    fact = TaskRevised(at=ctx.now, by=me, task=cmd.task, version=version, contract=contract)
    return make([fact], _contract_result(cmd.task, version), ctx)


@rejects
def decide_set_accepting(cmd: SetAccepting, ctx: "Ctx") -> Decision:
    """B20: pause/resume toggles new engagements; existing ones are untouched (R7.3-21)."""
    task, me = _authored(cmd.task, ctx)
    if cmd.accepting and getattr(ctx.get(cmd.task + ".a2a"), "canceled_at", None) is not None:
        # WIRE.md 1.3 "A2A": a cancel stops new engagements for good.
        raise DecisionRefused(Rejection.conflict(f"task {cmd.task} was canceled through A2A and takes no new engagements"))
    if task.accepting == cmd.accepting:
        raise DecisionRefused(Rejection.conflict(f"task {cmd.task} is already {'accepting' if cmd.accepting else 'paused'}"))
    fact = TaskAcceptingSet(at=ctx.now, by=me, task=cmd.task, accepting=cmd.accepting)
    return make([fact], {"task": cmd.task, "accepting": cmd.accepting}, ctx)


def _ended(state: TaskState, adopted: bool) -> TaskState:
    """An engagement ended (it leaves the ``live`` rows by its own state, R7.3-8)."""
    return msgspec.structs.replace(state, adoptions=state.adoptions + 1) if adopted else state


def apply(state: TaskState | None, fact: Fact) -> TaskState:
    rep = msgspec.structs.replace
    match fact:
        case TaskCreated(contract=contract):
            assert state is None
            return TaskState(
                task=fact.task,
                author=fact.author,
                audience=fact.audience,
                created_at=fact.at,
                latest=1,
                accepting=True,
                adoptions=0,
                judges=[contract.judge] if contract.judge else [],
                limit=contract.adoption_limit,
            )
    assert state is not None
    match fact:
        case TaskRevised(version=version, contract=contract):
            judges = state.judges
            if contract.judge and contract.judge not in judges:
                judges = [*judges, contract.judge]
            return rep(state, latest=version, judges=judges, limit=contract.adoption_limit)
        case TaskAcceptingSet(accepting=accepting):
            return rep(state, accepting=accepting)
        # Every engagement fact still touches its Task (their objects() are
        # unchanged): the Task's version guards the live rows (L5, as D93).
        case EngagementConfirmed():
            return rep(state, engagements=state.engagements + 1)
        case EngagementDelivered():
            return state
        case EngagementJudged(verdict=verdict):
            return _ended(state, verdict == "adopt")
        case EngagementExpired(outcome=outcome):
            return _ended(state, outcome == "adopted")
        case EngagementDropped():
            return _ended(state, False)
    raise TypeError(f"task cannot apply {type(fact).__name__}")


def apply_contract(state: ContractState | None, fact: Fact) -> ContractState:
    match fact:
        case TaskCreated():
            return ContractState(fact.task, 1, fact.contract, fact.at)
        case TaskRevised():
            return ContractState(fact.task, fact.version, fact.contract, fact.at)
    raise TypeError(f"contract cannot apply {type(fact).__name__}")
