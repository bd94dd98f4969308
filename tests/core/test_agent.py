"""§4 Agent: account state, as far as the pure core decides it.

R4-6…R4-8 (memberships, Task judgments, governor-less threads) need Threads and
Tasks and are tested with them. R4-3 (the implementation sets account state) is
not black-box testable; what the core shows of it is who may set it.
"""

from __future__ import annotations

import hashlib

import msgspec
import pytest

from kungfud.core import agent as agent_core
from kungfud.core.agent import CreateAgent, Register, ResetKey, RotateKey, SetStatus, decide_register
from kungfud.core.deactivation import decide_set_status
from kungfud.core.kinds import fold
from kungfud.core.context import Limits
from kungfud.core.facts import AgentKeySet, AgentRegistered, AgentStatusSet, Decision
from kungfud.core.memory import (
    CreateMemory,
    SetVisibility,
    Update,
    Withdraw,
    decide_create,
    decide_set_visibility,
    decide_update,
    decide_withdraw,
)
from kungfud.core.visibility import may_list_memory, may_read_memory

from .helpers import GHOST_AGENT, T0, World, accepted, agent_state, make_ctx, rejected


def make_world() -> World:
    """An admin, two agents (alice, bob); alice has a private and a public Memory."""
    w = World()
    w.admin = w.register("admin", admin=True)
    w.alice = w.register("alice")
    w.bob = w.register("bob")
    w.private = w.new_memory(w.alice, b'{"v":"private"}')
    w.public = w.new_memory(w.alice, b'{"v":"public"}', public=True)
    return w


@pytest.fixture
def w() -> World:
    return make_world()


# --- R4-1 only an active agent may act ---------------------------------------

ACTIONS = {
    "create": lambda w, by: w.create(by),
    "update": lambda w, by: w.update(by, w.private),
    "publish": lambda w, by: w.publish(by, w.private),
    "unpublish": lambda w, by: w.unpublish(by, w.public),
    "withdraw": lambda w, by: w.withdraw(by, w.private),
}


@pytest.mark.rules("R4-1", "R5-1", "L2-3", "L2-4")
@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_R4_1_deactivated_agent_may_not_act_on_memories(action):
    active = make_world()
    accepted(ACTIONS[action](active, active.alice))  # legal while alice is active …
    w = make_world()
    accepted(w.set_status(w.admin, w.alice, "deactivated"))
    before = w.snapshot()
    r = rejected(ACTIONS[action](w, w.alice), "forbidden", "stop")  # … and refused once she is not
    assert "deactivated" in r.reason and w.alice in r.reason
    assert w.snapshot() == before


@pytest.mark.rules("R4-1", "L2-4")
def test_R4_1_deactivated_admin_may_not_set_status():
    w = World()
    root, other, alice = w.register("root", admin=True), w.register("other", admin=True), w.register("alice")
    accepted(w.set_status(other, root, "deactivated"))
    before = w.snapshot()
    rejected(w.set_status(root, alice, "deactivated"), "forbidden", "stop")
    rejected(w.set_status(root, other, "deactivated"), "forbidden", "stop")
    assert w.snapshot() == before


@pytest.mark.rules("R4-1", "L2-4")
def test_R4_1_action_without_an_agent_is_unauthenticated():
    (memory_state,) = accepted(decide_create(CreateMemory(b"{}"), make_ctx(agent_state("alice")))).states.values()
    for r in (
        decide_create(CreateMemory(b"{}"), make_ctx(None)),
        decide_set_status(agent_state("alice"), SetStatus("ag_alice", "deactivated"), make_ctx(None)),
    ):
        rejected(r, "unauthenticated")
    rejected(decide_update(memory_state, Update(memory_state.memory, b"{}"), make_ctx(None)), "unauthenticated")
    cmd = SetVisibility(memory_state.memory, "public")
    rejected(decide_set_visibility(memory_state, cmd, make_ctx(None)), "unauthenticated")
    rejected(decide_withdraw(memory_state, Withdraw(memory_state.memory), make_ctx(None)), "unauthenticated")


@pytest.mark.rules("R4-1", "R4-3")
def test_R4_1_reactivated_agent_may_act_again_and_nothing_is_restored(w):
    """DECISIONS.md B2: reactivation is an account-state fact that restores nothing."""
    accepted(w.set_status(w.admin, w.alice, "deactivated"))
    rejected(w.create(w.alice), "forbidden")
    d = accepted(w.set_status(w.admin, w.alice, "active"))
    assert d.facts == [AgentStatusSet(at=w.now, by=w.admin, agent=w.alice, status="active")]
    assert w.states[w.alice].status == "active"
    accepted(w.create(w.alice))
    # Three account facts, none removed or rewritten: registration, deactivation, reactivation.
    assert [type(f) for f in w.facts[w.alice]] == [AgentRegistered, AgentStatusSet, AgentStatusSet]


# --- R4-2 reads do not require activity --------------------------------------


@pytest.mark.rules("R4-2", "R9-8")
def test_R4_2_deactivated_author_still_reads_its_own_memories(w):
    accepted(w.update(w.alice, w.private))
    accepted(w.set_status(w.admin, w.alice, "deactivated"))
    assert w.states[w.alice].status == "deactivated"
    for mid in (w.private, w.public):
        state = w.states[mid]
        assert may_read_memory(state, w.alice, None)
        assert all(may_read_memory(state, w.alice, v) for v in range(1, state.latest + 1))
        assert may_list_memory(state, w.alice)


@pytest.mark.rules("R4-2", "R9-7")
def test_R4_2_public_memory_of_a_deactivated_author_stays_readable_by_others(w):
    accepted(w.set_status(w.admin, w.alice, "deactivated"))
    # Deactivation changes no Memory state (R4-4), so §9 answers as before.
    assert may_read_memory(w.states[w.public], w.bob, None)
    assert not may_read_memory(w.states[w.private], w.bob, None)


# --- R4-3 account state is set by the implementation ------------------------


@pytest.mark.rules("R4-3", "L2-4")
def test_R4_3_only_an_admin_agent_sets_account_status(w):
    before = w.snapshot()
    r = rejected(w.set_status(w.alice, w.bob, "deactivated"), "forbidden", "stop")
    assert "admin" in r.reason
    # A non-admin learns nothing about which agents exist (docs/decisions.md D3).
    assert rejected(w.set_status(w.alice, GHOST_AGENT, "deactivated"), "forbidden") == r
    assert w.snapshot() == before
    d = accepted(w.set_status(w.admin, w.bob, "deactivated"))
    assert d.result == {"agent": w.bob, "status": "deactivated", "seq": None, "ended": []}
    assert w.states[w.bob].status == "deactivated"


@pytest.mark.rules("R4-3")
def test_R4_3_D1_admin_may_not_deactivate_itself_but_another_admin_may(w):
    before = w.snapshot()
    rejected(w.set_status(w.admin, w.admin, "deactivated"), "forbidden", "stop")
    assert w.snapshot() == before
    second = w.register("second", admin=True)
    accepted(w.set_status(second, w.admin, "deactivated"))
    assert w.states[w.admin].status == "deactivated" and w.states[w.admin].admin


@pytest.mark.rules("R4-3")
def test_R4_3_registration_grants_admin_only_at_bootstrap():
    ctx = make_ctx(None)
    d = accepted(decide_register(Register(b'{"name":"mallory"}', admin=True), ctx))
    (state,) = d.states.values()
    assert state.admin is False and d.facts[0].admin is False
    d = accepted(decide_register(Register(b'{"name":"root"}', admin=True), make_ctx(None), bootstrap=True))
    (state,) = d.states.values()
    assert state.admin is True


@pytest.mark.rules("R4-3", "L2-4")
def test_R4_3_closed_registration_is_forbidden_except_bootstrap():
    limits = Limits(open_registration=False)
    rejected(decide_register(Register(b'{"name":"x"}'), make_ctx(None, limits=limits)), "forbidden", "stop")
    accepted(decide_register(Register(b'{"name":"x"}', admin=True), make_ctx(None, limits=limits), bootstrap=True))


@pytest.mark.rules("R4-3", "R4-1")
def test_R4_3_registration_creates_an_active_agent_and_stores_only_the_key_hash():
    d = accepted(decide_register(Register(b'{"name":"alice"}'), make_ctx(None, now=T0 + 5)))
    assert d.result == {"agent": "ag_000001", "key": "kf_secret"}
    (fact,) = d.facts
    assert fact == AgentRegistered(
        at=T0 + 5,
        by=None,
        agent="ag_000001",
        content=b'{"name":"alice"}',
        key_hash=hashlib.sha256(b"kf_secret").digest(),
        admin=False,
    )
    (state,) = d.states.values()
    assert (state.agent, state.status, state.admin, state.content, state.created_at) == (
        "ag_000001",
        "active",
        False,
        b'{"name":"alice"}',
        T0 + 5,
    )
    assert state.active and state == fold("ag_000001", d.facts)
    # Only the receipt carries the key; nothing that is recorded does (msgpack keeps bytes raw).
    for recorded in (fact, state):
        assert b"kf_secret" not in msgspec.msgpack.encode(recorded)


# --- R4-4 deactivation erases no fact; R4-5 authors are kept ----------------


@pytest.mark.rules("R4-4", "L1-2")
def test_R4_4_deactivation_is_one_new_fact_that_erases_nothing(w):
    before_state = w.states[w.alice]
    before_facts = list(w.facts[w.alice])
    d = accepted(w.set_status(w.admin, w.alice, "deactivated"))
    assert d.facts == [AgentStatusSet(at=w.now, by=w.admin, agent=w.alice, status="deactivated")]
    assert w.facts[w.alice][:-1] == before_facts  # the registration fact is still there, unchanged
    after = w.states[w.alice]
    assert after == msgspec.structs.replace(before_state, status="deactivated")
    assert (after.agent, after.admin, after.content, after.created_at) == (
        before_state.agent,
        before_state.admin,
        before_state.content,
        before_state.created_at,
    )


@pytest.mark.rules("R4-4", "R4-5")
def test_R4_5_deactivation_touches_no_memory_and_authorship_stays(w):
    accepted(w.update(w.alice, w.public))
    memories = {m: (w.states[m], list(w.facts[m])) for m in (w.private, w.public)}
    d = accepted(w.set_status(w.admin, w.alice, "deactivated"))
    assert not [o for o in d.states if o.startswith("me_")]
    assert not [o for f in d.facts for o in f.objects() if o.startswith("me_")]
    for m, (state, facts) in memories.items():
        assert w.states[m] == state and w.facts[m] == facts
        assert state.author == w.alice
        assert all(f.by == w.alice for f in facts)
        assert facts[0].author == w.alice


# --- L2-7 no implicit success -------------------------------------------------


@pytest.mark.rules("L2-7", "L2-3", "L2-4")
def test_L2_7_setting_status_to_the_current_one_is_conflict(w):
    before = w.snapshot()
    r = rejected(w.set_status(w.admin, w.bob, "active"), "conflict", "stop")
    assert w.bob in r.reason and "active" in r.reason
    # The admin itself, already active: also a no-op, so conflict (not a success).
    rejected(w.set_status(w.admin, w.admin, "active"), "conflict")
    assert w.snapshot() == before
    accepted(w.set_status(w.admin, w.bob, "deactivated"))
    before = w.snapshot()
    rejected(w.set_status(w.admin, w.bob, "deactivated"), "conflict", "stop")
    assert w.snapshot() == before


@pytest.mark.rules("R9-4", "L2-4")
def test_R9_4_admin_setting_status_of_unknown_agent_is_not_found(w):
    before = w.snapshot()
    r = rejected(w.set_status(w.admin, GHOST_AGENT, "deactivated"), "not_found", "stop")
    assert r.reason == f"agent {GHOST_AGENT} was not found, or you may not read it"
    assert w.snapshot() == before


# --- L1-1 state follows from facts ---------------------------------------------


@pytest.mark.rules("L1-1", "R4-4")
def test_L1_1_agent_state_is_the_fold_of_its_facts(w):
    for status in ("deactivated", "active", "deactivated"):
        d = accepted(w.set_status(w.admin, w.bob, status))
        assert d.states[w.bob] == fold(w.bob, w.facts[w.bob])
        assert fold(w.bob, w.facts[w.bob]).status == status
    for agent in (w.admin, w.alice):
        assert fold(agent, w.facts[agent]) == w.states[agent]


@pytest.mark.rules("L1-1")
def test_L1_1_every_accepted_agent_decision_states_only_objects_its_facts_touch(w):
    for d in (
        decide_register(Register(b'{"name":"z"}'), make_ctx(None)),
        w.set_status(w.admin, w.bob, "deactivated"),
    ):
        assert isinstance(d, Decision)
        assert set(d.states) == {o for f in d.facts for o in f.objects()}


# --- operating a deployment: create, rotate, reset (WIRE.md 1.1) ------------


def _key_decisions(w: World, by: str, target: str | None = None):
    """admin.agent.create, agent.rotate_key and admin.agent.reset_key by ``by``."""
    target = target or getattr(w, "bob", by)
    return {
        "create": agent_core.decide_create(CreateAgent(b'{"name":"new"}'), w.ctx(by)),
        "rotate": agent_core.decide_rotate_key(RotateKey(), w.ctx(by)),
        "reset": agent_core.decide_reset_key(w.states.get(target), ResetKey(target), w.ctx(by)),
    }


@pytest.mark.rules("R4-3", "R4-1")
def test_R4_3_admin_creates_a_plain_agent_with_open_registration_off():
    """WIRE.md "Operating a deployment": admin.agent.create works whether or not
    open registration is on; the agent it makes is never an admin."""
    w = World(Limits(open_registration=False))
    w.admin = w.register("admin", admin=True)
    d = accepted(_key_decisions(w, w.admin)["create"])
    (fact,) = d.facts
    assert fact == AgentRegistered(
        at=w.now - 2_000, by=w.admin, agent=d.result["agent"], content=b'{"name":"new"}',
        key_hash=hashlib.sha256(b"kf_secret").digest(), admin=False,
    )
    assert d.result == {"agent": fact.agent, "key": "kf_secret"}
    (state,) = d.states.values()
    assert state.active and not state.admin and state == fold(fact.agent, d.facts)
    for recorded in (fact, state):
        assert b"kf_secret" not in msgspec.msgpack.encode(recorded)


@pytest.mark.rules("R4-3", "L2-3", "L2-4")
def test_R4_3_only_an_active_admin_creates_agents_or_resets_keys(w):
    before = w.snapshot()
    got = _key_decisions(w, w.alice)
    r = rejected(got["create"], "forbidden", "stop")
    assert "admin" in r.reason
    r = rejected(got["reset"], "forbidden", "stop")
    # A non-admin learns nothing about which agents exist (D5).
    assert rejected(_key_decisions(w, w.alice, GHOST_AGENT)["reset"], "forbidden") == r
    assert w.snapshot() == before
    rejected(_key_decisions(w, w.admin, GHOST_AGENT)["reset"], "not_found", "stop")
    second = w.register("second", admin=True)
    accepted(w.set_status(second, w.admin, "deactivated"))
    got = _key_decisions(w, w.admin)
    for what in ("create", "rotate", "reset"):
        r = rejected(got[what], "forbidden", "stop")
        assert "deactivated" in r.reason


@pytest.mark.rules("R4-3", "R4-4")
def test_R4_3_a_new_key_is_one_fact_that_changes_only_the_key_hash(w):
    before = w.states[w.bob]
    d = accepted(w.record(_key_decisions(w, w.bob)["rotate"]))
    assert d.result == {"agent": w.bob, "key": "kf_secret"}
    assert d.facts == [AgentKeySet(at=d.facts[0].at, by=w.bob, agent=w.bob, key_hash=hashlib.sha256(b"kf_secret").digest())]
    after = w.states[w.bob]
    assert after == msgspec.structs.replace(before, key_hash=hashlib.sha256(b"kf_secret").digest())
    assert after == w.fold(w.bob)  # registration, then the new key: nothing erased (R4-4)
    # An admin resets a deactivated agent's key too; it stays deactivated.
    accepted(w.set_status(w.admin, w.alice, "deactivated"))
    d = accepted(w.record(_key_decisions(w, w.admin, w.alice)["reset"]))
    assert d.facts[0].by == w.admin and w.states[w.alice].status == "deactivated"


@pytest.mark.rules("R4-3", "L2-3")
def test_R4_3_an_admin_may_not_reset_its_own_key_and_is_pointed_to_rotate_key(w):
    """D236: nobody could reset it back, and admin.key would go stale without a
    word (docs/operations.md "Lost or leaked keys"); rotating is its way."""
    before = w.snapshot()
    r = rejected(_key_decisions(w, w.admin, w.admin)["reset"], "forbidden", "revise")
    assert r.hint is not None and r.hint.op == "agent.rotate_key" and "admin.key" in r.reason
    assert w.snapshot() == before
    accepted(_key_decisions(w, w.admin, w.admin)["rotate"])
