"""Facts: the recorded results of actions, deadlines and account changes (§1.1, L1).

Every fact is a frozen msgspec Struct in one tagged union
(:data:`kungfud.core.kinds.AnyFact`), so the store encodes and decodes all of
them with one codec. The facts of Tasks and engagements (§7) are in
:mod:`kungfud.core.task_facts`. A fact never changes once recorded; a
correction is a new fact (L1-3). Participant content travels as opaque JSON bytes
in fields named ``content``/``note``/``reason`` (L6): nothing in the core looks
inside them.

Each fact names the objects whose state it changes (:meth:`Fact.objects`). Object
ids are the wire ids, plus sub-objects that never appear on the wire:
``th_….N`` is entry N of a Thread, ``th_…/ag_…`` one membership,
``ag_….threads`` an agent's membership count and
``tk_….vN`` version N of a Task's contract (``task_facts.contract_obj``).
Cross-object consequences are spelled out in the fact itself (which responses a
departure ended, which assignments it voided), so indexes and every object's
state follow from the facts alone.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any, Callable, ClassVar, Literal

import msgspec

from ..conventions import Role

__all__ = [
    "Fact", "AgentRegistered", "AgentStatusSet", "AgentKeySet", "MemoryCreated", "MemoryUpdated",
    "MemoryVisibilitySet", "MemoryWithdrawn", "ThreadCreated", "AdmissionIssued", "AdmissionVoided",
    "MemberJoined", "MembershipEnded", "RoleSet", "EntryPosted", "ResponseHandled", "RequestRetracted",
    "ThreadClosed", "AssignmentCreated", "AssignmentTaken", "AssignmentDelivered", "AssignmentJudged",
    "AssignmentDropped", "AssignmentVoided", "AssignmentExpired", "Decision", "entry_obj", "threads_obj",
    "member_obj",
]


def entry_obj(thread: str, entry: int) -> str:
    return f"{thread}.{entry}"


def threads_obj(agent: str) -> str:
    return f"{agent}.threads"


def member_obj(thread: str, agent: str) -> str:
    """One membership (D90): no wire id contains ``/``, so none names it."""
    return f"{thread}/{agent}"


def _touched(fields: tuple[str, ...]) -> Callable[[Any], tuple[str, ...]]:
    """``fact -> tuple of its fields``, built once per fact type (every action
    asks each of its facts, in its actor and again in the writer)."""
    if not fields:
        return lambda fact: ()
    get = attrgetter(*fields)
    if len(fields) == 1:
        return lambda fact: (get(fact),)
    return get  # several names: attrgetter already gives the tuple


_TOUCHED: dict[type, Callable[[Any], tuple[str, ...]]] = {}


class Fact(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind"):
    at: int  # ms since epoch: when it was recorded
    by: str | None  # the acting agent; None for deadlines and the daemon itself

    #: The fields naming the objects whose state this fact changes, in order; a
    #: fact whose objects are computed (sub-objects, lists) overrides objects().
    touches: ClassVar[tuple[str, ...]] = ()

    def objects(self) -> tuple[str, ...]:
        """The objects whose state this fact changes (their streams get the fact)."""
        get = _TOUCHED.get(type(self))
        if get is None:
            get = _TOUCHED[type(self)] = _touched(self.touches)
        return get(self)


# --- §4 Agent -------------------------------------------------------------


class AgentRegistered(Fact, frozen=True, tag="agent.registered"):
    agent: str
    content: bytes  # {"name": …} as JSON
    key_hash: bytes  # sha256 of the agent key; the key itself is never stored
    admin: bool = False

    touches = ("agent",)


class AgentStatusSet(Fact, frozen=True, tag="agent.status_set"):
    agent: str
    status: Literal["active", "deactivated"]

    touches = ("agent",)


class AgentKeySet(Fact, frozen=True, tag="agent.key_set"):
    """A new key for the agent (``agent.rotate_key`` by itself, or
    ``admin.agent.reset_key`` by an admin): from this fact on only the new key
    authenticates it."""

    agent: str
    key_hash: bytes  # sha256 of the new key; the key itself is never stored

    touches = ("agent",)


# --- §5 Memory ------------------------------------------------------------


class MemoryCreated(Fact, frozen=True, tag="memory.created"):
    memory: str
    author: str
    content: bytes  # version 1

    touches = ("memory",)


class MemoryUpdated(Fact, frozen=True, tag="memory.updated"):
    memory: str
    version: int
    content: bytes

    touches = ("memory",)


class MemoryVisibilitySet(Fact, frozen=True, tag="memory.visibility_set"):
    memory: str
    visibility: Literal["private", "public"]

    touches = ("memory",)


class MemoryWithdrawn(Fact, frozen=True, tag="memory.withdrawn"):
    memory: str

    touches = ("memory",)


# --- §6.1 / §6.2 Thread, admission, membership -----------------------------


class ThreadCreated(Fact, frozen=True, tag="thread.created"):
    thread: str
    creator: str
    content: bytes | None = None

    def objects(self) -> tuple[str, ...]:
        return (self.thread, member_obj(self.thread, self.creator), threads_obj(self.creator))


class AdmissionIssued(Fact, frozen=True, tag="thread.admission_issued"):
    thread: str
    admission: str
    role: Role
    token_hash: bytes  # the token itself is disclosed once, never stored (R12-4)
    voided: str | None = None  # the grant this one replaced (R6.1-7)

    touches = ("thread",)


class AdmissionVoided(Fact, frozen=True, tag="thread.admission_voided"):
    thread: str
    admission: str

    touches = ("thread",)


class MemberJoined(Fact, frozen=True, tag="thread.member_joined"):
    thread: str
    agent: str
    role: Role
    admission: str  # R6.2-16: which admission, and (``at``) when

    def objects(self) -> tuple[str, ...]:
        return (self.thread, member_obj(self.thread, self.agent), threads_obj(self.agent))


class MembershipEnded(Fact, frozen=True, tag="thread.membership_ended"):
    """§6.2: everything a membership's end ends, in the same fact."""

    thread: str
    agent: str
    why: Literal["left", "removed", "deactivated"]
    responses: list[int] = []  # entries whose pending response by `agent` ended
    voided: list[str] = []  # undelivered assignments it took or created
    forfeited: list[str] = []  # delivered assignments it created: judge right forfeited

    def objects(self) -> tuple[str, ...]:
        return (
            (self.thread, member_obj(self.thread, self.agent), threads_obj(self.agent))
            + tuple(entry_obj(self.thread, e) for e in self.responses)
            + tuple(self.voided)
            + tuple(self.forfeited)
        )


class RoleSet(Fact, frozen=True, tag="thread.role_set"):
    thread: str
    agent: str
    role: Role
    responses: list[int] = []  # ended by demotion to observer (R6.2-8)

    def objects(self) -> tuple[str, ...]:
        return (self.thread, member_obj(self.thread, self.agent)) + tuple(entry_obj(self.thread, e) for e in self.responses)


# --- §6.3 entries and responses ---------------------------------------------


class EntryPosted(Fact, frozen=True, tag="thread.entry_posted"):
    thread: str
    entry: int
    author: str
    pin_memory: str
    pin_version: int
    responders: list[str]  # fixed at posting (R6.3-11)
    reply_to: int | None = None
    ask: list[str] | None = None
    task: str | None = None
    assignment: str | None = None
    replied: bool = False  # the author's pending response to reply_to ended (R6.3-13)

    def objects(self) -> tuple[str, ...]:
        objs: tuple[str, ...] = (self.thread, entry_obj(self.thread, self.entry))
        if self.replied:
            assert self.reply_to is not None
            objs += (entry_obj(self.thread, self.reply_to),)
        return objs


class ResponseHandled(Fact, frozen=True, tag="thread.response_handled"):
    thread: str
    entry: int
    agent: str
    note: bytes | None = None  # {"note": …} content, readable by author and responder

    def objects(self) -> tuple[str, ...]:
        return (self.thread, entry_obj(self.thread, self.entry))


class RequestRetracted(Fact, frozen=True, tag="thread.request_retracted"):
    thread: str
    entry: int
    agents: list[str]  # whose pending responses ended

    def objects(self) -> tuple[str, ...]:
        return (self.thread, entry_obj(self.thread, self.entry))


class ThreadClosed(Fact, frozen=True, tag="thread.closed"):
    """§6.5: every effect of closing, in the same fact."""

    thread: str
    responses: list[tuple[int, str]] = []  # (entry, agent) pending responses ended
    voided: list[str] = []  # undelivered assignments
    admission: str | None = None  # the live grant, voided (R6.5-7, R12-6)

    def objects(self) -> tuple[str, ...]:
        entries = sorted({e for e, _ in self.responses})
        return (self.thread,) + tuple(entry_obj(self.thread, e) for e in entries) + tuple(self.voided)


# --- §6.4 assignments --------------------------------------------------------


class AssignmentCreated(Fact, frozen=True, tag="assignment.created"):
    assignment: str
    thread: str
    entry: int
    creator: str
    to: str
    content: bytes  # {"criteria": …, "output"?: …}, fixed at creation (R6.4-15)
    deliver_within_s: int
    judge_within_s: int
    redoes: str | None = None

    touches = ("assignment", "thread")


class AssignmentTaken(Fact, frozen=True, tag="assignment.taken"):
    assignment: str
    thread: str
    taker: str
    deliver_by: int
    response_entry: int | None = None  # the carrying entry, when the taker's response to it ended

    touches = ("assignment", "thread")

    def objects(self) -> tuple[str, ...]:
        if self.response_entry is None:
            return super().objects()
        return super().objects() + (entry_obj(self.thread, self.response_entry),)


class AssignmentDelivered(Fact, frozen=True, tag="assignment.delivered"):
    assignment: str
    thread: str
    pin_memory: str
    pin_version: int
    judge_by: int

    touches = ("assignment", "thread")


class AssignmentJudged(Fact, frozen=True, tag="assignment.judged"):
    assignment: str
    thread: str
    verdict: Literal["adopt", "reject"]
    reason: bytes | None = None  # {"reason": …} content

    touches = ("assignment", "thread")


class AssignmentDropped(Fact, frozen=True, tag="assignment.dropped"):
    assignment: str
    thread: str

    touches = ("assignment", "thread")


class AssignmentVoided(Fact, frozen=True, tag="assignment.voided"):
    assignment: str
    thread: str

    touches = ("assignment", "thread")


class AssignmentExpired(Fact, frozen=True, tag="assignment.expired"):
    """A deadline passed (L4): delivery → timed_out, judgment → undecided."""

    assignment: str
    thread: str
    outcome: Literal["timed_out", "undecided"]

    touches = ("assignment", "thread")


class Decision(msgspec.Struct, frozen=True):
    """What an accepted action records, and its receipt (L3-5).

    ``result`` is the receipt as first returned, secrets included; the store keeps
    it with secret fields nulled (DECISIONS.md B4). A ``seq`` key holding None is
    filled with the sequence number of the action's last fact. ``states`` are the
    new states of every object the facts touch, keyed by id: exactly the fold of
    the facts over the states the decision read (see :func:`kungfud.core.decision.make`).
    """

    facts: list
    result: dict
    states: dict
