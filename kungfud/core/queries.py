"""What the named collection queries of :class:`~kungfud.core.context.Ctx` mean.

A decision reads a collection (a Thread's governors, an agent's memberships, the
responses an agent owes in a Thread, a Thread's live assignments and their
deadlines) through a query instead of a list kept in one growing object
(docs/decisions.md D90, D93). :func:`answers` is the definition: what one
object's state contributes to one query. The store answers from index rows
derived from the same states (``store/indexes.py``), the actor lays its
in-flight overlay over them, and tests answer by scanning states
(:func:`state_query`); all three must agree.

A query records no version. Every fact that changes one of these collections
also touches the object named as its guard, which the decision reads first: the
Thread for its members, pending responses and live assignments, ``ag_….threads``
for an agent's memberships (L5).

| query | key | party | answers, in this order |
|---|---|---|---|
| ``governors`` | thread | – | agent ids of current governors |
| ``speakers`` | thread | – | agent ids of current members who may speak |
| ``memberships`` | agent | – | thread ids the agent is a current member of |
| ``pending`` | thread | agent or None | ``(entry, agent)`` of pending responses |
| ``live`` | thread | agent or None | ``(assignment, Live)`` of non-terminal assignments (the party's: it created or took them) |
| ``due`` | thread | – | ``(due, assignment)`` of running deadlines |
| ``live`` | task | agent or None | ``(engagement, LiveEngagement)`` of non-terminal engagements (the agent's: its open one, R7.3-8) |
| ``due`` | task | – | ``(due, engagement)`` of running deadlines |

A Task's live engagements are rows of their own as a Thread's live
assignments are (D93; for Tasks issue 27, D271): the Task object keeps counts.
"""

from __future__ import annotations

from typing import Any, Callable, Literal

import msgspec

from .assignment import LIFECYCLE as ASSIGNMENT
from .assignment import TERMINAL, AssignmentState
from .engagement import LIFECYCLE as ENGAGEMENT
from .engagement import EngagementState
from .entry import EntryState
from .members import SPEAKING, MemberState

__all__ = ["Live", "LiveEngagement", "live_of", "live_engagement", "answers", "answering", "may_answer", "state_query"]


class Live(msgspec.Struct, frozen=True, array_like=True):
    """A non-terminal assignment, as its Thread's decisions need to know it."""

    creator: str
    to: str
    entry: int
    state: Literal["open", "taken", "delivered"]
    taker: str | None = None
    due: int | None = None  # deliver_by while taken, judge_by while delivered
    forfeited: bool = False


def live_of(a: AssignmentState) -> Live | None:
    """The live view of an assignment; None once it is terminal."""
    if a.state in TERMINAL:
        return None
    return Live(a.creator, a.to, a.entry, a.state, a.taker, ASSIGNMENT.due(a), a.forfeited)  # type: ignore[arg-type]


class LiveEngagement(msgspec.Struct, frozen=True, array_like=True):
    """A non-terminal engagement, as its Task's decisions need to know it."""

    agent: str
    state: Literal["taken", "delivered"]
    due: int  # deliver_by while taken, judge_by while delivered


def live_engagement(e: EngagementState) -> LiveEngagement | None:
    """The live view of an engagement; None once it is terminal."""
    due = ENGAGEMENT.due(e)
    if e.state not in ("taken", "delivered") or due is None:
        return None
    return LiveEngagement(e.agent, e.state, due)


def answers(name: str, key: str, party: str | None, state: Any) -> list[Any]:
    """What one object's ``state`` contributes to query ``name`` of ``key``."""
    if isinstance(state, MemberState):
        if not state.current:
            return []
        if name == "memberships":
            return [state.thread] if state.agent == key else []
        if state.thread != key:
            return []
        if name == "governors":
            return [state.agent] if state.role == "governor" else []
        if name == "speakers":
            return [state.agent] if state.role in SPEAKING else []
        return []
    if isinstance(state, EntryState):
        if name != "pending" or state.thread != key:
            return []
        return [
            (state.entry, a)
            for a, r in state.responses.items()
            if r.state == "pending" and (party is None or a == party)
        ]
    if isinstance(state, AssignmentState):
        if state.thread != key or name not in ("live", "due"):
            return []
        if name == "due":  # no Live needed: the deadline of its running state
            due = ASSIGNMENT.due(state)
            return [] if due is None else [(due, state.assignment)]
        lv = live_of(state)
        if lv is None:
            return []
        if party is None or party in (lv.creator, lv.taker):
            return [(state.assignment, lv)]
    if isinstance(state, EngagementState):
        if state.task != key or name not in ("live", "due"):
            return []
        le = live_engagement(state)
        if le is None:
            return []
        if name == "due":
            return [(le.due, state.engagement)]
        if party is None or party == le.agent:
            return [(state.engagement, le)]
    return []


def answering(name: str, key: str) -> tuple[str, str]:
    """``(prefix, suffix)`` of the ids of the objects that can contribute to
    query ``name`` of ``key`` (:func:`answers` gives nothing for any other): a
    membership of that agent (``memberships``) or of that Thread
    (``governors``, ``speakers``), an entry of that Thread (``pending``), any
    assignment (``live``, ``due``: its id does not name its Thread). The
    actor's overlay filters its in-flight objects by these in one pass."""
    if name == "memberships":
        return "", "/" + key
    if name == "pending":
        return key + ".", ""
    if name in ("live", "due"):  # a Task's are its engagements, a Thread's its assignments
        return ("en_" if key.startswith("tk_") else "as_"), ""
    return key + "/", ""


def may_answer(obj: str, name: str, key: str) -> bool:
    """Whether object ``obj``, by its id, can contribute to query ``name`` of ``key``."""
    prefix, suffix = answering(name, key)
    return obj.startswith(prefix) and obj.endswith(suffix)


def order(name: str, items: list[Any]) -> list[Any]:
    """The query's order (table above)."""
    if name == "live":
        return sorted(items, key=lambda x: x[0])
    return sorted(items)


def state_query(states: Any) -> Callable[..., list[Any]]:
    """``Ctx.query`` answered by scanning a mapping of object states."""

    def query(name: str, key: str, limit: int | None = None, party: str | None = None) -> list[Any]:
        out = order(name, [a for state in states.values() for a in answers(name, key, party, state)])
        return out if limit is None else out[:limit]

    return query
