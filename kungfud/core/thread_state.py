"""§6.1, §6.2, §6.5 the Thread object: its header state and how facts change it.

The Thread keeps only its header (status, grant, admission history, counters):
members, pending responses and live assignments are objects and rows of their
own (docs/decisions.md D90, D93), so this state's size does not grow with the
Thread. Decisions are in :mod:`kungfud.core.thread`.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from .facts import (
    AdmissionIssued,
    AdmissionVoided,
    AssignmentCreated,
    AssignmentDelivered,
    AssignmentDropped,
    AssignmentExpired,
    AssignmentJudged,
    AssignmentTaken,
    AssignmentVoided,
    EntryPosted,
    Fact,
    MemberJoined,
    MembershipEnded,
    RequestRetracted,
    ResponseHandled,
    RoleSet,
    ThreadClosed,
    ThreadCreated,
)
from .members import Role

__all__ = ["Grant", "GrantRecord", "ADMISSION_HISTORY", "ThreadState", "apply"]

ADMISSION_HISTORY = 100  # grants a Thread's state remembers, newest kept (D45)


class Grant(msgspec.Struct, frozen=True):
    admission: str
    role: Role
    token_hash: bytes
    issued_at: int


class GrantRecord(msgspec.Struct, frozen=True):
    """One admission grant as members read it after the fact (DECISIONS.md B8):
    never its token or the token's hash."""

    admission: str
    role: Role
    issued_at: int
    voided_at: int | None = None


class ThreadState(msgspec.Struct, frozen=True):
    thread: str
    creator: str
    created_at: int
    status: Literal["open", "closed"]
    grant: Grant | None
    entries: int  # how many entries were posted
    content: bytes | None = None
    closed_at: int | None = None
    admissions: list[GrantRecord] = []  # B8: issued grants, oldest first, voided ones too (≤ ADMISSION_HISTORY)
    member_count: int = 0  # current members; each is a MemberState object (D90)

    @property
    def open(self) -> bool:
        return self.status == "open"


def _voided(history: list[GrantRecord], admission: str | None, at: int) -> list[GrantRecord]:
    """The history with ``admission`` (if any, and still live) marked voided at ``at``."""
    if admission is None:
        return list(history)
    return [
        msgspec.structs.replace(g, voided_at=at) if g.admission == admission and g.voided_at is None else g
        for g in history
    ]


def apply(state: ThreadState | None, fact: Fact) -> ThreadState:
    """The Thread header as a table of facts (one ``case`` per fact type). Facts
    about responses and assignments touch the header without changing it: its
    version is the guard of the queries that list them (D93)."""
    rep = msgspec.structs.replace
    if state is None:
        match fact:
            case ThreadCreated(at=at, thread=thread, creator=creator, content=content):
                return ThreadState(thread, creator, at, "open", None, 0, content=content, member_count=1)
        raise TypeError(f"thread cannot start with {type(fact).__name__}")
    match fact:
        case AdmissionIssued(at=at, admission=adm, role=role, token_hash=th, voided=old):
            history = _voided(state.admissions, old, at) + [GrantRecord(adm, role, at)]
            return rep(state, grant=Grant(adm, role, th, at), admissions=history[-ADMISSION_HISTORY:])
        case AdmissionVoided(at=at, admission=adm):
            return rep(state, grant=None, admissions=_voided(state.admissions, adm, at))
        case MemberJoined():
            return rep(state, member_count=state.member_count + 1)
        case MembershipEnded():
            return rep(state, member_count=state.member_count - 1)
        case EntryPosted(entry=n):
            return rep(state, entries=n)
        case ThreadClosed(at=at, admission=adm):
            return rep(state, status="closed", closed_at=at, grant=None, admissions=_voided(state.admissions, adm, at))
        case (
            RoleSet() | ResponseHandled() | RequestRetracted() | AssignmentCreated() | AssignmentTaken()
            | AssignmentDelivered() | AssignmentJudged() | AssignmentDropped() | AssignmentVoided() | AssignmentExpired()
        ):
            return state
    raise TypeError(f"thread cannot apply {type(fact).__name__}")
