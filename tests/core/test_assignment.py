"""§6.4 assignments, the §8 deliver and judge obligations as far as they concern
assignments (R8-29…R8-39; obligations are ``of_state`` of assignment states),
deadlines (L4-3, R6.4-14: a deadline at or before now wins) and L5-2 (each
obligation and each delivery ends at most once). R6.2-6, R6.2-7 and R6.2-9 (what
roles mean for assignments) live here too.
"""

from __future__ import annotations

import typing

import pytest

from kungfud.core.assignment import TERMINAL, StateName, due_expiries, effective
from kungfud.core.facts import (
    AssignmentCreated,
    AssignmentDelivered,
    AssignmentDropped,
    AssignmentExpired,
    AssignmentJudged,
    AssignmentTaken,
    AssignmentVoided,
    EntryPosted,
    MemoryCreated,
    entry_obj,
)
from kungfud.core.kinds import of_state
from kungfud.core.obligations import Obligation, ob_id
from kungfud.core.pins import Pin
from kungfud.core.thread import readable_thread

from .world import HOUR, World, ok, spec, text

MS = 1000
REASON = b'{"reason":"misses the criteria"}'


@pytest.fixture
def w() -> World:
    """alice governs; bob and carol speak; dave observes."""
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
    return w


def delivered(w: World, creator: str, taker: str, **kw) -> str:
    _, a = w.assign(creator, w.t, taker, **kw)
    ok(w.take(taker, a, deliver=text("output")))
    return a


# --- R6.4-1 … R6.4-6 creation and deadlines -----------------------------------------------------


@pytest.mark.rules("R6.4-1", "R6.2-17", "R6.2-23")
def test_R6_4_1_a_speaking_member_assigns_one_speaking_member_possibly_itself(w):
    for creator, to in ((w.alice, w.bob), (w.bob, w.carol), (w.carol, w.carol), (w.bob, w.alice)):
        _, a = w.assign(creator, w.t, to)
        assert (w.asg(a).creator, w.asg(a).to, w.asg(a).state) == (creator, to, "open")


@pytest.mark.rules("R6.4-1")
def test_R6_4_1_the_addressee_must_be_a_member_who_may_speak(w):
    ok(w.leave(w.carol, w.t))
    for to in (w.dave, w.root, w.carol, "ag_999999"):  # observer, never a member, former member, unknown
        r = w.refuse("bad_request", lambda: w.post(w.alice, w.t, assign=spec(to)), "revise")
        assert to in r.reason


@pytest.mark.rules("R6.4-1", "R6.2-7", "R6.2-24")
def test_R6_2_7_an_observer_cannot_create_an_assignment(w):
    w.refuse("forbidden", lambda: w.post(w.dave, w.t, assign=spec(w.bob)))
    w.refuse("forbidden", lambda: w.post(w.dave, w.t, assign=spec(w.dave)))


@pytest.mark.rules("R6.4-2", "L2-1")
def test_R6_4_2_an_assignment_is_created_together_with_its_entry(w):
    d = ok(w.post(w.alice, w.t, assign=spec(w.bob, deliver_within_s=60, judge_within_s=120)))
    a, n = d.result["assignment"], d.result["entry"]
    kinds = [type(f) for f in d.facts]
    assert kinds == [MemoryCreated, EntryPosted, AssignmentCreated]
    posted, created = d.facts[1], d.facts[2]
    assert posted.assignment == a and created.entry == n and created.thread == w.t
    assert w.entry(w.t, n).assignment == a and w.asg(a).entry == n
    assert w.live(w.t)[a].entry == n
    # A failing assignment leaves no entry behind either.
    entries = w.thread(w.t).entries
    w.refuse("bad_request", lambda: w.post(w.alice, w.t, assign=spec(w.dave)))
    assert w.thread(w.t).entries == entries


@pytest.mark.rules("R6.4-3", "R6.4-15")
def test_R6_4_3_the_assignment_fixes_criteria_and_both_windows(w):
    d = ok(w.post(w.alice, w.t, assign=spec(w.bob, deliver_within_s=60, judge_within_s=120)))
    a = d.result["assignment"]
    s = w.asg(a)
    assert (s.content, s.deliver_within_s, s.judge_within_s, s.created_at) == (b'{"criteria":"do it"}', 60, 120, w.now)
    assert s.deliver_by is None and s.judge_by is None and s.taker is None


@pytest.mark.rules("R6.4-4", "L4-2")
def test_R6_4_4_missing_windows_take_the_configured_defaults(w):
    _, a = w.assign(w.alice, w.t, w.bob)
    assert (w.asg(a).deliver_within_s, w.asg(a).judge_within_s) == (HOUR, HOUR)
    ok(w.take(w.bob, a))
    ob = of_state(a, w.asg(a))[0]
    assert ob.due == w.now + HOUR * MS  # every deliver obligation shows a deadline


@pytest.mark.rules("R6.4-5")
def test_R6_4_5_delivery_runs_from_taking_and_judgment_from_delivery(w):
    _, a = w.assign(w.alice, w.t, w.bob, deliver_within_s=60, judge_within_s=120)
    w.advance(500)
    taken = ok(w.take(w.bob, a))
    assert w.asg(a).taken_at == w.now and w.asg(a).deliver_by == w.now + 60 * MS
    assert taken.facts == [
        AssignmentTaken(at=w.now, by=w.bob, assignment=a, thread=w.t, taker=w.bob, deliver_by=w.now + 60 * MS)
    ]
    w.advance(30)
    ok(w.deliver(w.bob, a))
    assert w.asg(a).delivered_at == w.now and w.asg(a).judge_by == w.now + 120 * MS
    assert w.live(w.t)[a].due == w.now + 120 * MS


@pytest.mark.rules("R6.4-6", "R6.4-7", "R8-3")
def test_R6_4_6_an_untaken_assignment_runs_no_deadline_and_binds_nobody(w):
    _, a = w.assign(w.alice, w.t, w.bob, deliver_within_s=1, judge_within_s=1)
    assert of_state(a, w.asg(a)) == [] and w.obligations() == {}
    w.advance(10 * 365 * 24 * HOUR)
    assert effective(w.asg(a), w.now) == "open" and w.due(w.t) == []
    w.refuse("conflict", lambda: w.expire(w.t))
    ok(w.take(w.bob, a))
    assert w.asg(a).deliver_by == w.now + 1 * MS


@pytest.mark.rules("R6.4-8")
def test_R6_4_8_an_untaken_assignment_ends_only_by_being_taken_or_voided(w):
    _, a = w.assign(w.alice, w.t, w.bob)
    _, b = w.assign(w.alice, w.t, w.bob)
    w.refuse("forbidden", lambda: w.deliver(w.bob, a))  # nobody took it: there is no taker yet
    w.refuse("forbidden", lambda: w.drop(w.bob, a))
    w.refuse("conflict", lambda: w.judge(w.alice, a), "wait")
    w.advance(30 * 24 * HOUR)
    assert w.asg(a).state == "open"
    ok(w.take(w.bob, a))
    ok(w.void(w.alice, b))
    assert (w.asg(a).state, w.asg(b).state) == ("taken", "voided")


# --- the action table (R6.4-19 … R6.4-29) -------------------------------------------------------


@pytest.mark.rules("R6.4-19", "R8-29", "R8-30")
def test_R6_4_19_only_the_addressee_takes_and_that_binds_it(w):
    _, a = w.assign(w.alice, w.t, w.bob)
    for agent in (w.alice, w.carol, w.dave):
        w.refuse("forbidden", lambda: w.take(agent, a))
    w.refuse("not_found", lambda: w.take(w.root, a))
    ok(w.take(w.bob, a))
    s = w.asg(a)
    assert (s.state, s.taker) == ("taken", w.bob)
    assert of_state(a, s) == [
        Obligation(ob_id("deliver", a, w.bob), "deliver", w.bob, {"thread": w.t, "assignment": a}, w.now, s.deliver_by)
    ]
    assert w.obligations_of(w.bob) == {("deliver", a)} and w.obligations_of(w.alice) == set()


@pytest.mark.rules("R6.4-11", "R6.4-19")
def test_R6_4_11_at_most_one_taking(w):
    _, a = w.assign(w.alice, w.t, w.bob)
    ok(w.take(w.bob, a))
    r = w.refuse("conflict", lambda: w.take(w.bob, a))
    assert "already taken" in r.reason
    w.refuse("forbidden", lambda: w.take(w.carol, a))


@pytest.mark.rules("R6.4-20")
def test_R6_4_20_taking_ends_the_takers_pending_response_to_the_carrying_entry(w):
    n, a = w.assign(w.alice, w.t, w.bob, ask=[w.bob, w.carol])
    ok(w.post(w.alice, w.t, ask=[w.bob]))  # another entry: untouched by the take
    d = ok(w.take(w.bob, a))
    assert d.facts[0].response_entry == n and entry_obj(w.t, n) in d.facts[0].objects()
    assert d.result["ended"] == [ob_id("respond", entry_obj(w.t, n), w.bob)]
    assert w.response(w.t, n, w.bob) == "ended" and w.response(w.t, n, w.carol) == "pending"
    assert w.pending(w.t, w.bob) == [n + 1]


@pytest.mark.rules("R6.4-20")
def test_R6_4_20_taking_without_a_pending_response_ends_none(w):
    n, a = w.assign(w.alice, w.t, w.bob, ask=[w.carol])
    d = ok(w.take(w.bob, a))
    assert d.facts[0].response_entry is None and d.result["ended"] == []
    assert entry_obj(w.t, n) not in d.states


@pytest.mark.rules("R6.4-21", "L2-2", "R8-31", "R8-35")
def test_R6_4_21_take_and_deliver_in_one_action(w):
    n, a = w.assign(w.alice, w.t, w.bob, ask=[w.bob], deliver_within_s=60, judge_within_s=120)
    d = ok(w.take(w.bob, a, deliver=text("result")))
    kinds = [type(f) for f in d.facts]
    assert kinds == [AssignmentTaken, MemoryCreated, AssignmentDelivered]
    assert d.result["state"] == "delivered"
    assert d.result["ended"] == [ob_id("respond", entry_obj(w.t, n), w.bob), ob_id("deliver", a, w.bob)]
    s = w.asg(a)
    assert (s.state, s.taker, s.taken_at, s.delivered_at, s.judge_by) == ("delivered", w.bob, w.now, w.now, w.now + 120 * MS)
    assert w.states[s.pin_memory].author == w.bob
    assert w.obligations_of(w.bob) == set() and w.obligations_of(w.alice) == {("judge", a)}


@pytest.mark.rules("R6.4-21", "L2-2", "L2-1", "R6.4-23")
def test_R6_4_21_a_failing_delivery_takes_nothing(w):
    n, a = w.assign(w.alice, w.t, w.bob, ask=[w.bob])
    public = w.memory(w.carol, public=True)
    private = w.memory(w.carol)
    w.refuse("forbidden", lambda: w.take(w.bob, a, deliver=Pin(memory=public)))
    w.refuse("not_found", lambda: w.take(w.bob, a, deliver=Pin(memory=private)))
    assert w.asg(a).state == "open" and w.response(w.t, n, w.bob) == "pending"


@pytest.mark.rules("R6.4-22", "R8-31", "R8-35", "R8-36")
def test_R6_4_22_only_the_taker_delivers_and_delivery_awaits_judgment(w):
    _, a = w.assign(w.alice, w.t, w.bob)
    ok(w.take(w.bob, a))
    for agent in (w.alice, w.carol, w.dave):
        w.refuse("forbidden", lambda: w.deliver(agent, a))
    d = ok(w.deliver(w.bob, a))
    assert d.result["ended"] == [ob_id("deliver", a, w.bob)]
    s = w.asg(a)
    assert s.state == "delivered" and effective(s, w.now) == "delivered"
    assert of_state(a, s) == [
        Obligation(ob_id("judge", a, w.alice), "judge", w.alice, {"thread": w.t, "assignment": a}, w.now, s.judge_by)
    ]
    assert w.obligations_of(w.bob) == set()


@pytest.mark.rules("R6.4-23", "R5-11")
def test_R6_4_23_a_delivery_pins_only_the_takers_own_memories(w):
    own = w.memory(w.bob, versions=2)
    theirs = w.memory(w.carol, public=True)
    gone = w.memory(w.bob)
    w.withdraw(w.bob, gone)
    _, a = w.assign(w.alice, w.t, w.bob)
    ok(w.take(w.bob, a))
    r = w.refuse("forbidden", lambda: w.deliver(w.bob, a, Pin(memory=theirs)))
    assert theirs in r.reason
    w.refuse("conflict", lambda: w.deliver(w.bob, a, Pin(memory=gone)))
    d = ok(w.deliver(w.bob, a, Pin(memory=own, version=1)))
    assert (d.facts[-1].pin_memory, d.facts[-1].pin_version) == (own, 1)
    # A payload becomes a private Memory of the taker (R6.4-22 "a payload").
    _, b = w.assign(w.alice, w.t, w.bob)
    ok(w.take(w.bob, b))
    d = ok(w.deliver(w.bob, b, text("payload")))
    assert isinstance(d.facts[0], MemoryCreated) and d.facts[0].author == w.bob


@pytest.mark.rules("R6.4-9", "R6.4-11", "L5-2")
def test_R6_4_9_a_delivery_cannot_be_replaced(w):
    a = delivered(w, w.alice, w.bob)
    first = w.asg(a)
    r = w.refuse("conflict", lambda: w.deliver(w.bob, a, text("better")))
    assert "replaced" in r.reason
    w.refuse("conflict", lambda: w.take(w.bob, a, deliver=text("again")))
    assert w.asg(a) == first


@pytest.mark.rules("R6.4-24", "R6.4-25", "R8-36", "R8-37")
def test_R6_4_24_R6_4_25_only_the_creator_judges_and_adoption_ends_it(w):
    a = delivered(w, w.alice, w.bob)
    for agent in (w.bob, w.carol, w.dave):
        w.refuse("forbidden", lambda: w.judge(agent, a))
    d = ok(w.judge(w.alice, a))
    assert d.facts == [AssignmentJudged(at=w.now, by=w.alice, assignment=a, thread=w.t, verdict="adopt")]
    assert d.result == {"assignment": a, "state": "adopted", "ended": [ob_id("judge", a, w.alice)]}
    assert w.asg(a).state == "adopted" and w.asg(a).judged_at == w.now
    assert a not in w.live(w.t) and w.obligations() == {}


@pytest.mark.rules("R6.4-26", "R8-38")
def test_R6_4_26_a_rejection_needs_a_reason_the_taker_can_read(w):
    a = delivered(w, w.alice, w.bob)
    r = w.refuse("bad_request", lambda: w.judge(w.alice, a, "reject"), "revise")
    assert "reason" in r.reason
    d = ok(w.judge(w.alice, a, "reject", REASON))
    assert d.result["state"] == "rejected" and d.result["ended"] == [ob_id("judge", a, w.alice)]
    assert w.asg(a).state == "rejected" and w.asg(a).reason == REASON


@pytest.mark.rules("R6.4-24")
def test_R6_4_24_judging_undelivered_work_waits(w):
    _, a = w.assign(w.alice, w.t, w.bob)
    ok(w.take(w.bob, a))
    r = w.refuse("conflict", lambda: w.judge(w.alice, a), "wait")
    assert "not been delivered" in r.reason


@pytest.mark.rules("R6.4-27", "R8-32")
def test_R6_4_27_only_the_taker_drops_ending_it_as_dropped(w):
    _, a = w.assign(w.alice, w.t, w.bob)
    ok(w.take(w.bob, a))
    for agent in (w.alice, w.carol):
        w.refuse("forbidden", lambda: w.drop(agent, a))
    d = ok(w.drop(w.bob, a))
    assert d.facts == [AssignmentDropped(at=w.now, by=w.bob, assignment=a, thread=w.t)]
    assert d.result == {"assignment": a, "state": "dropped", "ended": [ob_id("deliver", a, w.bob)]}
    assert w.asg(a).state == "dropped" and w.obligations() == {}


@pytest.mark.rules("R6.4-28")
def test_R6_4_28_drop_only_before_delivery(w):
    a = delivered(w, w.alice, w.bob)
    w.refuse("conflict", lambda: w.drop(w.bob, a))
    assert w.asg(a).state == "delivered" and w.obligations_of(w.alice) == {("judge", a)}


@pytest.mark.rules("R6.4-29", "R8-34")
def test_R6_4_29_the_creator_voids_undelivered_work_taken_or_not(w):
    _, untaken = w.assign(w.alice, w.t, w.bob)
    _, taken = w.assign(w.alice, w.t, w.bob)
    ok(w.take(w.bob, taken))
    for agent in (w.bob, w.carol):
        w.refuse("forbidden", lambda: w.void(agent, untaken))
        w.refuse("forbidden", lambda: w.void(agent, taken))
    d = ok(w.void(w.alice, untaken))
    assert d.facts == [AssignmentVoided(at=w.now, by=w.alice, assignment=untaken, thread=w.t)]
    assert d.result["ended"] == []
    d = ok(w.void(w.alice, taken))
    assert d.result == {"assignment": taken, "state": "voided", "ended": [ob_id("deliver", taken, w.bob)]}
    assert w.obligations() == {}
    a = delivered(w, w.alice, w.bob)
    w.refuse("conflict", lambda: w.void(w.alice, a))
    assert w.asg(a).state == "delivered"


# --- R6.2-6, R6.2-9 roles and assignments ---------------------------------------------------------


@pytest.mark.rules("R6.2-6", "R6.2-9")
def test_R6_2_6_observers_take_deliver_and_drop(w):
    _, a = w.assign(w.alice, w.t, w.bob)
    _, b = w.assign(w.alice, w.t, w.bob)
    ok(w.set_role(w.alice, w.t, w.bob, "observer"))
    ok(w.take(w.bob, a))
    ok(w.take(w.bob, b))
    ok(w.deliver(w.bob, a))
    ok(w.drop(w.bob, b))
    assert (w.asg(a).state, w.asg(b).state) == ("delivered", "dropped")


@pytest.mark.rules("R6.2-6", "R6.2-9")
def test_R6_2_9_demotion_leaves_assignments_in_progress_untouched(w):
    _, taken = w.assign(w.carol, w.t, w.bob)
    ok(w.take(w.bob, taken))
    to_judge = delivered(w, w.carol, w.bob)
    _, to_void = w.assign(w.carol, w.t, w.bob)
    before = {a: w.asg(a) for a in (taken, to_judge, to_void)}
    d = ok(w.set_role(w.alice, w.t, w.bob, "observer"))
    ok(w.set_role(w.alice, w.t, w.carol, "observer"))
    assert all(a not in d.states for a in before)
    assert {a: w.asg(a) for a in before} == before
    assert w.obligations_of(w.bob) == {("deliver", taken)} and w.obligations_of(w.carol) == {("judge", to_judge)}
    ok(w.deliver(w.bob, taken))  # a demoted taker still delivers
    ok(w.judge(w.carol, to_judge, "reject", REASON))  # a demoted creator still judges…
    ok(w.void(w.carol, to_void))  # …and voids
    ok(w.judge(w.carol, taken))


# --- R6.4-9 … R6.4-18 redo, deadlines, terminal states --------------------------------------------


@pytest.mark.rules("R6.4-10", "R6.4-16", "R6.4-15")
def test_R6_4_10_redoing_is_a_new_assignment_referencing_the_old(w):
    old = delivered(w, w.alice, w.bob)
    ok(w.judge(w.alice, old, "reject", REASON))
    before = w.asg(old)
    _, new = w.assign(w.alice, w.t, w.bob, redoes=old)
    assert new != old and w.asg(new).redoes == old and w.asg(new).state == "open"
    assert w.asg(old) == before
    # Redoing names an assignment of the same thread.
    t2 = w.create_thread(w.alice)
    w.refuse("not_found", lambda: w.post(w.alice, t2, assign=spec(w.alice, redoes=old)))
    w.refuse("not_found", lambda: w.post(w.alice, w.t, assign=spec(w.bob, redoes="as_999999")))


@pytest.mark.rules("R6.4-16", "R6.4-15")
def test_R6_4_16_to_change_an_assignment_void_it_and_create_another(w):
    _, a = w.assign(w.alice, w.t, w.bob, deliver_within_s=60)
    content = w.asg(a)
    ok(w.take(w.bob, a))
    ok(w.void(w.alice, a))
    s = w.asg(a)
    assert (s.content, s.deliver_within_s, s.judge_within_s, s.to, s.creator) == (
        content.content, content.deliver_within_s, content.judge_within_s, content.to, content.creator,
    )
    _, b = w.assign(w.alice, w.t, w.bob, deliver_within_s=600, redoes=a)
    assert w.asg(b).deliver_within_s == 600


@pytest.mark.rules("R6.4-13", "R8-33", "L4-3")
def test_R6_4_13_an_undelivered_assignment_times_out_at_its_deadline(w):
    _, a = w.assign(w.alice, w.t, w.bob, deliver_within_s=60)
    ok(w.take(w.bob, a))
    due = w.asg(a).deliver_by
    w.now = due - 1
    assert effective(w.asg(a), w.now) == "taken"
    w.refuse("conflict", lambda: w.expire(w.t))
    w.now = due  # at the deadline, the deadline wins
    assert effective(w.asg(a), w.now) == "timed_out"
    w.refuse("conflict", lambda: w.deliver(w.bob, a))  # a late delivery
    w.refuse("conflict", lambda: w.drop(w.bob, a))
    w.refuse("conflict", lambda: w.void(w.alice, a))
    d = ok(w.expire(w.t))
    assert d.facts == [AssignmentExpired(at=due, by=None, assignment=a, thread=w.t, outcome="timed_out")]
    assert w.asg(a).state == "timed_out" and w.asg(a).ended_at == due
    assert w.obligations() == {} and w.live(w.t).get(a) is None
    w.refuse("conflict", lambda: w.deliver(w.bob, a))


@pytest.mark.rules("R6.4-12", "R6.4-14", "R8-39", "L4-3")
def test_R6_4_14_the_judgment_deadline_wins_over_an_inflight_judgment(w):
    a = delivered(w, w.alice, w.bob, judge_within_s=120)
    due = w.asg(a).judge_by
    w.now = due - 1
    assert effective(w.asg(a), w.now) == "delivered"
    w.now = due
    assert effective(w.asg(a), w.now) == "undecided"
    for verdict, reason in (("adopt", None), ("reject", REASON)):
        r = w.refuse("conflict", lambda: w.judge(w.alice, a, verdict, reason))
        assert "deadline" in r.reason
    d = ok(w.expire(w.t))
    assert d.facts[0].outcome == "undecided" and d.result == {"thread": w.t, "expired": [a]}
    assert w.asg(a).state == "undecided" and w.obligations() == {}
    w.refuse("conflict", lambda: w.judge(w.alice, a))


@pytest.mark.rules("L4-3", "R6.4-12", "R6.4-13")
def test_L4_3_one_expiry_records_every_due_deadline_of_the_thread(w):
    _, a = w.assign(w.alice, w.t, w.bob, deliver_within_s=60)
    ok(w.take(w.bob, a))
    b = delivered(w, w.bob, w.carol, judge_within_s=30)
    _, c = w.assign(w.alice, w.t, w.carol, deliver_within_s=3600)
    ok(w.take(w.carol, c))
    w.advance(90)
    # In the order they fell due (b's judgment deadline came first).
    assert w.asg(b).judge_by < w.asg(a).deliver_by
    assert w.due(w.t) == [b, a]
    d = ok(w.expire(w.t))
    assert [(f.assignment, f.outcome) for f in d.facts] == [(b, "undecided"), (a, "timed_out")]
    assert w.asg(c).state == "taken"
    w.refuse("conflict", lambda: w.expire(w.t))
    w.refuse("not_found", lambda: w.expire("th_999999"))


@pytest.mark.rules("R6.4-12")
def test_R6_4_12_undecided_is_not_a_rejection(w):
    a = delivered(w, w.alice, w.bob, judge_within_s=1)
    w.advance(1)
    ok(w.expire(w.t))
    s = w.asg(a)
    assert s.state == "undecided" and s.reason is None and s.judged_at is None
    assert s.pin_memory is not None  # the delivery itself stands


@pytest.mark.rules("R6.4-17")
def test_R6_4_17_the_six_terminal_states(w):
    assert TERMINAL == {"adopted", "rejected", "undecided", "dropped", "timed_out", "voided"}
    assert set(typing.get_args(StateName)) == TERMINAL | {"open", "taken", "delivered"}
    assert ended_in_every_way(w).keys() == TERMINAL  # each is reachable


def ended_in_every_way(w: World) -> dict[str, str]:
    out: dict[str, str] = {}
    a = delivered(w, w.alice, w.bob)
    ok(w.judge(w.alice, a))
    out["adopted"] = a
    a = delivered(w, w.alice, w.bob)
    ok(w.judge(w.alice, a, "reject", REASON))
    out["rejected"] = a
    _, a = w.assign(w.alice, w.t, w.bob)
    ok(w.take(w.bob, a))
    ok(w.drop(w.bob, a))
    out["dropped"] = a
    _, a = w.assign(w.alice, w.t, w.bob)
    ok(w.void(w.alice, a))
    out["voided"] = a
    _, a = w.assign(w.alice, w.t, w.bob, deliver_within_s=10)
    ok(w.take(w.bob, a))
    b = delivered(w, w.alice, w.bob, judge_within_s=10)
    w.advance(10)
    ok(w.expire(w.t))
    out["timed_out"], out["undecided"] = a, b
    return out


@pytest.mark.rules("R6.4-18", "R6.4-17", "L5-2")
def test_R6_4_18_terminal_states_are_irreversible(w):
    ended = ended_in_every_way(w)
    assert {state: w.asg(a).state for state, a in ended.items()} == {s: s for s in ended}
    for a in ended.values():
        # The voided one was never taken, so bob is no taker there (D5: permission first).
        as_taker = "conflict" if w.asg(a).taker == w.bob else "forbidden"
        for code, action in (
            ("conflict", lambda: w.take(w.bob, a)),
            ("conflict", lambda: w.take(w.bob, a, deliver=text())),
            (as_taker, lambda: w.deliver(w.bob, a)),
            ("conflict", lambda: w.judge(w.alice, a)),
            ("conflict", lambda: w.judge(w.alice, a, "reject", REASON)),
            (as_taker, lambda: w.drop(w.bob, a)),
            ("conflict", lambda: w.void(w.alice, a)),
        ):
            w.refuse(code, action)
    # Nothing that happens to the Thread later touches them.
    streams = {a: len(w.streams[a]) for a in ended.values()}
    ok(w.leave(w.bob, w.t))
    ok(w.close(w.alice, w.t))
    assert {a: len(w.streams[a]) for a in ended.values()} == streams
    w.refuse("conflict", lambda: w.expire(w.t))


# --- L5-2 each obligation ends at most once ------------------------------------------------------------


@pytest.mark.rules("L5-2", "R10.2-4")
def test_L5_2_every_obligation_and_delivery_ends_exactly_once(w):
    seen: list[str] = []

    def step(d):
        d = ok(d)
        seen.extend(x for x in d.result.get("ended", []) if x.startswith("ob_"))
        return d

    n, a = w.assign(w.alice, w.t, w.bob, ask=[w.bob, w.carol])
    step(w.take(w.bob, a, deliver=text()))
    step(w.judge(w.alice, a, "reject", REASON))
    step(w.handle(w.carol, w.t, n))
    _, b = w.assign(w.alice, w.t, w.carol, ask=[w.carol])
    step(w.take(w.carol, b))
    step(w.post(w.carol, w.t, reply_to=n))  # no pending response to n any more: nothing ends; alice responds
    c = delivered(w, w.carol, w.bob)
    step(w.leave(w.carol, w.t))  # voids b (its deliver obligation), forfeits c
    step(w.close(w.alice, w.t))
    assert len(seen) == len(set(seen))
    assert set(seen) == {
        ob_id("respond", entry_obj(w.t, n), w.bob),
        ob_id("deliver", a, w.bob),
        ob_id("judge", a, w.alice),
        ob_id("respond", entry_obj(w.t, n), w.carol),
        ob_id("respond", entry_obj(w.t, n + 1), w.carol),
        ob_id("deliver", b, w.carol),
        ob_id("judge", c, w.carol),
        ob_id("respond", entry_obj(w.t, n + 2), w.alice),  # ended by closing
    }
    assert w.obligations() == {}
    assert [type(f) for f in w.streams[a]].count(AssignmentJudged) == 1
    assert [type(f) for f in w.streams[a]].count(AssignmentDelivered) == 1


# --- R9-11 delivery pins are read by current members only ---------------------------------------------


@pytest.mark.rules("R9-11", "R9-2", "R12-9")
def test_R9_11_a_former_member_can_no_longer_reach_a_delivery(w):
    a = delivered(w, w.alice, w.bob)
    assert all(readable_thread(w.thread(w.t), w.t, w.member(w.t, m)) is None for m in (w.alice, w.bob, w.carol, w.dave))
    ok(w.leave(w.carol, w.t))
    missing = w.refuse("not_found", lambda: w.judge(w.carol, "as_999999"))
    r = w.refuse("not_found", lambda: w.judge(w.carol, a))
    assert r.reason.replace(a, "<id>") == missing.reason.replace("as_999999", "<id>")
    assert readable_thread(w.thread(w.t), w.t, w.member(w.t, w.carol)) is not None
