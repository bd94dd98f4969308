"""§6.1, §6.2 memberships: one object per (Thread, member) and a per-agent count.

A membership is the object ``th_…/ag_…`` (:class:`MemberState`); an agent's
memberships are the ``memberships`` index rows derived from those objects, beside
the O(1) object ``ag_….threads`` (:class:`AgentThreads`) that every fact starting
or ending one touches. So joining, posting or leaving reads and writes objects
whose size does not grow with a Thread's members or an agent's memberships
(docs/decisions.md D90). Collections are read through the named queries of
:class:`~kungfud.core.context.Ctx` (``governors``, ``speakers``,
``memberships``), whose meaning :mod:`kungfud.core.queries` defines.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from ..errors import Rejection
from ..conventions import Role
from .facts import Fact, MemberJoined, MembershipEnded, RoleSet, ThreadCreated, entry_obj, member_obj

if TYPE_CHECKING:
    from .context import Ctx

__all__ = [
    "Role",
    "SPEAKING",
    "MemberState",
    "AgentThreads",
    "current",
    "membership",
    "may_speak",
    "readable_thread",
    "owes",
    "owes_entry",
    "sole_governor",
    "apply_member",
    "apply_agent_threads",
]

SPEAKING: frozenset[str] = frozenset({"speaker", "governor"})


class MemberState(msgspec.Struct, frozen=True):
    """One agent's membership of one Thread: object ``th_…/ag_…`` (D90). It
    outlives the membership (objects are never deleted) with ``current`` False;
    joining again starts it afresh."""

    thread: str
    agent: str
    role: Role
    joined_at: int
    admission: str | None  # None for the creator
    current: bool = True


class AgentThreads(msgspec.Struct, frozen=True):
    """How many Threads an agent is a member of (sub-object ``ag_….threads``).
    The memberships themselves are ``memberships`` index rows derived from the
    MemberState objects; every fact that starts or ends one touches this object,
    so its version guards a decision that lists them (deactivation, L5; D90)."""

    agent: str
    count: int


def current(m: MemberState | None) -> MemberState | None:
    """The membership if it is current, else None."""
    return m if m is not None and m.current else None


def membership(ctx: "Ctx", thread: str, agent: str) -> MemberState | None:
    """``agent``'s current membership of ``thread`` (one O(1) object read)."""
    return current(ctx.get(member_obj(thread, agent)))


def may_speak(ctx: "Ctx", thread: str, agent: str) -> bool:
    m = membership(ctx, thread, agent)
    return m is not None and m.role in SPEAKING


def owes_entry(entry: Any, agent: str) -> bool:
    """Whether ``agent`` owes ``entry`` (an EntryState) a response: the entry's
    own object says, no list kept elsewhere (D93)."""
    r = entry.responses.get(agent)
    return r is not None and r.state == "pending"


def owes(ctx: "Ctx", thread: str, n: int, agent: str) -> bool:
    """Whether ``agent`` owes entry ``n`` of ``thread`` a response."""
    entry = ctx.get(entry_obj(thread, n))
    return entry is not None and owes_entry(entry, agent)


def readable_thread(state: Any, ident: str, member: MemberState | None) -> Rejection | None:
    """§9 R9-9, R9-2: only current members read a Thread (``member``: the
    reader's membership, or None); others get not_found, worded as for an id
    that never existed (R9-4, R12-9)."""
    if state is None or current(member) is None:
        return Rejection.not_found("thread", ident)
    return None


def sole_governor(ctx: "Ctx", thread: str, agent: str) -> bool:
    """Whether ``agent`` is the one governor of ``thread`` (R6.2-4): two rows of
    the governors query at most, guarded by the header's version."""
    return ctx.governors(thread, 2) == [agent]


def apply_member(state: MemberState | None, fact: Fact) -> MemberState:
    """One membership: started by creating or joining, its role changed, ended."""
    rep = msgspec.structs.replace
    match fact:
        case ThreadCreated(at=at, thread=thread, creator=creator):
            return MemberState(thread, creator, "governor", at, None)
        case MemberJoined(at=at, thread=thread, agent=agent, role=role, admission=adm):
            return MemberState(thread, agent, role, at, adm)  # afresh, also after an ended one
        case RoleSet(role=role):
            assert state is not None
            return rep(state, role=role)
        case MembershipEnded():
            assert state is not None
            return rep(state, current=False)
    raise TypeError(f"a membership cannot apply {type(fact).__name__}")


def apply_agent_threads(state: AgentThreads | None, fact: Fact) -> AgentThreads:
    """How many Threads an agent is a member of: created or joined one, ended one."""
    match fact:
        case ThreadCreated(creator=agent) | MemberJoined(agent=agent):
            return AgentThreads(agent, (state.count if state is not None else 0) + 1)
        case MembershipEnded():
            assert state is not None
            return msgspec.structs.replace(state, count=state.count - 1)
    raise TypeError(f"agent threads cannot apply {type(fact).__name__}")
