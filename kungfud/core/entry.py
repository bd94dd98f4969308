"""§6.3 Entries and responses.

Posting creates an entry: a number within the Thread, an author, and one pinned
version of one valid Memory (R6.3-2). Its responders are fixed once, by the four
rules of R6.3-6…R6.3-10, and each owes a response (R6.3-12) that only replying,
handling, retraction, leaving/demotion/removal/deactivation and closing end
(R6.3-22, DECISIONS.md T2). Entries are never edited (R6.3-5).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import msgspec

from ..errors import DecisionRefused, Rejection, echo, rejects
from .agent import require_active
from .assignment import AssignSpec, creation_facts
from .decision import make
from .facts import (
    AssignmentTaken,
    Decision,
    EntryPosted,
    Fact,

    MembershipEnded,
    RequestRetracted,
    ResponseHandled,
    RoleSet,
    ThreadClosed,
    entry_obj,
)
from .obligations import ob_id
from .pins import Pin, resolve_pin
from .task import may_read_contract
from .members import owes_entry
from .thread import ThreadState, may_speak, member_thread, membership, readable_thread

if TYPE_CHECKING:
    from .context import Ctx

__all__ = [
    "EntryResponse",
    "EntryState",
    "Post",
    "Handle",
    "Retract",
    "responders_for",
    "decide_post",
    "decide_handle",
    "decide_retract",
    "apply",
]

ResponseStateName = Literal["pending", "replied", "handled", "retracted", "ended"]


class EntryResponse(msgspec.Struct, frozen=True):
    state: ResponseStateName
    at: int | None = None  # when it ended
    note: bytes | None = None  # handle note {"note": …}: entry author and responder only (R6.3-17)


class EntryState(msgspec.Struct, frozen=True):
    thread: str
    entry: int
    author: str
    at: int
    pin_memory: str
    pin_version: int
    responders: list[str]
    responses: dict[str, EntryResponse]
    reply_to: int | None = None
    ask: list[str] | None = None
    task: str | None = None
    assignment: str | None = None


class Post(msgspec.Struct, frozen=True):
    thread: str
    pin: Pin
    reply_to: int | None = None
    ask: list[str] | None = None
    task: str | None = None
    assign: AssignSpec | None = None


class Handle(msgspec.Struct, frozen=True):
    thread: str
    entry: int
    note: bytes | None = None


class Retract(msgspec.Struct, frozen=True):
    thread: str
    entry: int


def responders_for(
    ctx: "Ctx", thread: str, author: str, reply_to_author: str | None, ask: list[str] | None
) -> list[str]:
    """R6.3-6: decided once, in order."""
    if ask is not None:  # 1. the asked members (empty: nobody)
        return list(ask)
    if reply_to_author is not None and reply_to_author != author:
        # 2. replying to another member's entry: its author, or nobody if that
        # author can no longer speak (demoted, left, removed, deactivated; B11)
        return [reply_to_author] if may_speak(ctx, thread, reply_to_author) else []
    # At most three rows of the speakers query: a broadcast costs the same in a
    # Thread of any size (the Thread's version, read by the caller, guards them).
    speakers = ctx.speakers(thread, 3)
    if len(speakers) == 2 and author in speakers:  # 3. exactly two who may speak
        return [a for a in speakers if a != author]
    return []  # 4. a broadcast


def _entry(ctx: "Ctx", state: ThreadState, n: int) -> tuple[EntryState | None, Rejection | None]:
    if not 1 <= n <= state.entries:
        return None, Rejection.not_found("entry", f"{n} in thread {state.thread}")
    return ctx.get(entry_obj(state.thread, n)), None


def _member_entry(
    ctx: "Ctx", thread: str, n: int
) -> tuple[ThreadState | None, EntryState | None, Rejection | None]:
    """An active caller, a Thread it may read (R9-9) and entry ``n`` of it."""
    state, r = member_thread(ctx, thread)
    if r is not None:
        return None, None, r
    assert state is not None
    entry, r = _entry(ctx, state, n)
    return state, entry, r


@rejects
def decide_post(cmd: Post, ctx: "Ctx") -> Decision | Rejection:
    if (r := require_active(ctx)) is not None:
        raise DecisionRefused(r)
    assert ctx.caller is not None
    me = ctx.caller.agent
    state: ThreadState | None = ctx.get(cmd.thread)
    if (r := readable_thread(state, cmd.thread, membership(ctx, cmd.thread, me))) is not None:
        raise DecisionRefused(r)
    assert state is not None
    # D5: permission before state.
    if not may_speak(ctx, cmd.thread, me):
        raise DecisionRefused(Rejection.forbidden(f"you are an observer in thread {cmd.thread}; only speakers and governors post", rule="R6.3-1"))
    if not state.open:
        raise DecisionRefused(Rejection.conflict(f"thread {cmd.thread} is closed; a closed thread is read-only"))
    facts: list[Fact] = []
    pinned = resolve_pin(cmd.pin, ctx, "entry")
    if isinstance(pinned, Rejection):
        raise DecisionRefused(pinned)
    pin_facts, memory, version = pinned
    facts += pin_facts
    reply_author = None
    replied = False
    if cmd.reply_to is not None:
        parent, r = _entry(ctx, state, cmd.reply_to)
        if r is not None:
            # The caller reads this Thread: a number it names wrongly is its to fix.
            raise DecisionRefused(Rejection(r.code, r.reason, "revise"))
        assert parent is not None
        reply_author = parent.author
        replied = owes_entry(parent, me)
    if cmd.ask is not None:
        if len(set(cmd.ask)) != len(cmd.ask):
            raise DecisionRefused(Rejection.bad_request("`ask` names an agent more than once (in `ask`)"))
        bad = [a for a in cmd.ask if a == me or not may_speak(ctx, cmd.thread, a)]
        if bad:
            # B10: no silent dropping; name the offending ids.
            raise DecisionRefused(Rejection.bad_request(
                f"`ask` may name only other members who may speak; not: {echo(', '.join(bad))} (in `ask`)"
            ))
    if cmd.task is not None:
        # R7.5-1: an entry may reference a Task the poster can read; the
        # reference grants nothing (R7.5-3, B22).
        referenced = ctx.get(cmd.task)
        if referenced is None or not may_read_contract(referenced, me):
            raise DecisionRefused(Rejection.not_found("task", cmd.task))
    n = state.entries + 1
    responders = responders_for(ctx, cmd.thread, me, reply_author, cmd.ask)
    assignment = None
    asg_facts: list[Fact] = []
    if cmd.assign is not None:
        made = creation_facts(cmd.assign, state, n, ctx)
        if isinstance(made, Rejection):
            raise DecisionRefused(made)
        assignment, asg_facts = made
    facts.append(
        EntryPosted(
            at=ctx.now,
            by=me,
            thread=cmd.thread,
            entry=n,
            author=me,
            pin_memory=memory,
            pin_version=version,
            responders=responders,
            reply_to=cmd.reply_to,
            ask=cmd.ask,
            task=cmd.task,
            assignment=assignment,
            replied=replied,
        )
    )
    facts += asg_facts
    result: dict = {
        "thread": cmd.thread,
        "entry": n,
        "responders": responders,
        "pin": {"memory": memory, "version": version},
        "ended": [ob_id("respond", entry_obj(cmd.thread, cmd.reply_to), me)] if replied else [],
    }
    if assignment is not None:
        result["assignment"] = assignment
    return make(facts, result, ctx)


@rejects
def decide_handle(cmd: Handle, ctx: "Ctx") -> Decision | Rejection:
    """R6.3-16: a responder ends its pending response without posting."""
    state, entry, r = _member_entry(ctx, cmd.thread, cmd.entry)
    if r is not None:
        raise DecisionRefused(r)
    assert state is not None and ctx.caller is not None
    me = ctx.caller.agent
    if entry is None or not owes_entry(entry, me):
        raise DecisionRefused(Rejection.conflict(f"you have no pending response to entry {cmd.entry} of thread {cmd.thread}"))
    if cmd.note is not None and len(cmd.note) > ctx.limits.max_content_bytes:
        raise DecisionRefused(Rejection("too_large", "the note is too large", "revise"))
    fact = ResponseHandled(at=ctx.now, by=me, thread=cmd.thread, entry=cmd.entry, agent=me, note=cmd.note)
    oid = ob_id("respond", entry_obj(cmd.thread, cmd.entry), me)
    return make([fact], {"thread": cmd.thread, "entry": cmd.entry, "ended": [oid]}, ctx)


@rejects
def decide_retract(cmd: Retract, ctx: "Ctx") -> Decision | Rejection:
    """R6.3-18, R6.3-19: the entry's author, while a member (B13), ends every
    pending response the entry created; responses already given stand."""
    state, entry, r = _member_entry(ctx, cmd.thread, cmd.entry)
    if r is not None:
        raise DecisionRefused(r)
    assert entry is not None and ctx.caller is not None
    me = ctx.caller.agent
    if entry.author != me:
        raise DecisionRefused(Rejection.forbidden(f"only the author of entry {cmd.entry} may retract its request", rule="R6.3-18"))
    agents = [a for a, resp in entry.responses.items() if resp.state == "pending"]
    if not agents:
        raise DecisionRefused(Rejection.conflict(f"entry {cmd.entry} of thread {cmd.thread} has no pending responses to retract"))
    fact = RequestRetracted(at=ctx.now, by=me, thread=cmd.thread, entry=cmd.entry, agents=agents)
    obj = entry_obj(cmd.thread, cmd.entry)
    return make([fact], {"thread": cmd.thread, "entry": cmd.entry, "ended": [ob_id("respond", obj, a) for a in agents]}, ctx)


def _end(state: EntryState, agents: list[str] | set[str], how: ResponseStateName, at: int, note: bytes | None = None) -> EntryState:
    responses = dict(state.responses)
    for a in agents:
        if responses.get(a) is not None and responses[a].state == "pending":
            responses[a] = EntryResponse(how, at, note)
    return msgspec.structs.replace(state, responses=responses)


def apply(state: EntryState | None, fact: Fact) -> EntryState:
    if isinstance(fact, EntryPosted):
        if state is None:
            return EntryState(
                thread=fact.thread,
                entry=fact.entry,
                author=fact.author,
                at=fact.at,
                pin_memory=fact.pin_memory,
                pin_version=fact.pin_version,
                responders=list(fact.responders),
                responses={a: EntryResponse("pending") for a in fact.responders},
                reply_to=fact.reply_to,
                ask=fact.ask,
                task=fact.task,
                assignment=fact.assignment,
            )
        return _end(state, [fact.author], "replied", fact.at)  # R6.3-13
    assert state is not None
    if isinstance(fact, ResponseHandled):
        return _end(state, [fact.agent], "handled", fact.at, fact.note)
    if isinstance(fact, RequestRetracted):
        return _end(state, fact.agents, "retracted", fact.at)
    if isinstance(fact, (MembershipEnded, RoleSet)):
        return _end(state, [fact.agent], "ended", fact.at)
    if isinstance(fact, ThreadClosed):
        return _end(state, {a for e, a in fact.responses if e == state.entry}, "ended", fact.at)
    if isinstance(fact, AssignmentTaken):
        return _end(state, [fact.taker], "ended", fact.at)  # R6.4-20
    raise TypeError(f"entry cannot apply {type(fact).__name__}")


