"""The one table of object kinds: for each, its id shape, state type, ``apply``,
the obligations its state implies (R8-2) and, for the objects that own
deadlines, how their due expiries are found and recorded (L4).

Object ids are wire ids (``ag_``, ``me_``, ``th_``, ``as_``, ``tk_``, ``en_``) plus
sub-objects that never appear on the wire: ``th_….N`` (entry N of a Thread),
``th_…/ag_…`` (one membership, D90), ``ag_….threads`` (an agent's membership
count), ``ag_….webhook`` (its webhook), ``ag_….a2a`` (its A2A card), ``tk_….vN``
(version N of a Task's contract) and ``tk_….a2a`` (a Task's A2A marker), and
``cx_`` A2A contexts (WIRE.md 1.3). The store decodes snapshots with :func:`state_type` and facts with
:data:`AnyFact` (every fact, one tagged union); ``kungfud check``
rebuilds every state by folding its facts (L1-1) with :func:`apply_to`; decisions
fold through the same table (:mod:`kungfud.core.decision`). A new kind of object
is one row here.

This module sits above every concept module and nothing in ``core`` imports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Union

from . import a2a, a2a_card, a2a_push, agent, assignment, decision, engagement, entry, facts, keys, memory, obligations, task, task_facts, thread, webhook, work

__all__ = ["Kind", "Deadlines", "KINDS", "kind", "kind_of", "state_type", "apply_to", "fold", "of_state", "AnyFact"]

#: Every fact (core/facts.py, core/task_facts.py): the store encodes and decodes
#: all of them with one codec, each by its tag.
AnyFact = Union[
    facts.AgentRegistered, facts.AgentStatusSet, facts.AgentKeySet, facts.MemoryCreated, facts.MemoryUpdated,
    facts.MemoryVisibilitySet, facts.MemoryWithdrawn, facts.ThreadCreated, facts.AdmissionIssued,
    facts.AdmissionVoided, facts.MemberJoined, facts.MembershipEnded, facts.RoleSet, facts.EntryPosted,
    facts.ResponseHandled, facts.RequestRetracted, facts.ThreadClosed, facts.AssignmentCreated,
    facts.AssignmentTaken, facts.AssignmentDelivered, facts.AssignmentJudged, facts.AssignmentDropped,
    facts.AssignmentVoided, facts.AssignmentExpired, task_facts.TaskCreated, task_facts.TaskRevised,
    task_facts.TaskAcceptingSet, task_facts.EngagementConfirmed, task_facts.EngagementDelivered,
    task_facts.EngagementJudged, task_facts.EngagementDropped, task_facts.EngagementExpired,
    webhook.WebhookSet, webhook.WebhookCleared, keys.ScopedKeyCreated, keys.ScopedKeyRevoked, a2a_card.CardSet,
    a2a_card.CardCleared, a2a.ContextOpened, a2a.TaskOpened, a2a.MessageAdded, a2a.Canceled, a2a.Progressed,
    a2a_push.PushSet, a2a_push.PushCleared,
]


@dataclass(frozen=True, slots=True)
class Deadlines:
    """An object that owns deadlines (DESIGN.md "Deadlines"): the command that
    records its due expiries (which are due is its ``expire`` decision's to find)."""

    expire: Callable[[str], Any]  # object id -> the expiry command


@dataclass(frozen=True, slots=True)
class Kind:
    name: str
    prefix: str  # the id prefix (WIRE.md "Conventions")
    state: type
    apply: Callable[[Any, Any], Any]
    sub: Callable[[str], bool] | None = None  # which ids with this prefix are this sub-object
    obligations: Callable[[str, Any], list[obligations.Obligation]] | None = None
    deadlines: Deadlines | None = None


def _numbered(obj: str) -> bool:
    return "." in obj


def _memberships(obj: str) -> bool:
    return obj.endswith(".threads")


def _webhook(obj: str) -> bool:
    return obj.endswith(".webhook")


def _card(obj: str) -> bool:
    return obj.endswith(".a2a")


def _membership(obj: str) -> bool:
    return "/" in obj  # th_…/ag_…: no wire id contains "/" (D90)


KINDS: tuple[Kind, ...] = (
    Kind("agent_threads", "ag_", thread.AgentThreads, thread.apply_agent_threads, sub=_memberships),
    Kind("webhook", "ag_", webhook.WebhookState, webhook.apply, sub=_webhook),
    Kind("a2a_card", "ag_", a2a_card.CardState, a2a_card.apply, sub=_card),
    Kind("agent", "ag_", agent.AgentState, agent.apply),
    Kind("memory", "me_", memory.MemoryState, memory.apply),
    Kind("member", "th_", thread.MemberState, thread.apply_member, sub=_membership),
    Kind("entry", "th_", entry.EntryState, entry.apply, sub=_numbered, obligations=obligations.respond),
    Kind(
        "thread", "th_", thread.ThreadState, thread.apply,
        deadlines=Deadlines(work.Expire),
    ),
    Kind("assignment", "as_", assignment.AssignmentState, assignment.apply, obligations=obligations.of_assignment),
    Kind("a2a_task", "tk_", a2a.A2ATaskState, a2a.apply, sub=a2a.is_a2a_obj),  # before contract: both have "."
    Kind("a2a_push", "tk_", a2a_push.PushState, a2a_push.apply, sub=a2a_push.is_push_obj),
    Kind("a2a_context", "cx_", a2a.ContextState, a2a.apply_context),
    Kind("contract", "tk_", task.ContractState, task.apply_contract, sub=_numbered),
    Kind("task", "tk_", task.TaskState, task.apply, deadlines=Deadlines(work.Expire)),
    Kind("engagement", "en_", engagement.EngagementState, engagement.apply, obligations=obligations.of_engagement),
)

_BY_PREFIX: dict[str, tuple[Kind, ...]] = {}
for _k in KINDS:  # sub-objects first within a prefix, so the plain object is the fallback
    _BY_PREFIX[_k.prefix] = tuple(sorted((*_BY_PREFIX.get(_k.prefix, ()), _k), key=lambda k: k.sub is None))
_BY_NAME = {k.name: k for k in KINDS}


def kind_of(obj: str) -> Kind | None:
    """The kind of object ``obj`` names, or None (an actor key such as a shard)."""
    for k in _BY_PREFIX.get(obj[:3], ()):
        if k.sub is None or k.sub(obj):
            return k
    return None


def kind(obj: str) -> str:
    k = kind_of(obj)
    if k is None:
        raise KeyError(f"no object kind for id {obj!r}")
    return k.name


def state_type(obj: str) -> type:
    return _BY_NAME[kind(obj)].state


def apply_to(obj: str, state: Any, fact: Any) -> Any:
    return _BY_NAME[kind(obj)].apply(state, fact)


def fold(obj: str, facts) -> Any:
    """State = fold(apply, facts) (DESIGN.md "Facts first")."""
    state = None
    for fact in facts:
        state = apply_to(obj, state, fact)
    return state


def of_state(obj: str, state: Any) -> list[obligations.Obligation]:
    """The open obligations an object's state implies (ignoring deadlines that
    passed but were not yet recorded: readers filter those out, L4-3)."""
    k = kind_of(obj)
    if state is None or k is None or k.obligations is None:
        return []
    return k.obligations(obj, state)


decision.use(apply_to)
