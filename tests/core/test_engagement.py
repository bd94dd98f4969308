"""§7.3 Engagement in the pure core: taking (one atomic fact, at most one open
engagement per agent, L2-6), delivering, dropping, judging, deadlines and
terminal states; the §8 deliver and judge obligations of engagements, read with
``of_state`` (R8-29…R8-39); and what deactivation does to Tasks (R4-7, B1, B2).
"""

from __future__ import annotations

import msgspec
import pytest

from kungfud.actors.ops import ACTIONS
from kungfud.core import engagement as eng_core
from kungfud.core import work
from kungfud.core.engagement import TERMINAL, effective
from kungfud.core.facts import MemoryCreated
from kungfud.core.task_facts import (
    EngagementConfirmed,
    EngagementDelivered,
    EngagementDropped,
    EngagementExpired,
    EngagementJudged,
)
from kungfud.core.kinds import of_state
from kungfud.core.queries import state_query
from kungfud.core.obligations import ob_id
from kungfud.core.pins import Pin
from kungfud.core.task import ContractSpec

from .helpers import without_id
from .test_task import GHOST_ENGAGEMENT, HOUR, REASON, Cast, TaskWorld, ok, output


@pytest.fixture
def w() -> TaskWorld:
    return TaskWorld()


@pytest.fixture
def a(w: TaskWorld) -> Cast:
    return Cast(w)


# --- taking -------------------------------------------------------------------------


@pytest.mark.rules("R7.3-2", "R7.3-3", "R7.3-4", "R7.3-6")
def test_R7_3_2_a_take_is_confirmed_in_one_fact_binding_agent_version_inputs(w, a):
    m = w.memory(a.alice, versions=3)
    t = w.new_task(a.alice, inputs=[(m, 2)], deliver_within_s=90, judge_within_s=30, judge=a.jude, readers="public")
    w.advance(7)
    d = ok(w.take(a.bob, t))
    e = d.result["engagement"]
    assert e.startswith("en_")
    assert d.facts == [
        EngagementConfirmed(
            at=w.now,
            by=a.bob,
            engagement=e,
            task=t,
            agent=a.bob,
            contract_version=1,
            inputs=[(m, 2)],
            deliver_by=w.now + 90_000,
            author=a.alice,
            judge=a.jude,
            judge_within_s=30,
            on_no_judgment="undecided",
            adoption_limit=None,
            readers="public",
        )
    ]
    assert d.result == {
        "engagement": e,
        "task": t,
        "contract_version": 1,
        "inputs": [{"memory": m, "version": 2}],
        "deliver_by": "2025-11-30T12:01:37.000Z",
        "state": "taken",
        "existing": False,
    }
    assert set(d.states) == {e, t}
    s = w.eng(e)
    assert (s.agent, s.contract_version, s.inputs, s.state, s.taken_at) == (a.bob, 1, [(m, 2)], "taken", w.now)
    assert w.open_by_agent(t) == {a.bob: e}
    w.assert_folds()


@pytest.mark.rules("R7.3-5", "R7.3-1")
def test_R7_3_5_a_rejected_take_creates_nothing(w, a):
    t = w.new_task(a.alice, [a.bob], eligibility=[a.bob])
    w.refuse("forbidden", lambda: w.take(a.alice, t))
    w.refuse("not_found", lambda: w.take(a.eve, t))
    w.refuse("not_found", lambda: w.take(a.eve, t, output()))  # no Memory is created either
    ok(w.pause(a.alice, t))
    w.refuse("conflict", lambda: w.take(a.bob, t, output()))
    assert w.live(t) == {} and w.open_by_agent(t) == {}
    assert not [o for o in w.states if o.startswith("en_")]
    assert w.obligations_of(a.bob) == set()


@pytest.mark.rules("R7.3-7", "B19", "R7.3-6")
def test_R7_3_7_B19_no_contract_requires_author_approval(w, a):
    # The contract has no approval term at all, so none can be added later.
    fields = set(work.Take.__struct_fields__) | set(ContractSpec.__struct_fields__)
    assert not [f for f in fields if "approv" in f]
    t = w.new_task(a.alice)
    e = w.engage(a.bob, t)
    # The engagement is open without any author action; only the taker owes anything.
    assert w.eng(e).state == "taken"
    assert w.obligations_of(a.alice) == set()
    assert w.obligations_of(a.bob) == {("deliver", e)}


@pytest.mark.rules("R7.3-8", "L2-6", "L2-5")
def test_R7_3_8_L2_6_taking_again_returns_the_open_engagement_without_effect(w, a):
    t = w.new_task(a.alice)
    first = ok(w.take(a.bob, t))
    e = first.result["engagement"]
    w.advance(30)
    before = w.snapshot()
    again = ok(w.take(a.bob, t))
    assert again.facts == [] and again.states == {}
    assert w.snapshot() == before
    assert again.result == {**first.result, "existing": True}  # same engagement, same deadline
    # Also when delivered: still the same engagement, state shown as it is.
    ok(w.deliver(a.bob, e))
    third = ok(w.take(a.bob, t))
    assert third.facts == [] and third.result["engagement"] == e and third.result["state"] == "delivered"
    assert list(w.open_by_agent(t).values()) == [e]


@pytest.mark.rules("R7.3-8", "R7.3-19")
def test_R7_3_8_after_an_engagement_ends_a_new_one_may_be_formed(w, a):
    t = w.new_task(a.alice, judge_within_s=10)
    e1 = w.engage(a.bob, t)
    ok(w.drop(a.bob, e1))
    e2 = w.engage(a.bob, t, deliver=True)
    assert e2 != e1
    w.tick(10, t)
    assert w.eng(e2).state == "undecided"
    # R7.3-19: undecided is never held against the engaged agent: it takes again.
    e3 = w.engage(a.bob, t)
    assert len({e1, e2, e3}) == 3
    assert w.open_by_agent(t) == {a.bob: e3}


# --- delivering --------------------------------------------------------------------


@pytest.mark.rules("R7.3-9", "R7.3-11", "R7.3-12", "R9-16")
def test_R7_3_9_only_the_engaged_agent_delivers(w, a):
    t = w.new_task(a.alice, judge=a.jude)
    e = w.engage(a.bob, t)
    w.engage(a.carol, t)
    w.refuse("forbidden", lambda: w.deliver(a.alice, e), "stop")
    w.refuse("forbidden", lambda: w.deliver(a.jude, e))
    hidden = w.refuse("not_found", lambda: w.deliver(a.carol, e))  # another taker cannot read it
    ghost = w.refuse("not_found", lambda: w.deliver(a.carol, GHOST_ENGAGEMENT))
    assert without_id(hidden, e) == without_id(ghost, GHOST_ENGAGEMENT)
    mine = w.memory(a.bob, versions=2)
    d = ok(w.deliver(a.bob, e, Pin(memory=mine, version=1)))
    assert d.facts == [
        EngagementDelivered(
            at=w.now, by=a.bob, engagement=e, task=t, pin_memory=mine, pin_version=1, judge_by=w.now + HOUR * 1000
        )
    ]
    assert d.result["state"] == "delivered" and d.result["ended"] == [ob_id("deliver", e, a.bob)]
    # R7.3-11: the output is fixed: a later version of the Memory changes nothing.
    w.update(a.bob, mine)
    assert (w.eng(e).pin_memory, w.eng(e).pin_version, w.eng(e).state) == (mine, 1, "delivered")


@pytest.mark.rules("R7.3-9", "R6.4-22")
def test_R7_3_9_a_delivery_pins_the_takers_own_valid_memory(w, a):
    t = w.new_task(a.alice)
    e = w.engage(a.bob, t)
    public_other = w.memory(a.carol, public=True)
    w.refuse("forbidden", lambda: w.deliver(a.bob, e, Pin(memory=public_other)))
    private_other = w.memory(a.carol)
    w.refuse("not_found", lambda: w.deliver(a.bob, e, Pin(memory=private_other)))
    gone = w.memory(a.bob)
    w.withdraw(a.bob, gone)
    w.refuse("conflict", lambda: w.deliver(a.bob, e, Pin(memory=gone)))
    ok(w.deliver(a.bob, e, Pin(memory=w.memory(a.bob))))


@pytest.mark.rules("R7.3-13")
def test_R7_3_13_a_delivery_cannot_be_replaced(w, a):
    t = w.new_task(a.alice)
    e = w.engage(a.bob, t)
    ok(w.deliver(a.bob, e, output("first")))
    pinned = (w.eng(e).pin_memory, w.eng(e).pin_version)
    r = w.refuse("conflict", lambda: w.deliver(a.bob, e, output("second")), "stop")
    assert "replaced" in r.reason
    # Nor through a combined take-and-deliver on the open engagement (WIRE.md).
    w.refuse("conflict", lambda: w.take(a.bob, t, output("third")))
    assert (w.eng(e).pin_memory, w.eng(e).pin_version) == pinned


@pytest.mark.rules("R7.3-14", "R7.3-15", "L2-1", "L2-2")
def test_R7_3_14_take_and_deliver_in_one_action_confirms_first(w, a):
    t = w.new_task(a.alice, judge_within_s=40)
    d = ok(w.take(a.bob, t, output()))
    e = d.result["engagement"]
    kinds = [type(f) for f in d.facts]
    assert kinds == [EngagementConfirmed, MemoryCreated, EngagementDelivered]  # confirmed before delivered
    assert all(f.at == w.now and f.by == a.bob for f in d.facts)
    assert d.result["state"] == "delivered" and d.result["existing"] is False
    assert d.result["judge_by"] == "2025-11-30T12:00:40.000Z"
    assert w.eng(e).state == "delivered"
    assert w.obligations_of(a.bob) == set() and w.obligations_of(a.alice) == {("judge", e)}
    w.assert_folds()


@pytest.mark.rules("R7.3-14", "R7.3-15", "L2-2")
def test_R7_3_15_a_combined_action_gains_no_permission_and_fails_whole(w, a):
    t = w.new_task(a.alice)
    other = w.memory(a.carol, public=True)
    # The delivery part fails: nothing at all, not even the engagement.
    w.refuse("forbidden", lambda: w.take(a.bob, t, Pin(memory=other)))
    assert a.bob not in w.open_by_agent(t)
    # The take part fails: no delivery Memory is created either.
    ok(w.pause(a.alice, t))
    w.refuse("conflict", lambda: w.take(a.bob, t, output()))


@pytest.mark.rules("R7.3-14", "L2-6")
def test_R7_3_14_combined_on_an_open_engagement_delivers_on_it(w, a):
    t = w.new_task(a.alice)
    e = w.engage(a.bob, t)
    d = ok(w.take(a.bob, t, output()))
    assert d.result["engagement"] == e and d.result["existing"] is True and d.result["state"] == "delivered"
    assert [type(f) for f in d.facts] == [MemoryCreated, EngagementDelivered]


@pytest.mark.rules("R7.3-10", "R8-33", "L4-3")
def test_R7_3_10_the_delivery_deadline_ends_it_as_timed_out(w, a):
    t = w.new_task(a.alice, deliver_within_s=60)
    e = w.engage(a.bob, t)
    w.advance(59.999)
    assert effective(w.eng(e), w.now, w.task(w.eng(e).task), w.states.get, state_query(w.states)) == "taken"
    w.refuse("conflict", lambda: w.expire(t))  # nothing due yet
    w.advance(0.001)
    # The deadline wins even before its fact is recorded (L4-3, B5).
    assert effective(w.eng(e), w.now, w.task(w.eng(e).task), w.states.get, state_query(w.states)) == "timed_out"
    w.refuse("conflict", lambda: w.deliver(a.bob, e), "stop")
    w.refuse("conflict", lambda: w.drop(a.bob, e))
    d = ok(w.expire(t))
    assert d.facts == [EngagementExpired(at=w.now, by=None, engagement=e, task=t, outcome="timed_out")]
    assert d.result == {"task": t, "expired": [e]}
    assert w.eng(e).state == "timed_out" and w.eng(e).ended_at == w.now
    w.refuse("conflict", lambda: w.deliver(a.bob, e))  # a late delivery is refused
    assert w.obligations_of(a.bob) == set()
    assert w.live(t) == {} and w.open_by_agent(t) == {}


# --- dropping ------------------------------------------------------------------------


@pytest.mark.rules("R7.3-9", "R8-32", "R7.3-23")
def test_R7_3_9_the_engaged_agent_drops_nobody_else(w, a):
    t = w.new_task(a.alice, judge=a.jude)
    e = w.engage(a.bob, t)
    w.refuse("forbidden", lambda: w.drop(a.alice, e), "stop")  # R7.3-23: the author cannot cancel
    w.refuse("forbidden", lambda: w.drop(a.jude, e))
    w.refuse("not_found", lambda: w.drop(a.carol, e))
    d = ok(w.drop(a.bob, e))
    assert d.facts == [EngagementDropped(at=w.now, by=a.bob, engagement=e, task=t)]
    assert d.result == {"engagement": e, "state": "dropped", "ended": [ob_id("deliver", e, a.bob)]}
    assert w.obligations_of(a.bob) == set()


@pytest.mark.rules("R7.3-9")
def test_R7_3_9_a_delivered_engagement_is_not_dropped(w, a):
    t = w.new_task(a.alice)
    e = w.engage(a.bob, t, deliver=True)
    w.refuse("conflict", lambda: w.drop(a.bob, e))
    assert w.eng(e).state == "delivered"


@pytest.mark.rules("R7.3-23", "R8-34")
def test_R7_3_23_no_action_cancels_or_voids_an_engagement(w, a):
    task_ops = {op for op in ACTIONS if op.startswith(("task.", "engagement."))}
    assert task_ops == {
        "task.create", "task.revise", "task.pause", "task.resume", "task.take", "task.deliver", "task.drop", "task.judge",
    }
    # a2a.cancel stops new engagements only: the open one runs on (tests/core/test_a2a.py).
    assert not [op for op in ACTIONS if ("cancel" in op and op != "a2a.cancel") or op.startswith("engagement.")]
    # Everything the author can do leaves an open engagement open.
    t = w.new_task(a.alice)
    e = w.engage(a.bob, t)
    ok(w.revise(a.alice, t))
    ok(w.pause(a.alice, t))
    w.refuse("forbidden", lambda: w.drop(a.alice, e))
    w.deactivate(a.alice)
    assert w.eng(e).state == "taken" and w.obligations_of(a.bob) == {("deliver", e)}


# --- judging ------------------------------------------------------------------------


@pytest.mark.rules("R7.3-16", "R8-37", "R8-38")
def test_R7_3_16_the_judge_adopts_or_rejects(w, a):
    t = w.new_task(a.alice)
    e1 = w.engage(a.bob, t, deliver=True)
    e2 = w.engage(a.carol, t, deliver=True)
    assert w.obligations_of(a.alice) == {("judge", e1), ("judge", e2)}
    d = ok(w.judge(a.alice, e1, "adopt"))
    assert d.facts == [EngagementJudged(at=w.now, by=a.alice, engagement=e1, task=t, verdict="adopt", reason=None)]
    assert d.result == {"engagement": e1, "state": "adopted", "ended": [ob_id("judge", e1, a.alice)]}
    d = ok(w.reject(a.alice, e2))
    assert d.result == {"engagement": e2, "state": "rejected", "ended": [ob_id("judge", e2, a.alice)]}
    assert (w.eng(e1).state, w.eng(e2).state) == ("adopted", "rejected")
    assert w.task(t).adoptions == 1
    assert w.obligations_of(a.alice) == set()


@pytest.mark.rules("R7.3-17")
def test_R7_3_17_a_rejection_must_carry_a_reason_the_engaged_agent_reads(w, a):
    t = w.new_task(a.alice)
    e = w.engage(a.bob, t, deliver=True)
    r = w.refuse("bad_request", lambda: w.judge(a.alice, e, "reject", None), "revise")
    assert "reason" in r.reason
    ok(w.reject(a.alice, e, REASON))
    s = w.eng(e)
    assert s.reason == REASON and s.state == "rejected"
    assert eng_core.is_party(s, a.bob)  # the engaged agent is a reader of its engagement (R9-16)


@pytest.mark.rules("R7.3-16")
def test_R7_3_16_judging_needs_a_delivery(w, a):
    t = w.new_task(a.alice)
    e = w.engage(a.bob, t)
    r = w.refuse("conflict", lambda: w.judge(a.alice, e), "wait")
    assert "not been delivered" in r.reason


@pytest.mark.rules("R7.3-18", "R7.1-4", "R8-39")
def test_R7_3_18_the_judgment_deadline_ends_it_as_the_contract_states(w, a):
    t1 = w.new_task(a.alice, judge_within_s=100)  # undecided if not stated
    t2 = w.new_task(a.alice, judge_within_s=100, on_no_judgment="adopt")
    e1 = w.engage(a.bob, t1, deliver=True)
    e2 = w.engage(a.bob, t2, deliver=True)
    w.advance(99.999)
    assert w.obligations_of(a.alice) == {("judge", e1), ("judge", e2)}
    assert (effective(w.eng(e1), w.now, w.task(w.eng(e1).task), w.states.get, state_query(w.states)), effective(w.eng(e2), w.now, w.task(w.eng(e2).task), w.states.get, state_query(w.states))) == ("delivered", "delivered")
    w.advance(0.001)
    assert (effective(w.eng(e1), w.now, w.task(w.eng(e1).task), w.states.get, state_query(w.states)), effective(w.eng(e2), w.now, w.task(w.eng(e2).task), w.states.get, state_query(w.states))) == ("undecided", "adopted")
    w.refuse("conflict", lambda: w.judge(a.alice, e1))  # the deadline won (L4-3)
    ok(w.expire(t1))
    ok(w.expire(t2))
    assert (w.eng(e1).state, w.eng(e2).state) == ("undecided", "adopted")
    assert (w.task(t1).adoptions, w.task(t2).adoptions) == (0, 1)
    assert w.obligations_of(a.alice) == set()
    w.refuse("conflict", lambda: w.judge(a.alice, e2))


@pytest.mark.rules("R7.3-19")
def test_R7_3_19_undecided_is_never_held_against_the_engaged_agent(w, a):
    t = w.new_task(a.alice, judge_within_s=5, adoption_limit=1, eligibility=[a.bob, a.carol])
    e = w.engage(a.bob, t, deliver=True)
    w.tick(5, t)
    assert w.eng(e).state == "undecided"
    assert w.task(t).adoptions == 0  # it consumed no slot, counted as nothing
    e2 = w.engage(a.bob, t, deliver=True)  # eligibility unchanged
    ok(w.judge(a.alice, e2))


@pytest.mark.rules("R7.3-24", "R7.3-25")
def test_R7_3_24_terminal_states_are_exactly_five_and_final(w, a):
    assert TERMINAL == {"adopted", "rejected", "undecided", "dropped", "timed_out"}
    t = w.new_task(a.alice, deliver_within_s=100, judge_within_s=100)
    adopted = w.engage(a.bob, t, deliver=True)
    rejected = w.engage(a.carol, t, deliver=True)
    dropped = w.engage(a.dave, t)
    ok(w.judge(a.alice, adopted))
    ok(w.reject(a.alice, rejected))
    ok(w.drop(a.dave, dropped))
    undecided = w.engage(a.eve, t, deliver=True)
    timed_out = w.engage(a.jude, t)
    w.tick(100, t)
    ended = {adopted: a.bob, rejected: a.carol, dropped: a.dave, undecided: a.eve, timed_out: a.jude}
    assert {w.eng(e).state for e in ended} == TERMINAL
    for e, agent in ended.items():
        before = w.eng(e)
        w.refuse("conflict", lambda: w.deliver(agent, e), "stop")
        w.refuse("conflict", lambda: w.drop(agent, e))
        w.refuse("conflict", lambda: w.judge(a.alice, e))
        w.refuse("conflict", lambda: w.reject(a.alice, e))
        assert w.eng(e) == before
        # R7.3-26: exactly one terminal fact backs each ended engagement.
        assert len(w.terminal_facts(e)) == 1
    w.advance(10 * HOUR)
    w.refuse("conflict", lambda: w.expire(t))
    w.assert_folds()


# --- §8: deliver and judge obligations of engagements --------------------------------


@pytest.mark.rules("R8-29", "R8-30", "R8-31", "R8-35", "R8-36")
def test_R8_29_a_confirmed_engagement_owes_delivery_then_the_judge_owes_judgment(w, a):
    t = w.new_task(a.alice, judge=a.jude, deliver_within_s=60, judge_within_s=90)
    e = w.engage(a.bob, t)
    obs = of_state(e, w.eng(e))
    assert len(obs) == 1
    ob = obs[0]
    assert (ob.obligation, ob.holder, ob.ref, ob.created_at, ob.due) == (
        "deliver", a.bob, {"task": t, "engagement": e}, w.eng(e).taken_at, w.eng(e).deliver_by,
    )
    assert ob.obligation_id == ob_id("deliver", e, a.bob)
    # R8-30: only the taker holds it.
    assert [x for x in (a.alice, a.jude, a.carol) if w.obligations_of(x)] == []
    # R8-8: the Task itself creates no obligation by being open.
    assert of_state(t, w.task(t)) == []
    w.advance(10)
    ok(w.deliver(a.bob, e))  # R8-31: delivering ends it…
    obs = of_state(e, w.eng(e))
    assert [(o.obligation, o.holder, o.created_at, o.due) for o in obs] == [("judge", a.jude, w.now, w.now + 90_000)]
    # R8-36: the designated judge holds it, not the author.
    assert w.obligations_of(a.bob) == set() and w.obligations_of(a.alice) == set()
    assert w.obligations_of(a.jude) == {("judge", e)}


@pytest.mark.rules("R8-35", "R8-36", "B23")
def test_R8_36_without_a_designated_judge_the_author_holds_the_judge_obligation(w, a):
    t = w.new_task(a.alice)
    e = w.engage(a.bob, t, deliver=True)
    assert w.obligations_of(a.alice) == {("judge", e)}
    assert w.obligations_of(a.bob) == set()


@pytest.mark.rules("R8-32", "R8-33", "R8-37", "R8-38", "R8-39", "L5-2")
def test_R8_32_every_exit_ends_the_obligation_exactly_once(w, a):
    t = w.new_task(a.alice, deliver_within_s=50, judge_within_s=50, on_no_judgment="adopt")
    dropped = w.engage(a.bob, t)
    late = w.engage(a.carol, t)
    adopted = w.engage(a.dave, t, deliver=True)
    rejected = w.engage(a.eve, t, deliver=True)
    unjudged = w.engage(a.jude, t, deliver=True)
    assert len(w.obligations()) == 5
    ok(w.drop(a.bob, dropped))  # R8-32
    ok(w.judge(a.alice, adopted))  # R8-37
    ok(w.reject(a.alice, rejected))  # R8-38
    assert w.obligations_of(a.carol) == {("deliver", late)} and w.obligations_of(a.alice) == {("judge", unjudged)}
    w.tick(50, t)  # R8-33, R8-39
    assert (w.eng(late).state, w.eng(unjudged).state) == ("timed_out", "adopted")
    assert w.obligations() == {}
    for e in (dropped, late, adopted, rejected, unjudged):
        assert len(w.terminal_facts(e)) == 1  # L5-2: ended at most once


@pytest.mark.rules("R8-34")
def test_R8_34_an_engagements_deliver_obligation_has_no_voiding_exit(w, a):
    # The deliver obligation's exits are deliver, drop and the deadline only.
    t = w.new_task(a.alice)
    e = w.engage(a.bob, t)
    ok(w.pause(a.alice, t))
    ok(w.revise(a.alice, t))
    w.deactivate(a.alice)
    assert w.obligations_of(a.bob) == {("deliver", e)}
    assert not [f for f in w.streams[e] if "void" in type(f).__name__.lower()]


# --- deactivation (R4-7, B1, B2) ---------------------------------------------------


@pytest.mark.rules("R4-7", "B1", "R7.3-18")
def test_R4_7_B1_a_deactivated_judges_pending_judgments_run_to_their_deadline(w, a):
    t = w.new_task(a.alice, judge=a.jude, judge_within_s=100, on_no_judgment="adopt")
    e = w.engage(a.bob, t, deliver=True)
    d = w.deactivate(a.jude)
    assert not {o for o in d.states if o.startswith(("tk_", "en_"))}  # nothing ended early
    w.refuse("forbidden", lambda: w.judge(a.jude, e))  # R4-1
    w.refuse("forbidden", lambda: w.judge(a.alice, e))  # the author does not take over (B17)
    w.advance(99.999)
    assert effective(w.eng(e), w.now, w.task(w.eng(e).task), w.states.get, state_query(w.states)) == "delivered"
    w.refuse("conflict", lambda: w.expire(t))
    w.advance(0.001)
    ok(w.expire(t))
    assert w.eng(e).state == "adopted"  # the contract's result, at the deadline


@pytest.mark.rules("R4-7", "B1")
def test_B1_a_deactivated_authors_judgments_run_to_their_deadline(w, a):
    t = w.new_task(a.alice, judge_within_s=100)
    e = w.engage(a.bob, t, deliver=True)
    w.advance(50)
    w.deactivate(a.alice)
    w.refuse("forbidden", lambda: w.judge(a.alice, e))
    w.tick(49.999, t)
    assert w.eng(e).state == "delivered"
    w.tick(0.001, t)
    assert w.eng(e).state == "undecided"


@pytest.mark.rules("B2", "R7.3-22")
def test_B2_a_deactivated_authors_task_accepts_no_new_engagements(w, a):
    t = w.new_task(a.alice, judge=a.jude)
    e = w.engage(a.bob, t)
    delivered = w.engage(a.dave, t, deliver=True)
    w.deactivate(a.alice)
    r = w.refuse("conflict", lambda: w.take(a.carol, t))
    assert "deactivated" in r.reason
    w.refuse("conflict", lambda: w.take(a.carol, t, output()))
    # R7.3-22: existing engagements remain, deliverable and judgeable.
    assert ok(w.take(a.bob, t)).result["existing"] is True
    ok(w.deliver(a.bob, e))
    ok(w.judge(a.jude, e))
    ok(w.reject(a.jude, delivered))
    # Reactivation restores acceptance ("while it is deactivated").
    w.reactivate(a.alice)
    ok(w.take(a.carol, t))


@pytest.mark.rules("B2", "R4-1")
def test_B2_a_deactivated_takers_engagement_runs_to_its_deadline(w, a):
    t = w.new_task(a.alice, deliver_within_s=100)
    e = w.engage(a.bob, t)
    w.deactivate(a.bob)
    w.refuse("forbidden", lambda: w.deliver(a.bob, e))
    w.refuse("forbidden", lambda: w.drop(a.bob, e))
    w.tick(99, t)
    assert w.eng(e).state == "taken"  # never silently cancelled
    w.tick(1, t)
    assert w.eng(e).state == "timed_out"


@pytest.mark.rules("R7.3-8", "L2-6")
def test_R7_3_8_a_task_state_does_not_grow_with_its_running_engagements(w, a):
    """Issue 27, D271: the open engagement of each agent and the running
    deadlines are rows derived from the engagements, not lists in the Task:
    the Task's stored state is the same size after 1 and after 100 running
    engagements, and each agent still gets its one open engagement back."""
    t = w.new_task(a.alice)
    first = w.engage(a.bob, t)
    size_one = len(msgspec.msgpack.encode(w.task(t)))
    takers = [w.register(f"taker{i}") for i in range(99)]
    for agent in takers:
        w.engage(agent, t)
    assert len(w.live(t)) == 100
    assert len(msgspec.msgpack.encode(w.task(t))) == size_one  # only the counter moved (1 -> 100, one byte either way)
    again = ok(w.take(a.bob, t))  # L2-6: taking again returns the open engagement, read from its row
    assert again.result["existing"] is True and again.result["engagement"] == first
    assert w.open_by_agent(t)[takers[-1]] in w.live(t)
