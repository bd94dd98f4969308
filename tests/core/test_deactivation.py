"""§4 deactivation effects on Threads (R4-6, R4-8), through ``agent.decide_set_status``
with an admin caller; DECISIONS.md T2 (deactivation ends pending responses), B2
(reactivation restores nothing), B14, B5/L4-3 (a due deadline wins).

R4-7 (pending *Task* judgments run to their contract deadlines): the Task part
is not covered here; it belongs with the Task tests (``test_engagement.py``). Its
Thread analogue — a deactivated creator's delivered assignments are forfeited and
settle only at their judgment deadline — is checked below.
"""

from __future__ import annotations

import pytest

from kungfud.core import thread as thread_core
from kungfud.core.facts import AgentStatusSet, MembershipEnded, ThreadClosed, entry_obj
from kungfud.core.obligations import ob_id
from kungfud.core.thread import readable_thread

from .world import World, ok, text

REASON = b'{"reason":"no"}'


@pytest.fixture
def w() -> World:
    """Thread t: alice governs; bob and carol speak; dave observes. Thread u: bob
    governs alone with carol speaking."""
    w = World()
    w.root = w.register("root", admin=True)
    w.alice = w.register("alice")
    w.bob = w.register("bob")
    w.carol = w.register("carol")
    w.dave = w.register("dave")
    w.t = w.create_thread(w.alice)
    w.add(w.t, w.alice, w.bob)
    w.add(w.t, w.alice, w.carol)
    w.add(w.t, w.alice, w.dave, "observer")
    w.u = w.create_thread(w.bob)
    w.add(w.u, w.bob, w.carol)
    return w


@pytest.mark.rules("R4-1", "R6.3-1", "R6.2-6")
def test_R4_1_a_deactivated_agent_may_take_no_thread_action(w):
    _, a = w.assign(w.alice, w.t, w.carol)
    ok(w.post(w.alice, w.t, ask=[w.carol]))
    ok(w.deactivate(w.root, w.carol))
    for action in (
        lambda: w.post(w.carol, w.t),
        lambda: w.handle(w.carol, w.t, 2),
        lambda: w.retract(w.carol, w.t, 1),
        lambda: w.leave(w.carol, w.t),
        lambda: w.take(w.carol, a),
        lambda: w.deliver(w.carol, a),
        lambda: w.judge(w.carol, a),
        lambda: w.drop(w.carol, a),
        lambda: w.void(w.carol, a),
        lambda: w.admit(w.carol, w.u),
        lambda: w.join(w.carol, w.t),
        lambda: w.act(w.carol, thread_core.decide_create, thread_core.CreateThread()),
    ):
        # D5: account state first — forbidden whatever the target, revealing nothing.
        w.refuse("forbidden", action, "stop")


@pytest.mark.rules("R4-6", "R6.2-10", "R6.2-11", "R6.2-12", "R6.2-13", "R8-27")
def test_R4_6_deactivation_ends_every_membership_with_the_effects_of_6_2(w):
    ok(w.post(w.alice, w.t, ask=[w.bob, w.carol]))  # t.1: bob owes a response
    _, took = w.assign(w.alice, w.t, w.bob)
    ok(w.take(w.bob, took))
    _, made_open = w.assign(w.bob, w.t, w.carol)
    _, made_taken = w.assign(w.bob, w.t, w.carol)
    ok(w.take(w.carol, made_taken))
    made_delivered = w.assign(w.bob, w.t, w.carol)[1]
    ok(w.take(w.carol, made_delivered, deliver=text()))
    _, addressed = w.assign(w.alice, w.t, w.bob)  # untaken, addressed to bob (B14)
    ok(w.post(w.carol, w.u))  # u.1: bob owes a response (rule 3)
    ok(w.set_role(w.bob, w.u, w.carol, "governor"))  # so u keeps a governor
    ok(w.post(w.alice, w.t, ask=[w.carol]))  # someone else's response stays pending

    d = ok(w.deactivate(w.root, w.bob))
    assert d.facts[0] == AgentStatusSet(at=w.now, by=w.root, agent=w.bob, status="deactivated")
    ends = [f for f in d.facts if isinstance(f, MembershipEnded)]
    assert [f.thread for f in ends] == sorted([w.t, w.u]) and len(d.facts) == 3
    assert all(f.agent == w.bob and f.why == "deactivated" and f.by == w.root for f in ends)
    in_t = next(f for f in ends if f.thread == w.t)
    assert in_t.responses == [1]
    assert in_t.voided == sorted([took, made_open, made_taken])
    assert in_t.forfeited == [made_delivered]
    assert next(f for f in ends if f.thread == w.u).responses == [1]

    assert w.memberships(w.bob) == {}
    for t in (w.t, w.u):
        assert w.bob not in w.members(t) and readable_thread(w.thread(t), t, w.member(t, w.bob)) is not None
        assert w.thread(t).open
    assert {w.asg(a).state for a in (took, made_open, made_taken)} == {"voided"}
    assert w.asg(made_delivered).state == "delivered" and w.asg(made_delivered).forfeited
    assert w.asg(addressed).state == "open"  # B14: not voided
    assert w.response(w.t, 1, w.bob) == "ended" and w.response(w.u, 1, w.bob) == "ended"
    assert w.response(w.t, 1, w.carol) == "pending"
    assert w.obligations_of(w.bob) == set()
    assert w.obligations_of(w.carol) == {("respond", entry_obj(w.t, 1)), ("respond", entry_obj(w.t, 7))}
    ended = d.result["ended"]
    assert len(ended) == len(set(ended))
    assert set(ended) >= {
        ob_id("respond", entry_obj(w.t, 1), w.bob),
        ob_id("respond", entry_obj(w.u, 1), w.bob),
        ob_id("deliver", took, w.bob),
        ob_id("deliver", made_taken, w.carol),
        ob_id("judge", made_delivered, w.bob),
    }


@pytest.mark.rules("R4-6", "R6.2-14", "R4-7")
def test_R4_6_a_deactivated_creators_delivered_work_settles_only_at_its_deadline(w):
    _, a = w.assign(w.bob, w.t, w.carol, judge_within_s=120)
    ok(w.take(w.carol, a, deliver=text()))
    due = w.asg(a).judge_by
    ok(w.deactivate(w.root, w.bob))
    w.now = due - 1
    assert w.asg(a).state == "delivered"
    w.refuse("conflict", lambda: w.expire(w.t))  # not earlier
    w.now = due
    ok(w.expire(w.t))
    assert w.asg(a).state == "undecided"


@pytest.mark.rules("R4-4", "R4-5", "L1-2")
def test_R4_4_R4_5_deactivation_erases_no_fact_and_authors_stay(w):
    ok(w.post(w.bob, w.t, ask=[w.carol]))
    _, a = w.assign(w.alice, w.t, w.bob)
    ok(w.take(w.bob, a, deliver=text()))
    ok(w.judge(w.alice, a, "reject", REASON))
    _, b = w.assign(w.bob, w.t, w.carol)
    streams = {obj: list(fs) for obj, fs in w.streams.items()}
    entry = w.entry(w.t, 1)
    ok(w.deactivate(w.root, w.bob))
    ok(w.deactivate(w.root, w.alice))
    for obj, fs in streams.items():
        assert w.streams[obj][: len(fs)] == fs
    assert w.entry(w.t, 1).author == w.bob and w.entry(w.t, 1).pin_memory == entry.pin_memory
    assert (w.asg(a).taker, w.asg(a).creator, w.asg(a).state) == (w.bob, w.alice, "rejected")
    assert w.asg(b).creator == w.bob and w.asg(b).state == "voided"


@pytest.mark.rules("R4-8", "R6.5-3", "R6.5-4", "R6.5-5", "R6.5-6", "R6.5-7", "R6.5-8")
def test_R4_8_deactivating_the_sole_governor_closes_the_thread_with_the_effects_of_6_5(w):
    grant = ok(w.admit(w.alice, w.t)).result["admission"]
    ok(w.post(w.alice, w.t, ask=[w.bob, w.carol]))  # t.1
    ok(w.post(w.bob, w.t, ask=[w.alice]))  # t.2: alice's own pending response
    _, untaken = w.assign(w.bob, w.t, w.carol)
    _, taken = w.assign(w.bob, w.t, w.carol)
    ok(w.take(w.carol, taken))
    _, judged_later = w.assign(w.carol, w.t, w.bob)
    ok(w.take(w.bob, judged_later, deliver=text()))
    judge_by = w.asg(judged_later).judge_by

    d = ok(w.deactivate(w.root, w.alice))
    assert [type(f) for f in d.facts] == [AgentStatusSet, MembershipEnded, ThreadClosed]
    ended, closed = d.facts[1], d.facts[2]
    assert ended.responses == [2] and closed.by == w.root and closed.at == w.now
    assert closed.responses == [(1, w.bob), (1, w.carol)]  # alice's ended once, by MembershipEnded
    assert closed.voided == sorted([untaken, taken]) and closed.admission == grant
    t = w.thread(w.t)
    assert t.status == "closed" and t.grant is None and w.thread_pending(w.t) == {}
    assert set(w.members(w.t)) == {w.bob, w.carol, w.dave}  # memberships remain
    assert w.asg(untaken).state == "voided" and w.asg(taken).state == "voided"
    assert w.asg(judged_later).state == "delivered" and w.asg(judged_later).judge_by == judge_by
    assert w.obligations() == {ob_id("judge", judged_later, w.carol): w.obligations()[ob_id("judge", judged_later, w.carol)]}
    assert len(d.result["ended"]) == len(set(d.result["ended"]))
    w.refuse("not_found", lambda: w.join(w.root, w.t))
    ok(w.judge(w.carol, judged_later))  # its creator still judges (R6.5-6)
    # u is untouched: alice was never in it.
    assert w.thread(w.u).open


@pytest.mark.rules("R4-8", "R6.2-4")
def test_R4_8_a_thread_with_another_governor_stays_open(w):
    ok(w.set_role(w.alice, w.t, w.carol, "governor"))
    d = ok(w.deactivate(w.root, w.alice))
    assert not any(isinstance(f, ThreadClosed) for f in d.facts)
    assert w.thread(w.t).open and w.governors(w.t) == [w.carol]


@pytest.mark.rules("R4-8", "R6.5-2", "R9-1")
def test_R4_8_a_closed_thread_is_not_closed_again_but_the_membership_ends(w):
    ok(w.close(w.bob, w.u))
    d = ok(w.deactivate(w.root, w.bob))
    assert [type(f) for f in d.facts] == [AgentStatusSet, MembershipEnded, MembershipEnded]
    assert w.bob not in w.members(w.u) and w.thread(w.u).status == "closed"


@pytest.mark.rules("R4-6", "R4-3")
def test_B2_reactivation_restores_nothing(w):
    ok(w.post(w.alice, w.t, ask=[w.bob]))
    _, a = w.assign(w.alice, w.t, w.bob)
    ok(w.take(w.bob, a))
    ok(w.deactivate(w.root, w.bob))
    d = ok(w.set_status(w.root, w.bob, "active"))
    assert d.facts == [AgentStatusSet(at=w.now, by=w.root, agent=w.bob, status="active")]
    assert w.memberships(w.bob) == {} and w.obligations_of(w.bob) == set()
    assert w.asg(a).state == "voided" and w.response(w.t, 1, w.bob) == "ended"
    w.refuse("not_found", lambda: w.post(w.bob, w.t))
    ok(w.admit(w.alice, w.t))
    ok(w.join(w.bob, w.t))  # a new membership, after a new admission
    assert w.pending(w.t, w.bob) == []


@pytest.mark.rules("R4-6")
def test_R4_6_an_agent_without_memberships_records_only_the_account_fact(w):
    d = ok(w.deactivate(w.root, w.register("eve")))
    assert [type(f) for f in d.facts] == [AgentStatusSet] and d.result["ended"] == []


@pytest.mark.rules("L4-3", "R4-6", "R6.4-13", "L5-2")
def test_L4_3_B5_a_due_deadline_is_recorded_before_deactivation_and_wins(w):
    """B5: "If a deadline is at or before that instant, the expiry is applied first
    and the action is judged against the expired state." Deactivation is decided by
    the target's actor, not the Thread's; the core tells it a deadline is due
    through the Thread's ``next_due()`` (the actor then records the Thread's
    expiries and decides again). Against the expired state, deactivation voids
    nothing: the work ended once, as timed out."""
    _, a = w.assign(w.alice, w.t, w.bob, deliver_within_s=60)
    ok(w.take(w.bob, a))
    w.now = w.asg(a).deliver_by
    assert w.next_due(w.t) is not None and w.next_due(w.t) <= w.now
    ok(w.expire(w.t))
    assert w.next_due(w.t) is None
    d = ok(w.deactivate(w.root, w.bob))
    assert all(not f.voided for f in d.facts if isinstance(f, MembershipEnded))
    assert ob_id("deliver", a, w.bob) not in d.result["ended"]
    assert w.asg(a).state == "timed_out"


@pytest.mark.rules("L4-3", "R4-8", "R6.4-12", "R6.5-5")
def test_L4_3_B5_closing_by_deactivation_keeps_a_passed_judgment_deadline(w):
    _, a = w.assign(w.carol, w.u, w.carol, judge_within_s=60)  # neither made nor taken by bob
    ok(w.take(w.carol, a, deliver=text()))
    w.now = w.asg(a).judge_by
    assert w.next_due(w.u) == w.now  # the signal to record the expiry first
    ok(w.expire(w.u))
    d = ok(w.deactivate(w.root, w.bob))  # bob governs u alone: u closes (R4-8)
    assert any(isinstance(f, ThreadClosed) for f in d.facts)
    assert w.asg(a).state == "undecided" and a not in d.states
