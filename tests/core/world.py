"""An in-memory world for Thread, entry and assignment tests of the pure core.

``World`` holds every object's state by id (agents, their ``….threads``
sub-objects, Memories, Threads, entries ``th_….N``, assignments) and every fact
recorded so far, in order and per object. Each helper builds a ``Ctx`` on a fake
clock (``w.now``, moved only by :meth:`World.advance`), runs one core decision,
and records it only when accepted — as the store does — so tests chain actions.

``w.refuse(code, lambda: w.post(…))`` checks a rejection is well formed (L2-4,
DECISIONS.md B7) and left every state and fact exactly as it was (L2-3).
"""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from typing import Any, Callable

import msgspec

from kungfud.core import agent as agent_core
from kungfud.core import deactivation
from kungfud.core import assignment as asg_core
from kungfud.core import entry as entry_core
from kungfud.core import memory as memory_core
from kungfud.core import thread as thread_core
from kungfud.core import work
from kungfud.core.agent import Register, SetStatus
from kungfud.core.assignment import AssignmentState, AssignSpec
from kungfud.core.kinds import fold, of_state
from kungfud.core.context import Ctx, Limits, counting_ids
from kungfud.core.entry import EntryState
from kungfud.core.facts import Decision, entry_obj, member_obj, threads_obj
from kungfud.core.members import MemberState, current
from kungfud.core.queries import state_query
from kungfud.core.obligations import Obligation
from kungfud.core.pins import Pin
from kungfud.core.thread import ThreadState
from kungfud.errors import CODES, NEXT_STEPS, Rejection
from tests.wording import check_wording

__all__ = ["T0", "HOUR", "World", "ok", "well_formed", "text", "spec"]

T0 = 1_764_504_000_000  # 2025-11-30T12:00:00.000Z
HOUR = 3600  # seconds: the test worlds' default delivery and judgment windows


def text(s: str = "hello") -> Pin:
    """A pin that creates a private Memory of the poster from inline content."""
    return Pin(content=json.dumps({"text": s}).encode())


def spec(to: str, *, deliver_within_s: int | None = None, judge_within_s: int | None = None, redoes: str | None = None) -> AssignSpec:
    return AssignSpec(to, b'{"criteria":"do it"}', deliver_within_s, judge_within_s, redoes)


def well_formed(r: Any) -> Rejection:
    """L2-4, DECISIONS.md B7: a code, a reason and a next step from the closed sets."""
    assert isinstance(r, Rejection), f"expected a rejection, got {r!r}"
    assert r.code in CODES and r.next in NEXT_STEPS, r
    assert r.reason.strip(), r
    check_wording(r.reason, r.rule, r)
    return r


def ok(result: Decision | Rejection) -> Decision:
    assert isinstance(result, Decision), f"expected an accepted action, got {result}"
    return result


class World:
    def __init__(self, limits: Limits | None = None) -> None:
        self.now = T0
        self.limits = limits or Limits(deliver_within_s=HOUR, judge_within_s=HOUR)
        self.ids = counting_ids()
        self._secrets = itertools.count(1)
        self.states: dict[str, Any] = {}
        self.log: list[Any] = []  # every fact, in order
        self.streams: dict[str, list[Any]] = defaultdict(list)  # object -> its facts, in order
        self.tokens: dict[str, str] = {}  # thread -> token of the last grant issued

    # -- plumbing ------------------------------------------------------------
    def new_secret(self) -> str:
        return f"kf_s{next(self._secrets)}"  # distinct, so reissued grants differ (B8)

    def ctx(self, caller: str | None) -> Ctx:
        return Ctx(
            now=self.now,
            caller=None if caller is None else self.states[caller],
            new_id=self.ids,
            new_secret=self.new_secret,
            limits=self.limits,
            get=self.states.get,
            query=state_query(self.states),
        )

    def record(self, result: Decision | Rejection) -> Decision | Rejection:
        if isinstance(result, Decision):
            for fact in result.facts:
                self.log.append(fact)
                for obj in fact.objects():
                    self.streams[obj].append(fact)
            self.states.update(result.states)
        return result

    def act(self, caller: str | None, decide: Callable[[Any, Ctx], Any], cmd: Any) -> Decision | Rejection:
        return self.record(decide(cmd, self.ctx(caller)))

    def advance(self, seconds: float) -> int:
        self.now += int(seconds * 1000)
        return self.now

    def snapshot(self) -> tuple[Any, ...]:
        return (
            msgspec.json.encode(sorted(self.states.items())),
            len(self.log),
            {k: len(v) for k, v in self.streams.items()},
        )

    def refuse(self, code: str, action: Callable[[], Any], next: str | None = None) -> Rejection:
        before = self.snapshot()
        r = well_formed(action())
        assert r.code == code, f"expected {code}, got {r}"
        if next is not None:
            assert r.next == next, r
        assert self.snapshot() == before, "a rejected action changed the world (L2-3)"
        return r

    def fold(self, obj: str) -> Any:
        return fold(obj, self.streams[obj])

    # -- reading -------------------------------------------------------------
    def thread(self, t: str) -> ThreadState:
        return self.states[t]

    def entry(self, t: str, n: int) -> EntryState:
        return self.states[entry_obj(t, n)]

    def asg(self, a: str) -> AssignmentState:
        return self.states[a]

    def memberships(self, agent: str) -> dict[str, str]:
        """Thread -> role of ``agent``'s current memberships (D90: the membership
        objects; the count object agrees)."""
        out = {t: self.member(t, agent).role for t in state_query(self.states)("memberships", agent)}  # type: ignore[union-attr]
        s = self.states.get(threads_obj(agent))
        assert len(out) == (0 if s is None else s.count), (out, s)
        return out

    def member(self, t: str, agent: str) -> MemberState | None:
        """``agent``'s current membership of ``t`` (None: not a member)."""
        return current(self.states.get(member_obj(t, agent)))

    def members(self, t: str, states: dict[str, Any] | None = None) -> dict[str, MemberState]:
        """The current members of ``t`` (in ``states``, default now) in the
        order they joined (ties: by id); the Thread's count agrees."""
        states = self.states if states is None else states
        ms = [m for m in states.values() if isinstance(m, MemberState) and m.thread == t and m.current]
        out = {m.agent: m for m in sorted(ms, key=lambda m: (m.joined_at, m.agent))}
        assert len(out) == states[t].member_count, (out, states[t])
        return out

    def governors(self, t: str, states: dict[str, Any] | None = None) -> list[str]:
        return [a for a, m in self.members(t, states).items() if m.role == "governor"]

    def response(self, t: str, n: int, agent: str) -> str:
        return self.entry(t, n).responses[agent].state

    def pending(self, t: str, agent: str) -> list[int]:
        return [e for e, _ in state_query(self.states)("pending", t, None, agent)]

    def thread_pending(self, t: str, states: dict[str, Any] | None = None) -> dict[str, list[int]]:
        """Responder -> entries of ``t`` it owes a response to (the ``pending``
        query over ``states``, default now; D93)."""
        out: dict[str, list[int]] = {}
        for e, a in state_query(self.states if states is None else states)("pending", t):
            out.setdefault(a, []).append(e)
        return out

    def live(self, t: str, states: dict[str, Any] | None = None) -> dict[str, Any]:
        """Assignment -> Live of ``t``'s non-terminal assignments (the ``live`` query)."""
        return dict(state_query(self.states if states is None else states)("live", t))

    def next_due(self, t: str) -> int | None:
        rows = state_query(self.states)("due", t, 1)
        return rows[0][0] if rows else None

    def due(self, t: str, now: int | None = None) -> list[str]:
        """The assignments of ``t`` whose deadline is due (``due_expiries``)."""
        return asg_core.due_expiries(self.ctx(None), t, self.now if now is None else now)

    def obligations(self) -> dict[str, Obligation]:
        """Every open obligation the states imply (§8), by id."""
        out: dict[str, Obligation] = {}
        for obj, state in self.states.items():
            for ob in of_state(obj, state):
                assert ob.obligation_id not in out, ob
                out[ob.obligation_id] = ob
        return out

    def obligations_of(self, agent: str) -> set[tuple[str, str]]:
        """(kind, object) of every open obligation ``agent`` holds."""
        return {
            (ob.obligation, ob.ref.get("assignment") or entry_obj(ob.ref["thread"], ob.ref["entry"]))
            for ob in self.obligations().values()
            if ob.holder == agent
        }

    # -- §4 --------------------------------------------------------------------
    def register(self, name: str, *, admin: bool = False) -> str:
        content = json.dumps({"name": name}).encode()
        d = ok(self.record(agent_core.decide_register(Register(content, admin=admin), self.ctx(None), bootstrap=admin)))
        return d.result["agent"]

    def set_status(self, by: str, target: str, status: str) -> Decision | Rejection:
        cmd = SetStatus(target, status)  # type: ignore[arg-type]
        return self.record(deactivation.decide_set_status(self.states.get(target), cmd, self.ctx(by)))

    def deactivate(self, by: str, target: str) -> Decision | Rejection:
        return self.set_status(by, target, "deactivated")

    # -- §5 --------------------------------------------------------------------
    def memory(self, by: str, *, public: bool = False, versions: int = 1) -> str:
        mid = ok(self.record(memory_core.decide_create(memory_core.CreateMemory(b'{"v":1}'), self.ctx(by)))).result["memory"]
        for v in range(2, versions + 1):
            cmd = memory_core.Update(mid, json.dumps({"v": v}).encode())
            ok(self.record(memory_core.decide_update(self.states[mid], cmd, self.ctx(by))))
        if public:
            self.set_visibility(by, mid, "public")
        return mid

    def set_visibility(self, by: str, mid: str, visibility: str) -> Decision:
        cmd = memory_core.SetVisibility(mid, visibility)  # type: ignore[arg-type]
        return ok(self.record(memory_core.decide_set_visibility(self.states[mid], cmd, self.ctx(by))))

    def withdraw(self, by: str, mid: str) -> Decision:
        cmd = memory_core.Withdraw(mid)
        return ok(self.record(memory_core.decide_withdraw(self.states[mid], cmd, self.ctx(by))))

    # -- §6.1, §6.2, §6.5 ---------------------------------------------------
    def create_thread(self, by: str) -> str:
        return ok(self.act(by, thread_core.decide_create, thread_core.CreateThread())).result["thread"]

    def admit(self, by: str, t: str, role: str = "speaker") -> Decision | Rejection:
        d = self.act(by, thread_core.decide_admit, thread_core.Admit(t, role))  # type: ignore[arg-type]
        if isinstance(d, Decision):
            self.tokens[t] = d.result["token"]
        return d

    def void_admission(self, by: str, t: str) -> Decision | Rejection:
        return self.act(by, thread_core.decide_void_admission, thread_core.VoidAdmission(t))

    def join(self, by: str, t: str | None, token: str | None = None) -> Decision | Rejection:
        tok = token if token is not None else self.tokens.get(t or "", "kt_none")
        return self.act(by, thread_core.decide_join, thread_core.Join(tok, t))

    def add(self, t: str, gov: str, agent: str, role: str = "speaker") -> None:
        """A governor admits ``agent`` with ``role`` and it joins."""
        ok(self.admit(gov, t, role))
        ok(self.join(agent, t))

    def leave(self, by: str, t: str) -> Decision | Rejection:
        return self.act(by, thread_core.decide_leave, thread_core.Leave(t))

    def remove(self, by: str, t: str, agent: str) -> Decision | Rejection:
        return self.act(by, thread_core.decide_remove, thread_core.Remove(t, agent))

    def set_role(self, by: str, t: str, agent: str, role: str) -> Decision | Rejection:
        return self.act(by, thread_core.decide_set_role, thread_core.SetRole(t, agent, role))  # type: ignore[arg-type]

    def close(self, by: str, t: str) -> Decision | Rejection:
        return self.act(by, thread_core.decide_close, thread_core.Close(t))

    # -- §6.3 --------------------------------------------------------------------
    def post(
        self,
        by: str,
        t: str,
        pin: Pin | None = None,
        *,
        reply_to: int | None = None,
        ask: list[str] | None = None,
        assign: AssignSpec | None = None,
    ) -> Decision | Rejection:
        cmd = entry_core.Post(t, pin or text(), reply_to, ask, None, assign)
        return self.act(by, entry_core.decide_post, cmd)

    def handle(self, by: str, t: str, n: int, note: bytes | None = None) -> Decision | Rejection:
        return self.act(by, entry_core.decide_handle, entry_core.Handle(t, n, note))

    def retract(self, by: str, t: str, n: int) -> Decision | Rejection:
        return self.act(by, entry_core.decide_retract, entry_core.Retract(t, n))

    # -- §6.4 --------------------------------------------------------------------
    def assign(self, by: str, t: str, to: str, **kw: Any) -> tuple[int, str]:
        """Post an entry carrying a new assignment; returns (entry, assignment)."""
        ask = kw.pop("ask", None)
        d = ok(self.post(by, t, ask=ask, assign=spec(to, **kw)))
        return d.result["entry"], d.result["assignment"]

    def take(self, by: str, a: str, deliver: Pin | None = None) -> Decision | Rejection:
        return self.act(by, asg_core.decide_take, work.Take(a, deliver))

    def deliver(self, by: str, a: str, pin: Pin | None = None) -> Decision | Rejection:
        return self.act(by, asg_core.decide_deliver, work.Deliver(a, pin or text("output")))

    def judge(self, by: str, a: str, verdict: str = "adopt", reason: bytes | None = None) -> Decision | Rejection:
        return self.act(by, asg_core.decide_judge, work.Judge(a, verdict, reason))  # type: ignore[arg-type]

    def drop(self, by: str, a: str) -> Decision | Rejection:
        return self.act(by, asg_core.decide_drop, work.Drop(a))

    def void(self, by: str, a: str) -> Decision | Rejection:
        return self.act(by, asg_core.decide_void, work.Void(a))

    def expire(self, t: str) -> Decision | Rejection:
        return self.act(None, asg_core.decide_expire, work.Expire(t))
