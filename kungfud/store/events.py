"""The durable per-agent event feed (WIRE.md "Event", §8 R8-20) and the
per-agent outcome index (WIRE.md 1.1 "Outcomes").

Events are derived, fact by fact, from how each fact changed the obligations and
opportunities its objects imply: ``turn`` events list obligations added and ended
(with why), ``opportunity`` events announce an untaken assignment addressed to an
agent or a restricted Task naming it, ``outcome`` events tell the parties of an
assignment or engagement the terminal state it reached (not the agent whose
action ended it), ``task_offered`` events announce an open-audience Task that
starts or resumes taking engagements (WIRE.md 1.2), stored once under the
reserved key ``*`` for every subscriber that asked for open Tasks. Every event
has its own seq from one daemon-wide sequence (:func:`number`, WIRE.md 1.2),
allocated in commit order with the fact, and is stored as one row under
(agent, event seq) in the same transaction, so it can be rebuilt from the log
(``kungfud check``). Notifications only speed recovery up; the turn alone is
always sufficient (R8-21).

The same observation yields the ``outcomes`` index: one row per party and ended
piece of work, keyed (party, seq, id), holding the outcome item exactly as the
event shows it — so the ``outcomes`` read pages it newest first at a cost that
does not grow with history.
"""

from __future__ import annotations

from typing import Any, Callable

import msgspec

from ..core.assignment import TERMINAL as ASSIGNMENT_TERMINAL
from ..core.assignment import AssignmentState
from ..core.engagement import TERMINAL as ENGAGEMENT_TERMINAL
from ..core.engagement import EngagementState
from ..core.facts import (
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
from ..core.task_facts import (
    EngagementDelivered,
    EngagementDropped,
    EngagementExpired,
    EngagementJudged,
    contract_obj,
)
from ..core.engagement import closed_to_takes
from ..core.kinds import of_state
from ..core.shapes import obligation_item, opportunity_item, outcome_item
from ..core.task import TaskState
from ..conventions import rfc3339
from .layout import u64

__all__ = [
    "Feed", "why_ended", "event_key", "outcome_parties", "outcome_key", "OutcomeRow", "Offer", "OPEN", "number",
]

#: The reserved feed key of the open-Task stream (``task_offered`` events,
#: stored once): no agent id is ``*``.
OPEN = "*"

_json = msgspec.json.Encoder()
_mp = msgspec.msgpack.Encoder()


def event_key(agent: str, seq: int) -> bytes:
    return agent.encode() + b"\x00" + u64(seq)


def number(rendered: list[tuple[str, bytes]], last: int, fact_seq: int) -> list[tuple[str, int, bytes]]:
    """The events of the fact ``fact_seq``, in order, each with its own event
    seq (WIRE.md 1.2, D200): one more than the event before it (``last``), but
    never below the fact's seq — so every event seq is at least the seq of the
    fact that made it, and a client that kept a seq from before format 4 (a
    fact seq) resumes without missing an event. A pure function of the log,
    so ``kungfud check`` rebuilds the same seqs."""
    out = []
    for agent, event in rendered:
        last = max(last + 1, fact_seq)
        out.append((agent, last, event))
    return out


class Offer(msgspec.Struct, frozen=True, array_like=True):
    """A row of the open-Task stream: the agents a ``task_offered`` event is
    not for — those who may not take the Task (the author, R7.2-6; the
    designated judge, B17; with an allow-list, everyone not on it, R7.1-5:
    :func:`~kungfud.core.engagement.take_refusal`'s bars for an open
    audience, D202) — and the event's JSON."""

    barred: list[str]
    eligibility: list[str] | None
    event: bytes

    def offered_to(self, agent: str) -> bool:
        return agent not in self.barred and (self.eligibility is None or agent in self.eligibility)


def _takes(state: Any) -> bool:
    """Whether an open-audience Task takes new engagements now, as far as its
    own state says (paused, adoption limit: closed_to_takes; its author acted
    or is the Task's, so active)."""
    return isinstance(state, TaskState) and state.audience is None and closed_to_takes(state, True) is None


def why_ended(fact: Any) -> str:
    """The reason an obligation ended, named after the fact that ended it."""
    if isinstance(fact, EntryPosted):
        return "replied"
    if isinstance(fact, ResponseHandled):
        return "handled"
    if isinstance(fact, RequestRetracted):
        return "retracted"
    if isinstance(fact, MembershipEnded):
        return fact.why
    if isinstance(fact, RoleSet):
        return "demoted"
    if isinstance(fact, ThreadClosed):
        return "closed"
    if isinstance(fact, AssignmentTaken):
        return "taken"
    if isinstance(fact, (AssignmentDelivered, EngagementDelivered)):
        return "delivered"
    if isinstance(fact, (AssignmentJudged, EngagementJudged)):
        return "judged"
    if isinstance(fact, (AssignmentDropped, EngagementDropped)):
        return "dropped"
    if isinstance(fact, AssignmentVoided):
        return "voided"
    if isinstance(fact, (AssignmentExpired, EngagementExpired)):
        return "expired"
    return type(fact).__name__


def outcome_parties(state: Any) -> list[str]:
    """The parties of a piece of work: the taker and the creator of an
    assignment (the creator judges it); the engaged agent, the author and the
    judge of an engagement (R9-16)."""
    if isinstance(state, AssignmentState):
        agents = [state.taker, state.creator]
    else:
        agents = [state.agent, state.author, state.judge]
    return list(dict.fromkeys(a for a in agents if a is not None))


def outcome_key(agent: str, seq: int, ident: str) -> bytes:
    return agent.encode() + b"\x00" + u64(seq) + ident.encode()


class OutcomeRow(msgspec.Struct, frozen=True, array_like=True):
    """A row of the ``outcomes`` index: the Thread whose membership gates reading
    an assignment's outcome (§9 R9-9, R9-2; None for an engagement), and the
    outcome item's JSON."""

    thread: str | None
    item: bytes


# The states that can end or be an opportunity (the others need no look).
_WORK = (AssignmentState, EngagementState, TaskState)


def observed(state_type: type, has_obligations: bool) -> bool:
    """Whether a fact's change to an object of this kind can make an event or
    an outcome (:meth:`Feed.observe` finds nothing for any other): work that
    ends or is offered, or obligations that arise or end."""
    return has_obligations or state_type in _WORK


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


class Feed:
    """Collects the events and outcomes of one fact, then renders them per agent."""

    __slots__ = ("_turn", "_opps", "_ended", "_is_member", "_items", "_offers", "_state_of")

    def __init__(self, is_member: Callable[[str, str], bool], state_of: Callable[[str], Any] | None = None) -> None:
        self._turn: dict[str, dict[str, list]] = {}
        self._opps: dict[str, list] = {}
        self._ended: list[tuple[Any, str | None]] = []  # (terminal state, acting agent)
        # (thread, agent) -> a current member as this fact left it: the caller
        # answers from the states of the serial order (the writer's transaction,
        # or check's fold), so a rebuild renders the same events (D90).
        self._is_member = is_member
        self._items: list[tuple[Any, str | None, bytes]] | None = None
        # Open-audience Tasks this fact made take engagements (created, resumed,
        # a limit raised), with the fact's time; rendered with the latest
        # contract, read through ``state_of`` (object id -> state as the fact
        # left it, like ``is_member``).
        self._offers: list[tuple[TaskState, int]] = []
        self._state_of = state_of

    def observe(
        self, obj: str, before: Any, after: Any, fact: Any, obligations: Callable[[str, Any], list] = of_state
    ) -> None:
        """How ``fact`` took ``obj`` from ``before`` to ``after``. ``obligations``
        is :func:`~kungfud.core.kinds.of_state` or a caller's memo of it."""
        if type(after) in _WORK:
            if _takes(after) and not _takes(before):
                self._offers.append((after, fact.at))
            if _ended(before, after):
                self._ended.append((after, fact.by))
            found = _opportunities(after)
            if found:
                had = _opportunities(before) if before is not None else ()
                new = [agent for agent in found if agent not in had]
                if new:  # the item is rendered only for an opportunity that is new
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
                self._turn.setdefault(ob.holder, {"added": [], "ended": []})["added"].append(obligation_item(ob))
        for oid, ob in ob_before.items():
            if oid not in ob_after:
                self._turn.setdefault(ob.holder, {"added": [], "ended": []})["ended"].append(
                    {"obligation_id": oid, "why": why_ended(fact)}
                )

    def quiet(self) -> bool:
        """Nothing observed yet that makes an event or an outcome row."""
        return not (self._turn or self._opps or self._ended or self._offers)

    def _outcomes(self) -> list[tuple[Any, str | None, bytes]]:
        """(terminal state, acting agent, JSON of the outcome item)."""
        if self._items is None:
            self._items = [(state, by, _json.encode(outcome_item(state, by))) for state, by in self._ended]
        return self._items

    def _may_read(self, agent: str, state: Any) -> bool:
        """§9 R9-9, R9-2: an assignment's outcome is Thread history, readable by
        current members only; an engagement's by its parties (R9-16)."""
        if isinstance(state, AssignmentState):
            return self._is_member(state.thread, agent)
        return True

    def rendered(self) -> list[tuple[str, bytes]]:
        """(agent, JSON of the event without seq): turn events first, then
        opportunities, then outcomes — to every party but the one whose action
        ended the work —, then ``task_offered`` events under :data:`OPEN`."""
        out: list[tuple[str, bytes]] = []
        for agent, data in self._turn.items():
            out.append((agent, _json.encode({"event": "turn", "data": data})))
        for agent, items in self._opps.items():
            for item in items:
                out.append((agent, _json.encode({"event": "opportunity", "data": item})))
        for state, by, item in self._outcomes():
            for agent in outcome_parties(state):
                if agent != by and self._may_read(agent, state):
                    out.append((agent, b'{"event":"outcome","data":' + item + b"}"))
        for _, event in self._offered():
            out.append((OPEN, event))
        return out

    def _offered(self) -> list[tuple[TaskState, bytes]]:
        """(Task, JSON of its ``task_offered`` event), content-free (WIRE.md 1.2)."""
        out = []
        for task, at in self._offers:
            data = {"task": task.task, "author": task.author, "contract_version": task.latest, "at": rfc3339(at)}
            out.append((task, _json.encode({"event": "task_offered", "data": data})))
        return out

    def _offer_rows(self) -> list[bytes]:
        """The stored :class:`Offer` of each ``task_offered`` event, in order."""
        rows = []
        for task, event in self._offered():
            contract = self._state_of(contract_obj(task.task, task.latest)) if self._state_of is not None else None
            spec = contract.contract if contract is not None else None
            barred = [task.author] + ([spec.judge] if spec is not None and spec.judge is not None else [])
            rows.append(_mp.encode(Offer(barred, spec.eligibility if spec is not None else None, event)))
        return rows

    def rows(self, seq: int, numbered: list[tuple[str, int, bytes]]) -> list[tuple[str, bytes, bytes]]:
        """The derived rows of this fact (fact ``seq``, its events ``numbered``
        by :func:`number`): one ``events`` row per event, under (agent, event
        seq) — a ``task_offered`` event once, under (:data:`OPEN`, event seq),
        as an :class:`Offer` —, and one ``outcomes`` row per party of each
        piece of work it ended."""
        offers = iter(self._offer_rows() if self._offers else ())
        rows = [
            ("events", event_key(agent, eseq), next(offers) if agent == OPEN else event)
            for agent, eseq, event in numbered
        ]
        for state, _, item in self._outcomes():
            ident = state.assignment if isinstance(state, AssignmentState) else state.engagement
            value = _mp.encode(OutcomeRow(state.thread if isinstance(state, AssignmentState) else None, item))
            for agent in outcome_parties(state):
                rows.append(("outcomes", outcome_key(agent, seq, ident), value))
        return rows
