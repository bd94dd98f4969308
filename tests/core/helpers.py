"""Builders for pure-core tests: a fake clock, deterministic ids, and a tiny
ledger that records accepted decisions the way the store does (facts appended to
the stream of every object they touch, states kept as snapshots)."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from kungfud.core import agent as agent_core
from kungfud.core import deactivation
from kungfud.core import memory as memory_core
from kungfud.core.agent import AgentState, Register, SetStatus
from kungfud.core.kinds import fold
from kungfud.core.context import Ctx, Limits, counting_ids
from kungfud.core.queries import state_query
from kungfud.core.facts import Decision
from kungfud.core.memory import CreateMemory, SetVisibility, Update, Withdraw
from kungfud.errors import CODES, NEXT_STEPS, Rejection
from tests.wording import check_wording

__all__ = [
    "T0",
    "GHOST_MEMORY",
    "GHOST_AGENT",
    "agent_state",
    "make_ctx",
    "accepted",
    "rejected",
    "assert_well_formed",
    "without_id",
    "World",
]

T0 = 1_764_504_000_000  # 2025-11-30T12:00:00.000Z
# Ids in the same shape as counting_ids() makes, that no test ever creates.
GHOST_MEMORY = "me_999999"
GHOST_AGENT = "ag_999999"


def agent_state(name: str, *, admin: bool = False, status: str = "active") -> AgentState:
    return AgentState(f"ag_{name}", status, admin, json.dumps({"name": name}).encode(), T0)  # type: ignore[arg-type]


def make_ctx(caller: AgentState | None, *, now: int = T0, ids=None, limits: Limits | None = None) -> Ctx:
    return Ctx(
        now=now,
        caller=caller,
        new_id=ids if ids is not None else counting_ids(),
        new_secret=lambda: "kf_secret",
        limits=limits if limits is not None else Limits(),
    )


def assert_well_formed(r: Rejection) -> None:
    """L2-4 with DECISIONS.md B7: a code, a reason and a next step from the closed sets."""
    assert isinstance(r, Rejection), r
    assert r.code in CODES, r
    assert r.next in NEXT_STEPS, r
    assert isinstance(r.reason, str) and r.reason.strip(), r
    check_wording(r.reason, r.rule, r)
    # L2-3: a rejection carries nothing that could be recorded.
    assert not isinstance(r, Decision) and not hasattr(r, "facts") and not hasattr(r, "states")


def accepted(result: Decision | Rejection) -> Decision:
    assert isinstance(result, Decision), f"expected an accepted action, got {result!r}"
    return result


def rejected(result: Decision | Rejection, code: str, next: str | None = None) -> Rejection:
    assert isinstance(result, Rejection), f"expected {code}, got an accepted action {result!r}"
    assert result.code == code, f"expected {code}, got {result}"
    assert_well_formed(result)
    if next is not None:
        assert result.next == next, result
    return result


def without_id(r: Rejection, ident: str) -> tuple[Any, ...]:
    """A rejection with one id blanked out, to compare wordings (R9-4, R12-9)."""
    return (r.code, r.reason.replace(ident, "<id>"), r.next, r.hint)


class World:
    """Agents and Memories decided one action at a time on a fake clock.

    Only accepted decisions are recorded, as the store does; a rejected action
    must leave ``facts`` and ``states`` exactly as they were (checked by callers).
    """

    def __init__(self, limits: Limits | None = None) -> None:
        self.now = T0
        self.ids = counting_ids()
        self.limits = limits if limits is not None else Limits()
        self.facts: dict[str, list] = defaultdict(list)
        self.states: dict[str, Any] = {}

    # -- plumbing --------------------------------------------------------
    def ctx(self, caller: str | None) -> Ctx:
        self.now += 1_000  # every action happens one second after the previous one
        return Ctx(
            now=self.now,
            caller=None if caller is None else self.states[caller],
            new_id=self.ids,
            new_secret=lambda: "kf_secret",
            limits=self.limits,
            get=self.states.get,  # other objects' current states, for decisions that read them
            query=state_query(self.states),
        )

    def record(self, result: Decision | Rejection) -> Decision | Rejection:
        if isinstance(result, Decision):
            for fact in result.facts:
                for obj in fact.objects():
                    self.facts[obj].append(fact)
            self.states.update(result.states)
        return result

    def fold(self, obj: str) -> Any:
        return fold(obj, self.facts[obj])

    def snapshot(self) -> tuple[dict, dict]:
        return dict(self.states), {obj: list(fs) for obj, fs in self.facts.items()}

    # -- §4 ---------------------------------------------------------------
    def register(self, name: str, *, admin: bool = False) -> str:
        content = json.dumps({"name": name}).encode()
        d = accepted(agent_core.decide_register(Register(content, admin=admin), self.ctx(None), bootstrap=admin))
        self.record(d)
        return d.result["agent"]

    def set_status(self, by: str, target: str, status: str) -> Decision | Rejection:
        ctx = self.ctx(by)
        cmd = SetStatus(target, status)  # type: ignore[arg-type]
        return self.record(deactivation.decide_set_status(self.states.get(target), cmd, ctx))

    # -- §5 ---------------------------------------------------------------
    def create(self, by: str, content: bytes = b'{"v":1}') -> Decision | Rejection:
        return self.record(memory_core.decide_create(CreateMemory(content), self.ctx(by)))

    def new_memory(self, by: str, content: bytes = b'{"v":1}', *, public: bool = False) -> str:
        mid = accepted(self.create(by, content)).result["memory"]
        if public:
            accepted(self.set_visibility(by, mid, "public"))
        return mid

    def update(self, by: str, memory: str, content: bytes = b'{"v":2}') -> Decision | Rejection:
        ctx = self.ctx(by)
        return self.record(memory_core.decide_update(self.states.get(memory), Update(memory, content), ctx))

    def set_visibility(self, by: str, memory: str, visibility: str) -> Decision | Rejection:
        ctx = self.ctx(by)
        cmd = SetVisibility(memory, visibility)  # type: ignore[arg-type]
        return self.record(memory_core.decide_set_visibility(self.states.get(memory), cmd, ctx))

    def publish(self, by: str, memory: str) -> Decision | Rejection:
        return self.set_visibility(by, memory, "public")

    def unpublish(self, by: str, memory: str) -> Decision | Rejection:
        return self.set_visibility(by, memory, "private")

    def withdraw(self, by: str, memory: str) -> Decision | Rejection:
        ctx = self.ctx(by)
        return self.record(memory_core.decide_withdraw(self.states.get(memory), Withdraw(memory), ctx))
