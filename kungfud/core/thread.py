"""§6.1, §6.2, §6.5 Thread: creation, admission, members and roles, closing.

A Thread is open or closed (terminal, R6.5-2, R6.5-11). Membership comes only
through a governor's admission grant (R6.1-3); at most one grant lives at a time
(R6.1-6). When a membership ends, the same fact ends the member's pending
responses, voids the undelivered assignments it took or created, and forfeits
its right to judge delivered ones it created (R6.2-10…R6.2-14). Entries live in
:mod:`kungfud.core.entry`, assignments in :mod:`kungfud.core.assignment`.

The Thread object is only its header (:mod:`kungfud.core.thread_state`). Each
membership is an object of its own (:mod:`kungfud.core.members`), and an
agent's memberships, a Thread's pending responses and its live assignments are
index rows, so an action reads and writes objects whose size does not grow with
the Thread or the agent (docs/decisions.md D90, D93). Decisions read those
collections through the named queries of :class:`~kungfud.core.context.Ctx`
(:mod:`kungfud.core.queries`), guarded by the version of the Thread (or of
``ag_….threads``) they read first (L5).
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from ..errors import DecisionRefused, Hint, Rejection, rejects
from .agent import require_active
from .timestamps import rfc3339
from .decision import make
from .members import (  # re-exported: the Thread's public face
    SPEAKING,
    AgentThreads,
    MemberState,
    Role,
    apply_agent_threads,
    apply_member,
    may_speak,
    membership,
    readable_thread,
    sole_governor,
)
from .facts import (
    AdmissionIssued,
    AdmissionVoided,
    Decision,
    Fact,
    MemberJoined,
    MembershipEnded,
    RoleSet,
    ThreadClosed,
    ThreadCreated,
    threads_obj,
)
from .obligations import ob_id
from .thread_state import ADMISSION_HISTORY, Grant, GrantRecord, ThreadState, apply

if TYPE_CHECKING:
    from .context import Ctx

__all__ = [
    "Role",
    "MemberState",
    "Grant",
    "GrantRecord",
    "ADMISSION_HISTORY",
    "ThreadState",
    "AgentThreads",
    "CreateThread",
    "Admit",
    "VoidAdmission",
    "Join",
    "Leave",
    "Remove",
    "SetRole",
    "Close",
    "apply",
    "apply_agent_threads",
    "apply_member",
    "membership",
    "token_hash",
    "may_speak",
    "readable_thread",
    "member_thread",
    "membership_end_facts",
    "close_facts",
    "decide_create",
    "decide_admit",
    "decide_void_admission",
    "decide_join",
    "decide_leave",
    "decide_remove",
    "decide_set_role",
    "decide_close",
]



# --- commands -------------------------------------------------------------------


class CreateThread(msgspec.Struct, frozen=True):
    content: bytes | None = None


class Admit(msgspec.Struct, frozen=True):
    thread: str
    role: Role = "speaker"


class VoidAdmission(msgspec.Struct, frozen=True):
    thread: str


class Join(msgspec.Struct, frozen=True):
    token: str
    thread: str | None  # resolved from the token hash by the caller of decide


class Leave(msgspec.Struct, frozen=True):
    thread: str


class Remove(msgspec.Struct, frozen=True):
    thread: str
    agent: str


class SetRole(msgspec.Struct, frozen=True):
    thread: str
    agent: str
    role: Role


class Close(msgspec.Struct, frozen=True):
    thread: str


# --- helpers ----------------------------------------------------------------------


def token_hash(token: str) -> bytes:
    return hashlib.sha256(b"admission:" + token.encode()).digest()


def member_thread(ctx: "Ctx", thread: str) -> tuple[ThreadState | None, Rejection | None]:
    """An active caller (R4-1) and a Thread it may read (R9-9), or the rejection."""
    if (r := require_active(ctx)) is not None:
        return None, r
    assert ctx.caller is not None
    state = ctx.get(thread)
    if (r := readable_thread(state, thread, membership(ctx, thread, ctx.caller.agent))) is not None:
        return None, r
    return state, None


def _governing(ctx: "Ctx", thread: str, verb: str) -> tuple[ThreadState | None, Rejection | None]:
    """An open Thread whose caller is a governor (R6.2-17…R6.2-22, B16)."""
    state, r = member_thread(ctx, thread)
    if r is not None:
        return None, r
    assert state is not None and ctx.caller is not None
    if membership(ctx, thread, ctx.caller.agent).role != "governor":  # type: ignore[union-attr]
        return None, Rejection.forbidden(f"only a governor may {verb} in thread {thread}")
    if not state.open:
        return None, Rejection.conflict(f"thread {thread} is closed; a closed thread is read-only")
    return state, None


def _ended_ids(f: MembershipEnded | RoleSet | ThreadClosed, live: dict[str, Any]) -> list[str]:
    """The ids WIRE.md's ``ended`` lists: obligations, then assignments
    (``live``: the live assignments the fact may void, as ``Live`` by id)."""
    out: list[str] = []
    if isinstance(f, ThreadClosed):
        out += [ob_id("respond", f"{f.thread}.{e}", a) for e, a in f.responses]
        for asg in f.voided:
            lv = live[asg]
            if lv.state == "taken" and lv.taker is not None:
                out.append(ob_id("deliver", asg, lv.taker))
        out += f.voided
        return out
    out += [ob_id("respond", f"{f.thread}.{e}", f.agent) for e in f.responses]
    if isinstance(f, MembershipEnded):
        for asg in f.voided:
            lv = live[asg]
            if lv.state == "taken" and lv.taker is not None:
                out.append(ob_id("deliver", asg, lv.taker))
        out += [ob_id("judge", asg, f.agent) for asg in f.forfeited]
        out += f.voided
    return out


def membership_end_facts(
    state: ThreadState, agent: str, why: Literal["left", "removed", "deactivated"], ctx: "Ctx"
) -> tuple[list[Fact], list[str]]:
    """The fact ending ``agent``'s membership with every §6.2 effect, plus, when
    the Thread is left open with no governor (possible only by deactivation,
    R4-8), the fact closing it with every §6.5 effect. Returns (facts, ended ids).
    Reads only the agent's own pending responses and live work (D93)."""
    by = ctx.caller.agent if ctx.caller is not None else None
    mine = dict(ctx.live(state.thread, agent))
    voided = sorted(
        a
        for a, lv in mine.items()
        if lv.state in ("open", "taken") and (lv.creator == agent or (lv.state == "taken" and lv.taker == agent))
    )
    forfeited = sorted(
        a for a, lv in mine.items() if lv.state == "delivered" and lv.creator == agent and not lv.forfeited
    )
    ended = MembershipEnded(
        at=ctx.now,
        by=by,
        thread=state.thread,
        agent=agent,
        why=why,
        responses=sorted(e for e, _ in ctx.pending(state.thread, agent)),
        voided=voided,
        forfeited=forfeited,
    )
    facts: list[Fact] = [ended]
    ids = _ended_ids(ended, mine)
    after = apply(state, ended)
    if after.open and not [g for g in ctx.governors(state.thread, 2) if g != agent]:
        close, close_ids = close_facts(after, ctx, ended)
        facts += close
        ids += close_ids
    return facts, ids


def close_facts(state: ThreadState, ctx: "Ctx", after: MembershipEnded | None = None) -> tuple[list[Fact], list[str]]:
    """§6.5 in one fact: pending responses end, undelivered assignments are voided,
    the admission is voided; delivered assignments keep their deadlines. ``after``:
    a membership end decided just before, in the same action (its effects are not
    in the snapshot the queries read)."""
    by = ctx.caller.agent if ctx.caller is not None else None
    gone, void = (after.agent, set(after.voided)) if after is not None else (None, set())
    live = dict(ctx.live(state.thread))
    fact = ThreadClosed(
        at=ctx.now,
        by=by,
        thread=state.thread,
        responses=sorted((e, a) for e, a in ctx.pending(state.thread) if a != gone),
        voided=sorted(a for a, lv in live.items() if lv.state in ("open", "taken") and a not in void),
        admission=state.grant.admission if state.grant else None,
    )
    return [fact], _ended_ids(fact, live)


# --- decisions --------------------------------------------------------------------


def _capacity(agent: str, ctx: "Ctx") -> Rejection | None:
    """L4-5, §12: capacity limits; exceeding one writes nothing (L4-6)."""
    mine: AgentThreads | None = ctx.get(threads_obj(agent))
    if mine is not None and mine.count >= ctx.limits.max_threads_per_agent:
        return Rejection.rate_limited(
            f"you are a member of {mine.count} threads, the most this daemon allows; leave one first"
        )
    return None


@rejects
def decide_create(cmd: CreateThread, ctx: "Ctx") -> Decision | Rejection:
    """R6.1-1, R6.1-2: any active agent; the creator becomes governor; open."""
    if (r := require_active(ctx)) is not None:
        raise DecisionRefused(r)
    assert ctx.caller is not None
    if (r := _capacity(ctx.caller.agent, ctx)) is not None:
        raise DecisionRefused(r)
    if cmd.content is not None and len(cmd.content) > ctx.limits.max_content_bytes:
        raise DecisionRefused(Rejection("too_large", f"content is over {ctx.limits.max_content_bytes} bytes encoded", "revise"))
    thread = ctx.new_id("th_")
    fact = ThreadCreated(at=ctx.now, by=ctx.caller.agent, thread=thread, creator=ctx.caller.agent, content=cmd.content)
    return make([fact], {"thread": thread, "role": "governor"}, ctx)


@rejects
def decide_admit(cmd: Admit, ctx: "Ctx") -> Decision | Rejection:
    """R6.1-4…R6.1-9: one live bearer grant; a new one voids the old; the token is
    disclosed once (L3-6) and only its hash is kept (R12-4)."""
    state, r = _governing(ctx, cmd.thread, "issue admission")
    if r is not None:
        raise DecisionRefused(r)
    assert state is not None and ctx.caller is not None
    admission = ctx.new_id("ad_")
    token = "kt_" + ctx.new_secret().removeprefix("kf_")
    fact = AdmissionIssued(
        at=ctx.now,
        by=ctx.caller.agent,
        thread=cmd.thread,
        admission=admission,
        role=cmd.role,
        token_hash=token_hash(token),
        voided=state.grant.admission if state.grant else None,
    )
    receipt = {"thread": cmd.thread, "admission": admission, "role": cmd.role, "token": token}
    if fact.voided is not None:
        receipt["voided"] = fact.voided  # the grant (and token) this one replaced
    return make([fact], receipt, ctx)


@rejects
def decide_void_admission(cmd: VoidAdmission, ctx: "Ctx") -> Decision | Rejection:
    """R6.1-8: a grant can be voided on its own."""
    state, r = _governing(ctx, cmd.thread, "void admission")
    if r is not None:
        raise DecisionRefused(r)
    assert state is not None and ctx.caller is not None
    if state.grant is None:
        raise DecisionRefused(Rejection.conflict(f"thread {cmd.thread} has no live admission grant"))
    fact = AdmissionVoided(at=ctx.now, by=ctx.caller.agent, thread=cmd.thread, admission=state.grant.admission)
    return make([fact], {"thread": cmd.thread, "admission": state.grant.admission, "status": "voided"}, ctx)


def _no_grant() -> Rejection:
    # Worded alike for a token that never existed and one voided or replaced, and
    # names no Thread: the caller may read none (WIRE.md 1.1 "Wording of rejections").
    return Rejection(
        "not_found",
        "no live admission grant matches this token; it may have been voided or replaced"
        " by a newer one - ask a governor of the Thread for a new token",
        "stop",
    )


@rejects
def decide_join(cmd: Join, ctx: "Ctx") -> Decision | Rejection:
    """R6.1-5: joining needs an active agent and the live grant. Joining again
    returns the existing membership unchanged (L2-5, DECISIONS.md B9)."""
    if (r := require_active(ctx)) is not None:
        raise DecisionRefused(r)
    assert ctx.caller is not None
    if cmd.thread is None:
        raise DecisionRefused(_no_grant())
    state: ThreadState | None = ctx.get(cmd.thread)
    if state is None or state.grant is None or state.grant.token_hash != token_hash(cmd.token) or not state.open:
        raise DecisionRefused(_no_grant())
    me = ctx.caller.agent
    if (m := membership(ctx, cmd.thread, me)) is not None:
        # L2-5: the one no-effect success; no fact, no receipt drift.
        return Decision(
            [],
            {"thread": cmd.thread, "role": m.role, "joined_at": rfc3339(m.joined_at), "admission": m.admission, "existing": True},
            {},
        )
    if state.member_count >= ctx.limits.max_members_per_thread:
        raise DecisionRefused(Rejection.rate_limited(f"thread {cmd.thread} has the most members this daemon allows"))
    if (r := _capacity(me, ctx)) is not None:
        raise DecisionRefused(r)
    fact = MemberJoined(at=ctx.now, by=me, thread=cmd.thread, agent=me, role=state.grant.role, admission=state.grant.admission)
    result = {
        "thread": cmd.thread, "role": state.grant.role, "joined_at": rfc3339(ctx.now),
        "admission": state.grant.admission,  # R6.2-16: the grant it came through
        "existing": False,
    }
    return make([fact], result, ctx)


@rejects
def decide_leave(cmd: Leave, ctx: "Ctx") -> Decision | Rejection:
    """R6.2-1: a member may leave at any time — a sole governor of an open Thread
    hands over or closes first (R6.2-4, R6.2-5); leaving a closed one is allowed
    (R6.5-10)."""
    state, r = member_thread(ctx, cmd.thread)
    if r is not None:
        raise DecisionRefused(r)
    assert state is not None and ctx.caller is not None
    me = ctx.caller.agent
    if state.open and sole_governor(ctx, cmd.thread, me):
        raise DecisionRefused(Rejection.conflict(
            f"you are the only governor of thread {cmd.thread}; make another member governor or close it first",
            Hint("thread.close", {"thread": cmd.thread}),
        ))
    facts, ended = membership_end_facts(state, me, "left", ctx)
    return make(facts, {"thread": cmd.thread, "ended": ended}, ctx)


@rejects
def decide_remove(cmd: Remove, ctx: "Ctx") -> Decision | Rejection:
    """R6.2-2: a governor removes members, with every §6.2 effect."""
    state, r = _governing(ctx, cmd.thread, "remove members")
    if r is not None:
        raise DecisionRefused(r)
    assert state is not None and ctx.caller is not None
    if cmd.agent == ctx.caller.agent:
        raise DecisionRefused(Rejection(
            "bad_request", "to end your own membership use thread.leave", "revise", Hint("thread.leave", {"thread": cmd.thread})
        ))
    if membership(ctx, cmd.thread, cmd.agent) is None:
        raise DecisionRefused(Rejection.conflict(f"agent {cmd.agent} is not a member of thread {cmd.thread}"))
    facts, ended = membership_end_facts(state, cmd.agent, "removed", ctx)
    return make(facts, {"thread": cmd.thread, "agent": cmd.agent, "ended": ended}, ctx)


@rejects
def decide_set_role(cmd: SetRole, ctx: "Ctx") -> Decision | Rejection:
    """R6.2-3: a governor changes roles; demotion to observer ends pending
    responses (R6.2-8) but not assignments in progress (R6.2-9); an open Thread
    keeps a governor (R6.2-4)."""
    state, r = _governing(ctx, cmd.thread, "change roles")
    if r is not None:
        raise DecisionRefused(r)
    assert state is not None and ctx.caller is not None
    m = membership(ctx, cmd.thread, cmd.agent)
    if m is None:
        raise DecisionRefused(Rejection.conflict(f"agent {cmd.agent} is not a member of thread {cmd.thread}"))
    if m.role == cmd.role:
        raise DecisionRefused(Rejection.conflict(f"agent {cmd.agent} is already {cmd.role} in thread {cmd.thread}"))
    if m.role == "governor" and sole_governor(ctx, cmd.thread, cmd.agent):
        raise DecisionRefused(Rejection.conflict(f"thread {cmd.thread} must keep a governor; make another member governor first"))
    responses = sorted(e for e, _ in ctx.pending(cmd.thread, cmd.agent)) if cmd.role == "observer" else []
    fact = RoleSet(at=ctx.now, by=ctx.caller.agent, thread=cmd.thread, agent=cmd.agent, role=cmd.role, responses=responses)
    return make([fact], {"thread": cmd.thread, "agent": cmd.agent, "role": cmd.role, "ended": _ended_ids(fact, {})}, ctx)


@rejects
def decide_close(cmd: Close, ctx: "Ctx") -> Decision | Rejection:
    """R6.5-1…R6.5-9: a governor closes; terminal; every effect in one fact."""
    state, r = _governing(ctx, cmd.thread, "close the thread")
    if r is not None:
        raise DecisionRefused(r)
    assert state is not None
    facts, ended = close_facts(state, ctx)
    return make(facts, {"thread": cmd.thread, "status": "closed", "ended": ended}, ctx)
