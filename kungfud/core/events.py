"""Which events a fact makes, for whom, and what each says (WIRE.md "Event",
§8 R8-20, R8-21; WIRE.md 1.1 "Outcomes", 1.2 ``task_offered``): pure, from how
the fact took each object it touched from one state to the next. The kinds are
the types of :data:`kungfud.event_kinds.AnyEvent`; the seqs and stored rows are
the store's (:mod:`kungfud.store.events`), which calls this for every fact the
writer plans and ``kungfud check`` folds — the same derivation, so a rebuild
makes the same events.

- ``turn``: to each holder, the obligations the fact added and ended, with why
  (:func:`why_ended`). Notifications only speed recovery up; the turn alone is
  always sufficient (R8-21).
- ``opportunity``: an untaken assignment newly addressed to an agent, or a
  restricted Task newly naming it (B24).
- ``outcome``: the terminal state an assignment or engagement reached, to its
  parties (:func:`outcome_parties`) but the agent whose action ended it, and of
  an assignment only to current members of its Thread (§9 R9-9, R9-2).
- ``a2a_task``: an A2A Task's new state and generation, to its author
  (WIRE.md 1.3; :class:`~kungfud.core.a2a.A2ATaskState`).
- ``task_offered``: an open-audience Task that starts or resumes taking
  engagements, once, on the open-Task stream (:data:`OPEN`), with the agents it
  is not for (:meth:`FactEvents.offer_bars`: R7.2-6, B17, R7.1-5, D202).
"""

from __future__ import annotations

from typing import Any, Callable

import msgspec

from ..conventions import rfc3339
from ..event_kinds import A2ATask, A2ATaskData, Ended, Event, Offered, Opportunity, Outcome, TaskOffered, Turn, TurnData
from .a2a import A2ATaskState
from .assignment import TERMINAL as ASSIGNMENT_TERMINAL
from .assignment import AssignmentState
from .engagement import TERMINAL as ENGAGEMENT_TERMINAL
from .engagement import EngagementState, closed_to_takes
from .facts import (
    AssignmentDelivered,
    AssignmentDropped,
    AssignmentExpired,
    AssignmentJudged,
    AssignmentTaken,
    AssignmentVoided,
    EntryPosted,
    MembershipEnded,
    RequestRetracted,
    ResponseHandled,
    RoleSet,
    ThreadClosed,
)
from .kinds import of_state
from .shapes import obligation_item, opportunity_item, outcome_item
from .task import TaskState
from .task_facts import (
    EngagementDelivered,
    EngagementDropped,
    EngagementExpired,
    EngagementJudged,
    contract_obj,
)

__all__ = ["FactEvents", "why_ended", "outcome_parties", "observed", "OPEN"]

#: The reserved feed key of the open-Task stream (``task_offered`` events,
#: stored once): no agent id is ``*``.
OPEN = "*"

_json = msgspec.json.Encoder()

_WHY: dict[type, str] = {
    EntryPosted: "replied",
    ResponseHandled: "handled",
    RequestRetracted: "retracted",
    RoleSet: "demoted",
    ThreadClosed: "closed",
    AssignmentTaken: "taken",
    AssignmentDelivered: "delivered",
    EngagementDelivered: "delivered",
    AssignmentJudged: "judged",
    EngagementJudged: "judged",
    AssignmentDropped: "dropped",
    EngagementDropped: "dropped",
    AssignmentVoided: "voided",
    AssignmentExpired: "expired",
    EngagementExpired: "expired",
}


def why_ended(fact: Any) -> str:
    """The reason an obligation ended, named after the fact that ended it (a
    membership's end says its own: left, removed, deactivated)."""
    if isinstance(fact, MembershipEnded):
        return fact.why
    return _WHY.get(type(fact)) or type(fact).__name__


def outcome_parties(state: Any) -> list[str]:
    """The parties of a piece of work: the taker and the creator of an
    assignment (the creator judges it); the engaged agent, the author and the
    judge of an engagement (R9-16)."""
    if isinstance(state, AssignmentState):
        agents = [state.taker, state.creator]
    else:
        agents = [state.agent, state.author, state.judge]
    return list(dict.fromkeys(a for a in agents if a is not None))


# The states that can end or be an opportunity (the others need no look).
_WORK = (AssignmentState, EngagementState, TaskState, A2ATaskState)


def observed(state_type: type, has_obligations: bool) -> bool:
    """Whether a fact's change to an object of this kind can make an event or
    an outcome (:meth:`FactEvents.observe` finds nothing for any other): work
    that ends or is offered, or obligations that arise or end."""
    return has_obligations or state_type in _WORK


def _takes(state: Any) -> bool:
    """Whether an open-audience Task takes new engagements now, as far as its
    own state says (paused, adoption limit: closed_to_takes; its author acted
    or is the Task's, so active)."""
    return isinstance(state, TaskState) and state.audience is None and closed_to_takes(state, True) is None


def _ended(before: Any, after: Any) -> bool:
    """Did this fact bring an assignment or engagement to its terminal state?"""
    if isinstance(after, AssignmentState):
        return after.state in ASSIGNMENT_TERMINAL and (before is None or before.state not in ASSIGNMENT_TERMINAL)
    if isinstance(after, EngagementState):
        return after.state in ENGAGEMENT_TERMINAL and (before is None or before.state not in ENGAGEMENT_TERMINAL)
    return False


def _opportunities(state: Any) -> dict[str, None]:
    """The agents ``state`` is an opportunity for (an untaken assignment's
    addressee, a restricted Task's audience), in order."""
    if isinstance(state, AssignmentState) and state.state == "open":
        return {state.to: None}
    if isinstance(state, TaskState) and state.audience is not None:
        return dict.fromkeys(state.audience)
    return {}


class FactEvents:
    """The events of one fact: :meth:`observe` each object it touched, then
    :meth:`made` lists them per agent. ``is_member`` (thread, agent) and
    ``state_of`` (object id) answer as the fact left the states — the writer
    from its transaction, ``check`` from its fold — so a rebuild makes the same
    events (D90)."""

    __slots__ = ("_turn", "_opps", "_ended", "_is_member", "_items", "_offers", "_state_of", "later")

    def __init__(self, is_member: Callable[[str, str], bool], state_of: Callable[[str], Any] | None = None) -> None:
        self._turn: dict[str, tuple[list, list]] = {}  # holder -> (added, ended)
        self._opps: dict[str, list] = {}
        self._ended: list[tuple[Any, str | None]] = []  # (terminal state, acting agent)
        self._is_member = is_member
        self._items: list[tuple[Any, str | None, bytes]] | None = None
        # Open-audience Tasks this fact made take engagements (created, resumed,
        # a limit raised), with the fact's time; offered with the latest contract.
        self._offers: list[tuple[TaskState, int]] = []
        self._state_of = state_of
        # (agent, event) of kinds added after the four above, in the order
        # observed; made after them (docs/architecture.md "Adding an event kind").
        self.later: list[tuple[str, Event]] = []

    def observe(
        self, obj: str, before: Any, after: Any, fact: Any, obligations: Callable[[str, Any], list] = of_state
    ) -> None:
        """How ``fact`` took ``obj`` from ``before`` to ``after``. ``obligations``
        is :func:`~kungfud.core.kinds.of_state` or a caller's memo of it."""
        if isinstance(after, A2ATaskState):
            # WIRE.md 1.3: each A2A-visible change (a new generation), to the author.
            if before is None or before.generation != after.generation:
                data = A2ATaskData(after.task, after.state, after.generation, rfc3339(fact.at))
                self.later.append((after.author, A2ATask(data)))
            return
        if type(after) in _WORK:
            if _takes(after) and not _takes(before):
                self._offers.append((after, fact.at))
            if _ended(before, after):
                self._ended.append((after, fact.by))
            found = _opportunities(after)
            if found:
                had = _opportunities(before) if before is not None else ()
                new = [agent for agent in found if agent not in had]
                if new:  # the item is made only for an opportunity that is new
                    item = opportunity_item(after)
                    for agent in new:
                        self._opps.setdefault(agent, []).append(item)
        obs_before = obligations(obj, before) if before is not None else ()
        obs_after = obligations(obj, after)
        if not obs_before and not obs_after:
            return
        ob_before = {o.obligation_id: o for o in obs_before}
        ob_after = {o.obligation_id: o for o in obs_after}
        for oid, ob in ob_after.items():
            if oid not in ob_before:
                self._turn.setdefault(ob.holder, ([], []))[0].append(obligation_item(ob))
        for oid, ob in ob_before.items():
            if oid not in ob_after:
                self._turn.setdefault(ob.holder, ([], []))[1].append(Ended(oid, why_ended(fact)))

    def quiet(self) -> bool:
        """Nothing observed yet that makes an event or an outcome row."""
        return not (self._turn or self._opps or self._ended or self._offers or self.later)

    def outcomes(self) -> list[tuple[Any, str | None, bytes]]:
        """The work this fact ended: (terminal state, acting agent, JSON of the
        outcome item — the event's data and the ``outcomes`` index row alike)."""
        if self._items is None:
            self._items = [(state, by, _json.encode(outcome_item(state, by))) for state, by in self._ended]
        return self._items

    def _may_read(self, agent: str, state: Any) -> bool:
        """§9 R9-9, R9-2: an assignment's outcome is Thread history, readable by
        current members only; an engagement's by its parties (R9-16)."""
        if isinstance(state, AssignmentState):
            return self._is_member(state.thread, agent)
        return True

    def made(self) -> list[tuple[str, Event]]:
        """(agent, event) in order: turn events first, then opportunities, then
        outcomes — to every party but the one whose action ended the work —,
        then ``task_offered`` events under :data:`OPEN`, then any later kind."""
        out: list[tuple[str, Event]] = []
        for agent, (added, ended) in self._turn.items():
            out.append((agent, Turn(TurnData(added, ended))))
        for agent, items in self._opps.items():
            for item in items:
                out.append((agent, Opportunity(item)))
        for state, by, item in self.outcomes():
            for agent in outcome_parties(state):
                if agent != by and self._may_read(agent, state):
                    out.append((agent, Outcome(msgspec.Raw(item))))
        for task, at in self._offers:
            out.append((OPEN, TaskOffered(Offered(task.task, task.author, task.latest, rfc3339(at)))))
        out.extend(self.later)
        return out

    def offer_bars(self) -> list[tuple[list[str], list[str] | None]]:
        """For each ``task_offered`` event, in order: the agents it is not for —
        those who may not take the Task (the author, R7.2-6; the designated
        judge, B17) — and, with an allow-list, the only agents it is for
        (R7.1-5): :func:`~kungfud.core.engagement.take_refusal`'s bars for an
        open audience (D202), from the Task's latest contract."""
        out = []
        for task, _ in self._offers:
            contract = self._state_of(contract_obj(task.task, task.latest)) if self._state_of is not None else None
            spec = contract.contract if contract is not None else None
            barred = [task.author] + ([spec.judge] if spec is not None and spec.judge is not None else [])
            out.append((barred, spec.eligibility if spec is not None else None))
        return out
