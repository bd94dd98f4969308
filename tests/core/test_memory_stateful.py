"""A stateful property test of the Agent (§4) and Memory (§5) core against a model.

Three agents (one admin) act at random on random known Memory ids (plus one id
that never existed): create, update, publish, unpublish, withdraw, set_status.
A plain dict model says what must happen. After each step: the decision agrees
with the model (accepted, or rejected with the right code), a rejection changes
nothing, applied state equals a fresh fold of all facts recorded so far (L1-1),
versions grow by one per update, withdrawal is terminal, and the §9 predicates
match the model.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from kungfud.core.kinds import fold
from kungfud.core.context import Limits
from kungfud.core.facts import MemoryCreated, MemoryUpdated, MemoryWithdrawn
from kungfud.core.visibility import may_list_memory, may_read_memory

from .helpers import GHOST_AGENT, GHOST_MEMORY, World, accepted, rejected, without_id

LIMIT = 8  # small, so random content crosses it both ways (exactly LIMIT is legal)


@dataclass
class MemoryModel:
    author: str
    public: bool = False
    withdrawn: bool = False
    contents: dict[int, bytes] = field(default_factory=dict)  # version -> content

    @property
    def latest(self) -> int:
        return len(self.contents)


@dataclass
class AgentModel:
    admin: bool
    active: bool = True


class MemoryAndAgentCore(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.w = World(Limits())
        self.agent_ids = [self.w.register("root", admin=True), self.w.register("alice"), self.w.register("bob")]
        self.w.limits = Limits(max_content_bytes=LIMIT)  # agents registered; now the small content limit
        self.agents = {a: AgentModel(admin=(i == 0)) for i, a in enumerate(self.agent_ids)}
        self.memories: dict[str, MemoryModel] = {}
        self.withdrawn_at: dict[str, int] = {}  # memory -> number of its facts when withdrawn
        self.seen_latest: dict[str, int] = {}

    # -- choosing ids ------------------------------------------------------
    def memory_id(self, caller: str, ix: int, own: bool) -> str:
        """One of the caller's Memories when ``own`` (and it has one), else any
        known Memory or the id that never existed."""
        mine = sorted(m for m, model in self.memories.items() if model.author == caller)
        ids = mine if own and mine else sorted(self.memories) + [GHOST_MEMORY]
        return ids[ix % len(ids)]

    def agent_id(self, ix: int) -> str:
        return (self.agent_ids + [GHOST_AGENT])[ix]

    # -- what the model expects --------------------------------------------
    def expect_on_memory(self, caller: str, mid: str) -> str | None:
        """D5 order: account state, readability, authorship, withdrawal."""
        if not self.agents[caller].active:
            return "forbidden"
        m = self.memories.get(mid)
        if m is None or (m.author != caller and (m.withdrawn or not m.public)):
            return "not_found"
        if m.author != caller:
            return "forbidden"
        if m.withdrawn:
            return "conflict"
        return None

    # -- running one step --------------------------------------------------
    def step(self, caller: str, expected: str | None, run, mid: str | None = None):
        before_states, before_facts = self.w.snapshot()
        result = run(mid) if mid is not None else run()
        if expected is not None:
            r = rejected(result, expected)
            # L2-3: a rejection leaves every fact and every state as it was.
            assert self.w.snapshot() == (before_states, before_facts)
            if expected == "not_found" and mid is not None and mid != GHOST_MEMORY:
                # R9-4, R12-9: worded exactly as for an id that never existed.
                ghost = rejected(run(GHOST_MEMORY), "not_found")
                assert without_id(r, mid) == without_id(ghost, GHOST_MEMORY)
            return None
        d = accepted(result)
        touched = {o for f in d.facts for o in f.objects()}
        assert set(d.states) == touched
        assert all(f.by == caller and f.at == self.w.now for f in d.facts)
        # Only the objects the facts touch changed; each gained exactly its new facts.
        for obj, facts in self.w.facts.items():
            old = before_facts.get(obj, [])
            assert facts[: len(old)] == old  # L1-2: nothing recorded is rewritten
            if obj not in touched:
                assert facts == old and self.w.states[obj] == before_states[obj]
        return d

    # -- rules ---------------------------------------------------------------
    @rule(who=st.integers(0, 2), content=st.binary(max_size=LIMIT + 2))
    def create(self, who, content):
        caller = self.agent_ids[who]
        expected = "forbidden" if not self.agents[caller].active else ("too_large" if len(content) > LIMIT else None)
        d = self.step(caller, expected, lambda: self.w.create(caller, content))
        if d is not None:
            mid = d.result["memory"]
            assert mid not in self.memories
            assert d.result == {"memory": mid, "version": 1, "visibility": "private"}
            assert d.facts == [MemoryCreated(at=self.w.now, by=caller, memory=mid, author=caller, content=content)]
            self.memories[mid] = MemoryModel(author=caller, contents={1: content})

    @rule(who=st.integers(0, 2), ix=st.integers(0, 64), own=st.booleans(), content=st.binary(max_size=LIMIT + 2))
    def update(self, who, ix, own, content):
        caller = self.agent_ids[who]
        mid = self.memory_id(caller, ix, own)
        expected = self.expect_on_memory(caller, mid)
        if expected is None and len(content) > LIMIT:
            expected = "too_large"
        d = self.step(caller, expected, lambda m: self.w.update(caller, m, content), mid)
        if d is not None:
            m = self.memories[mid]
            # Versions grow by exactly one per update.
            assert d.result == {"memory": mid, "version": m.latest + 1}
            assert d.states[mid].latest == m.latest + 1
            m.contents[m.latest + 1] = content

    @rule(who=st.integers(0, 2), ix=st.integers(0, 64), own=st.booleans(), public=st.booleans())
    def set_visibility(self, who, ix, own, public):
        caller = self.agent_ids[who]
        mid = self.memory_id(caller, ix, own)
        expected = self.expect_on_memory(caller, mid)
        if expected is None and self.memories[mid].public == public:
            expected = "conflict"  # L2-7: a no-op is not a success
        visibility = "public" if public else "private"
        d = self.step(caller, expected, lambda m: self.w.set_visibility(caller, m, visibility), mid)
        if d is not None:
            assert d.result == {"memory": mid, "visibility": visibility}
            self.memories[mid].public = public

    @rule(who=st.integers(0, 2), ix=st.integers(0, 64), own=st.booleans())
    def withdraw(self, who, ix, own):
        caller = self.agent_ids[who]
        mid = self.memory_id(caller, ix, own)
        d = self.step(caller, self.expect_on_memory(caller, mid), lambda m: self.w.withdraw(caller, m), mid)
        if d is not None:
            assert d.result == {"memory": mid, "status": "withdrawn"}
            self.memories[mid].withdrawn = True
            self.withdrawn_at[mid] = len(self.w.facts[mid])

    @rule(who=st.integers(0, 2), whom=st.integers(0, 3), active=st.booleans())
    def set_status(self, who, whom, active):
        caller, target_id = self.agent_ids[who], self.agent_id(whom)
        status = "active" if active else "deactivated"
        me, it = self.agents[caller], self.agents.get(target_id)
        if not me.active or not me.admin:
            expected = "forbidden"  # R4-1, R4-3
        elif it is None:
            expected = "not_found"
        elif it.active == active:
            expected = "conflict"  # L2-7
        elif target_id == caller:
            expected = "forbidden"  # D1
        else:
            expected = None
        d = self.step(caller, expected, lambda: self.w.set_status(caller, target_id, status))
        if d is not None:
            assert d.result == {"agent": target_id, "status": status, "seq": None, "ended": []}
            assert target_id in d.states
            assert not [o for o in d.states if o.startswith("me_")]  # R4-4, R4-5: no Memory is touched
            it.active = active

    # -- invariants ------------------------------------------------------------
    @invariant()
    def state_is_the_fold_of_all_facts(self):
        assert set(self.w.facts) == set(self.w.states)
        for obj, facts in self.w.facts.items():
            assert fold(obj, facts) == self.w.states[obj]

    @invariant()
    def state_agrees_with_the_model(self):
        for a, m in self.agents.items():
            s = self.w.states[a]
            assert (s.status, s.admin) == ("active" if m.active else "deactivated", m.admin)
        assert {o for o in self.w.states if o.startswith("me_")} == set(self.memories)
        for mid, m in self.memories.items():
            s = self.w.states[mid]
            status, visibility = ("withdrawn" if m.withdrawn else "valid"), ("public" if m.public else "private")
            assert (s.author, s.latest, s.status, s.visibility) == (m.author, m.latest, status, visibility)
            # R5-7: version n is the content recorded for it, once, forever.
            recorded = {1: self.w.facts[mid][0].content}
            updates = [f for f in self.w.facts[mid] if isinstance(f, MemoryUpdated)]
            assert [f.version for f in updates] == list(range(2, m.latest + 1))
            recorded.update({f.version: f.content for f in updates})
            assert recorded == m.contents

    @invariant()
    def versions_grow_by_at_most_one_per_step(self):
        for mid, m in self.memories.items():
            old = self.seen_latest.get(mid, 1)
            assert m.latest in (old, old + 1) and self.w.states[mid].latest == m.latest
            self.seen_latest[mid] = m.latest

    @invariant()
    def withdrawal_is_terminal(self):
        for mid, n in self.withdrawn_at.items():
            assert self.w.states[mid].status == "withdrawn"
            facts = self.w.facts[mid]
            assert len(facts) == n and isinstance(facts[-1], MemoryWithdrawn)

    @invariant()
    def visibility_matches_the_model(self):
        for mid, m in self.memories.items():
            state = self.w.states[mid]
            for reader in self.agent_ids:
                own = reader == m.author
                for v in [None, *range(0, m.latest + 2)]:
                    in_range = v is None or 1 <= v <= m.latest
                    current = v is None or v == m.latest
                    expected = in_range if own else (not m.withdrawn and m.public and current)
                    assert may_read_memory(state, reader, v) is expected, (mid, reader, v)
                assert may_list_memory(state, reader) is (not m.withdrawn and (own or m.public))


@pytest.mark.rules(
    "L1-1", "L1-2", "L2-3", "L2-4", "L2-7", "R4-1", "R4-3", "R4-4", "R5-1", "R5-2", "R5-3", "R5-4",
    "R5-5", "R5-6", "R5-7", "R5-9", "R5-10", "R5-11", "R9-4", "R9-7", "R9-8", "R12-9", "L4-6",
)  # fmt: skip
@pytest.mark.long_test(160)  # seconds on the shared 2-core machine (D405): handed out first under -n
def test_L1_1_R5_6_memory_and_agent_core_agree_with_a_model():
    run_state_machine_as_test(
        MemoryAndAgentCore,
        settings=settings(max_examples=2000, stateful_step_count=50, derandomize=True, deadline=None),
    )
