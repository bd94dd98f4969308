"""§6.1 admission, §6.2 members and roles, §6.5 closing, §9 reading a Thread —
in the pure core, through an in-memory world (``world.py``).

Cites DECISIONS.md B8 (one live grant; reissue voids), B9 (joining again with
another role's grant), B14 (untaken work addressed to a departed member), B16
(a closed Thread), T2 (removal ends pending responses).
"""

from __future__ import annotations

import msgspec
import pytest

from kungfud.core import thread as thread_core
from kungfud.core.facts import (
    AdmissionIssued,
    AdmissionVoided,
    MemberJoined,
    MembershipEnded,
    RoleSet,
    ThreadClosed,
    ThreadCreated,
    entry_obj,
)
from kungfud.core.obligations import ob_id
from kungfud.core.pins import Pin
from kungfud.core.members import MemberState
from kungfud.core.thread import Grant, readable_thread, token_hash

from .world import HOUR, World, ok, spec, text


@pytest.fixture
def w() -> World:
    w = World()
    w.root = w.register("root", admin=True)
    w.alice = w.register("alice")
    w.bob = w.register("bob")
    w.carol = w.register("carol")
    w.dave = w.register("dave")
    w.t = w.create_thread(w.alice)
    return w


def trio(w: World) -> World:
    """alice governs; bob and carol speak; dave observes."""
    w.add(w.t, w.alice, w.bob)
    w.add(w.t, w.alice, w.carol)
    w.add(w.t, w.alice, w.dave, "observer")
    return w


# --- §6.1 creation and admission ------------------------------------------------------


@pytest.mark.rules("R6.1-1")
def test_R6_1_1_any_active_agent_creates_a_thread(w):
    d = ok(w.act(w.bob, thread_core.decide_create, thread_core.CreateThread(b'{"title":"t"}')))
    t = d.result["thread"]
    assert t.startswith("th_") and t != w.t
    assert d.facts == [ThreadCreated(at=w.now, by=w.bob, thread=t, creator=w.bob, content=b'{"title":"t"}')]


@pytest.mark.rules("R6.1-1", "R4-1")
def test_R6_1_1_deactivated_agent_may_not_create_a_thread(w):
    ok(w.deactivate(w.root, w.bob))
    w.refuse("forbidden", lambda: w.act(w.bob, thread_core.decide_create, thread_core.CreateThread()))


@pytest.mark.rules("R6.1-2")
def test_R6_1_2_creator_becomes_governor_of_an_open_thread(w):
    s = w.thread(w.t)
    assert s.status == "open" and s.open and s.closed_at is None
    assert w.members(w.t) == {w.alice: MemberState(w.t, w.alice, "governor", w.now, None)}
    assert w.governors(w.t) == [w.alice] and s.member_count == 1
    assert s.grant is None and s.entries == 0 and w.thread_pending(w.t) == {} and w.live(w.t) == {}
    assert w.memberships(w.alice) == {w.t: "governor"}


@pytest.mark.rules("R6.1-3")
def test_R6_1_3_joining_needs_the_live_grant(w):
    w.refuse("not_found", lambda: w.join(w.bob, w.t, "kt_guess"))  # no grant at all
    ok(w.admit(w.alice, w.t))
    w.refuse("not_found", lambda: w.join(w.bob, w.t, "kt_guess"))
    w.refuse("not_found", lambda: w.join(w.bob, None, w.tokens[w.t]))  # token matched no thread
    other = w.create_thread(w.carol)
    w.refuse("not_found", lambda: w.join(w.bob, other, w.tokens[w.t]))  # grant of another thread
    d = ok(w.join(w.bob, w.t))
    assert d.facts == [MemberJoined(at=w.now, by=w.bob, thread=w.t, agent=w.bob, role="speaker", admission=w.thread(w.t).grant.admission)]
    assert w.bob in w.members(w.t)


@pytest.mark.rules("R6.1-3", "R6.2-18", "R6.2-23")
def test_R6_1_3_R6_2_18_only_a_governor_issues_a_grant(w):
    trio(w)
    for agent in (w.bob, w.dave):  # speaker, observer
        r = w.refuse("forbidden", lambda: w.admit(agent, w.t))
        assert "governor" in r.reason
    w.refuse("not_found", lambda: w.admit(w.root, w.t))  # a non-member learns nothing (R9-4)
    d = ok(w.admit(w.alice, w.t))
    assert [type(f) for f in d.facts] == [AdmissionIssued]


@pytest.mark.rules("R6.1-4")
def test_R6_1_4_the_grant_binds_the_role_speaker_by_default(w):
    d = ok(w.act(w.alice, thread_core.decide_admit, thread_core.Admit(w.t)))
    w.tokens[w.t] = d.result["token"]
    assert d.result["role"] == "speaker" and d.facts[0].role == "speaker"
    assert ok(w.join(w.bob, w.t)).result["role"] == "speaker"
    for agent, role in ((w.carol, "observer"), (w.dave, "governor")):
        ok(w.admit(w.alice, w.t, role))
        assert ok(w.join(agent, w.t)).result["role"] == role
        assert w.members(w.t)[agent].role == role
        assert w.memberships(agent) == {w.t: role}


@pytest.mark.rules("R6.1-5", "R4-1")
def test_R6_1_5_deactivated_agent_may_not_join(w):
    ok(w.admit(w.alice, w.t))
    ok(w.deactivate(w.root, w.bob))
    w.refuse("forbidden", lambda: w.join(w.bob, w.t))


@pytest.mark.rules("R6.1-6", "R6.1-7", "R12-5")
def test_R6_1_6_R6_1_7_B8_issuing_a_grant_voids_the_previous_one(w):
    first = ok(w.admit(w.alice, w.t, "speaker"))
    old_token, old_grant = first.result["token"], first.result["admission"]
    second = ok(w.admit(w.alice, w.t, "observer"))
    assert second.result["token"] != old_token
    # B8: one live grant, of one role; the new fact names the grant it voided.
    assert second.facts[0].voided == old_grant
    assert w.thread(w.t).grant == Grant(second.result["admission"], "observer", token_hash(second.result["token"]), w.now)
    w.refuse("not_found", lambda: w.join(w.bob, w.t, old_token))
    assert ok(w.join(w.bob, w.t)).result["role"] == "observer"


@pytest.mark.rules("R6.1-8", "R6.2-19", "L2-7")
def test_R6_1_8_a_grant_is_voided_on_its_own(w):
    trio(w)
    admission = ok(w.admit(w.alice, w.t)).result["admission"]
    w.refuse("forbidden", lambda: w.void_admission(w.bob, w.t))
    w.refuse("forbidden", lambda: w.void_admission(w.dave, w.t))
    d = ok(w.void_admission(w.alice, w.t))
    assert d.facts == [AdmissionVoided(at=w.now, by=w.alice, thread=w.t, admission=admission)]
    assert w.thread(w.t).grant is None
    w.refuse("not_found", lambda: w.join(w.root, w.t))
    w.refuse("conflict", lambda: w.void_admission(w.alice, w.t))  # nothing to void (L2-7)


@pytest.mark.rules("R6.1-9", "L3-6", "R12-3", "R12-4")
def test_R6_1_9_the_token_appears_only_in_the_issuing_result(w):
    d = ok(w.admit(w.alice, w.t))
    token = d.result["token"]
    assert token.startswith("kt_")
    assert d.facts[0].token_hash == token_hash(token)
    recorded = msgspec.json.encode([d.facts, sorted(d.states.items())])
    assert token.encode() not in recorded  # only its hash is kept; replays are the store's (B4)
    joined = ok(w.join(w.bob, w.t))
    assert token.encode() not in msgspec.json.encode([joined.result, joined.facts, sorted(joined.states.items())])


@pytest.mark.rules("R6.1-10", "R6.1-11")
def test_R6_1_10_R6_1_11_a_bearer_grant_records_no_recipient_and_needs_no_consent(w):
    issued = ok(w.admit(w.alice, w.t))
    assert "agent" not in AdmissionIssued.__struct_fields__ and "to" not in AdmissionIssued.__struct_fields__
    # Whoever holds it joins, each in one action recording only the join.
    for agent in (w.bob, w.carol):
        d = ok(w.join(agent, w.t))
        assert d.facts == [
            MemberJoined(at=w.now, by=agent, thread=w.t, agent=agent, role="speaker", admission=issued.result["admission"])
        ]


@pytest.mark.rules("R6.2-16")
def test_R6_2_16_a_membership_records_its_admission_and_when(w):
    admission = ok(w.admit(w.alice, w.t)).result["admission"]
    w.advance(60)
    ok(w.join(w.bob, w.t))
    assert w.members(w.t)[w.bob] == MemberState(w.t, w.bob, "speaker", w.now, admission)


@pytest.mark.rules("L2-5", "L2-7")
def test_L2_5_B9_joining_again_returns_the_existing_membership_with_no_fact(w):
    ok(w.admit(w.alice, w.t, "speaker"))
    first = ok(w.join(w.bob, w.t))
    w.advance(60)
    ok(w.admit(w.alice, w.t, "governor"))  # B9: a grant of another role
    before = w.snapshot()
    again = ok(w.join(w.bob, w.t))
    assert again.facts == [] and again.states == {}
    assert again.result == {**first.result, "existing": True}
    assert first.result["existing"] is False
    assert w.snapshot() == before
    assert w.members(w.t)[w.bob].role == "speaker"
    # The creator too: joining its own thread changes nothing.
    assert ok(w.join(w.alice, w.t)).result["role"] == "governor"


# --- §6.2 roles ------------------------------------------------------------------------------


@pytest.mark.rules("R6.2-17", "R6.2-20", "R6.2-21", "R6.2-22")
def test_R6_2_17_to_22_a_governor_speaks_and_governs(w):
    trio(w)
    d = ok(w.post(w.alice, w.t))
    assert d.result["entry"] == 1
    _, asg = w.assign(w.alice, w.t, w.bob)
    assert w.asg(asg).creator == w.alice
    ok(w.set_role(w.alice, w.t, w.carol, "observer"))
    ok(w.remove(w.alice, w.t, w.carol))
    ok(w.close(w.alice, w.t))
    assert w.thread(w.t).status == "closed"


@pytest.mark.rules("R6.2-23", "R6.2-18", "R6.2-19", "R6.2-20", "R6.2-21", "R6.2-22", "R6.5-1")
def test_R6_2_23_a_speaker_speaks_and_governs_nothing(w):
    trio(w)
    ok(w.post(w.bob, w.t))
    w.assign(w.bob, w.t, w.carol)
    for action in (
        lambda: w.admit(w.bob, w.t),
        lambda: w.void_admission(w.bob, w.t),
        lambda: w.remove(w.bob, w.t, w.carol),
        lambda: w.set_role(w.bob, w.t, w.carol, "observer"),
        lambda: w.set_role(w.bob, w.t, w.bob, "governor"),
        lambda: w.close(w.bob, w.t),
    ):
        w.refuse("forbidden", action, "stop")


@pytest.mark.rules("R6.2-24", "R6.3-1", "R6.4-1", "R9-9")
def test_R6_2_24_an_observer_reads_and_does_not_speak(w):
    trio(w)
    ok(w.post(w.alice, w.t))
    assert readable_thread(w.thread(w.t), w.t, w.member(w.t, w.dave)) is None
    w.refuse("forbidden", lambda: w.post(w.dave, w.t))
    w.refuse("forbidden", lambda: w.post(w.dave, w.t, reply_to=1))
    w.refuse("forbidden", lambda: w.post(w.dave, w.t, assign=spec(w.bob)))
    for action in (
        lambda: w.admit(w.dave, w.t),
        lambda: w.remove(w.dave, w.t, w.bob),
        lambda: w.set_role(w.dave, w.t, w.dave, "speaker"),
        lambda: w.close(w.dave, w.t),
    ):
        w.refuse("forbidden", action)


@pytest.mark.rules("R6.2-2", "R6.2-20", "L2-7")
def test_R6_2_2_a_governor_removes_members(w):
    trio(w)
    d = ok(w.remove(w.alice, w.t, w.dave))
    assert d.facts == [MembershipEnded(at=w.now, by=w.alice, thread=w.t, agent=w.dave, why="removed")]
    assert w.dave not in w.members(w.t) and w.memberships(w.dave) == {}
    w.refuse("conflict", lambda: w.remove(w.alice, w.t, w.dave))  # no longer a member: nothing to do
    w.refuse("conflict", lambda: w.remove(w.alice, w.t, w.root))
    r = w.refuse("bad_request", lambda: w.remove(w.alice, w.t, w.alice))
    assert r.hint is not None and r.hint.op == "thread.leave"


@pytest.mark.rules("R6.2-3", "R6.2-21")
def test_R6_2_3_a_governor_changes_roles_each_change_a_fact(w):
    trio(w)
    for role in ("governor", "observer", "speaker"):
        d = ok(w.set_role(w.alice, w.t, w.bob, role))
        assert d.facts == [RoleSet(at=w.now, by=w.alice, thread=w.t, agent=w.bob, role=role)]
        assert w.members(w.t)[w.bob].role == role
        assert w.memberships(w.bob) == {w.t: role}
    w.refuse("conflict", lambda: w.set_role(w.alice, w.t, w.root, "speaker"))  # not a member


@pytest.mark.rules("L2-7", "R6.2-3")
def test_L2_7_setting_a_role_already_held_is_a_conflict(w):
    trio(w)
    for agent, role in ((w.bob, "speaker"), (w.dave, "observer"), (w.alice, "governor")):
        r = w.refuse("conflict", lambda: w.set_role(w.alice, w.t, agent, role))
        assert agent in r.reason and role in r.reason


@pytest.mark.rules("R6.2-4")
def test_R6_2_4_the_last_governor_cannot_be_demoted(w):
    trio(w)
    for role in ("speaker", "observer"):
        w.refuse("conflict", lambda: w.set_role(w.alice, w.t, w.alice, role))
    ok(w.set_role(w.alice, w.t, w.bob, "governor"))
    ok(w.set_role(w.alice, w.t, w.alice, "speaker"))  # another governor remains
    assert w.governors(w.t) == [w.bob]
    w.refuse("conflict", lambda: w.set_role(w.bob, w.t, w.bob, "observer"))


@pytest.mark.rules("R6.2-4", "R6.2-5", "R6.2-1")
def test_R6_2_5_a_sole_governor_hands_over_before_leaving(w):
    trio(w)
    r = w.refuse("conflict", lambda: w.leave(w.alice, w.t))
    assert r.hint is not None and r.hint.op == "thread.close"
    assert w.alice in w.members(w.t)
    ok(w.set_role(w.alice, w.t, w.carol, "governor"))
    ok(w.leave(w.alice, w.t))
    assert w.governors(w.t) == [w.carol] and w.thread(w.t).open


@pytest.mark.rules("R6.2-1", "R9-2")
def test_R6_2_1_a_member_may_leave_and_then_reads_nothing(w):
    trio(w)
    for agent in (w.bob, w.dave):
        d = ok(w.leave(agent, w.t))
        assert d.facts == [MembershipEnded(at=w.now, by=agent, thread=w.t, agent=agent, why="left")]
        assert d.result == {"thread": w.t, "ended": []}
        assert agent not in w.members(w.t) and w.memberships(agent) == {}
        r = readable_thread(w.thread(w.t), w.t, w.member(w.t, agent))
        assert r is not None and r.code == "not_found"
        w.refuse("not_found", lambda: w.leave(agent, w.t))


@pytest.mark.rules("R6.2-8", "R8-27")
def test_R6_2_8_demotion_to_observer_ends_pending_responses(w):
    w.add(w.t, w.alice, w.bob)
    ok(w.post(w.alice, w.t))  # two speakers: bob responds (rule 3)
    ok(w.post(w.alice, w.t, ask=[w.bob]))
    assert w.pending(w.t, w.bob) == [1, 2]
    d = ok(w.set_role(w.alice, w.t, w.bob, "observer"))
    assert d.facts == [RoleSet(at=w.now, by=w.alice, thread=w.t, agent=w.bob, role="observer", responses=[1, 2])]
    assert d.result["ended"] == [ob_id("respond", entry_obj(w.t, n), w.bob) for n in (1, 2)]
    assert w.pending(w.t, w.bob) == [] and w.obligations_of(w.bob) == set()
    assert [w.response(w.t, n, w.bob) for n in (1, 2)] == ["ended", "ended"]
    # Promotion back revives nothing.
    ok(w.set_role(w.alice, w.t, w.bob, "speaker"))
    assert w.pending(w.t, w.bob) == []


@pytest.mark.rules("R6.2-8")
def test_R6_2_8_other_role_changes_keep_pending_responses(w):
    w.add(w.t, w.alice, w.bob)
    w.add(w.t, w.alice, w.carol, "governor")
    ok(w.post(w.carol, w.t, ask=[w.alice, w.bob]))
    ok(w.set_role(w.carol, w.t, w.alice, "speaker"))  # governor → speaker: still may speak
    ok(w.set_role(w.carol, w.t, w.bob, "governor"))
    assert w.pending(w.t, w.alice) == [1] and w.pending(w.t, w.bob) == [1]


# --- §6.2 when a membership ends ------------------------------------------------------------


@pytest.mark.rules("R6.2-10", "R8-27")
def test_R6_2_10_leaving_ends_pending_responses_in_the_same_fact(w):
    trio(w)
    ok(w.post(w.alice, w.t, ask=[w.bob, w.carol]))
    ok(w.post(w.carol, w.t, ask=[w.bob]))
    d = ok(w.leave(w.bob, w.t))
    (fact,) = d.facts
    assert fact.responses == [1, 2]
    assert set(fact.objects()) >= {entry_obj(w.t, 1), entry_obj(w.t, 2)}
    assert d.result["ended"] == [ob_id("respond", entry_obj(w.t, n), w.bob) for n in (1, 2)]
    assert w.response(w.t, 1, w.bob) == "ended" and w.response(w.t, 1, w.carol) == "pending"
    assert w.pending(w.t, w.bob) == [] and w.obligations_of(w.bob) == set()


@pytest.mark.rules("R6.2-10", "R8-27")
def test_T2_removal_ends_pending_responses(w):
    trio(w)
    ok(w.post(w.alice, w.t, ask=[w.carol]))
    d = ok(w.remove(w.alice, w.t, w.carol))
    assert d.facts[0].responses == [1] and d.facts[0].why == "removed"
    assert w.response(w.t, 1, w.carol) == "ended"
    assert w.obligations() == {}


@pytest.mark.rules("R6.2-11", "R8-34")
def test_R6_2_11_membership_end_voids_undelivered_assignments_it_took(w):
    trio(w)
    _, taken = w.assign(w.alice, w.t, w.bob)
    _, delivered = w.assign(w.alice, w.t, w.bob)
    ok(w.take(w.bob, taken))
    ok(w.take(w.bob, delivered, deliver=text("done")))
    d = ok(w.leave(w.bob, w.t))
    assert d.facts[0].voided == [taken] and d.facts[0].forfeited == []
    assert ob_id("deliver", taken, w.bob) in d.result["ended"] and taken in d.result["ended"]
    assert w.asg(taken).state == "voided" and w.asg(taken).ended_at == w.now
    # Its delivered work still awaits the creator's judgment.
    assert w.asg(delivered).state == "delivered"
    assert w.obligations_of(w.alice) == {("judge", delivered)}
    assert taken not in w.live(w.t)


@pytest.mark.rules("R6.2-12", "R8-34")
def test_R6_2_12_membership_end_voids_undelivered_assignments_it_created(w):
    trio(w)
    _, untaken = w.assign(w.carol, w.t, w.bob)
    _, taken = w.assign(w.carol, w.t, w.bob)
    _, own = w.assign(w.carol, w.t, w.carol)
    ok(w.take(w.bob, taken))
    ok(w.take(w.carol, own))
    d = ok(w.remove(w.alice, w.t, w.carol))
    assert d.facts[0].voided == sorted([untaken, taken, own])
    assert {w.asg(a).state for a in (untaken, taken, own)} == {"voided"}
    assert w.obligations() == {}
    assert set(d.result["ended"]) == {ob_id("deliver", taken, w.bob), ob_id("deliver", own, w.carol), untaken, taken, own}


@pytest.mark.rules("R6.2-13", "R6.2-14", "R6.2-15", "R6.4-24", "R8-39")
def test_R6_2_13_R6_2_14_a_creator_who_leaves_forfeits_judging_its_delivered_work(w):
    trio(w)
    _, a = w.assign(w.carol, w.t, w.bob)
    ok(w.take(w.bob, a, deliver=text("done")))
    judge_by = w.asg(a).judge_by
    assert w.obligations_of(w.carol) == {("judge", a)}
    d = ok(w.leave(w.carol, w.t))
    assert d.facts[0].forfeited == [a] and d.facts[0].voided == []
    assert d.result["ended"] == [ob_id("judge", a, w.carol)]
    assert w.asg(a).state == "delivered" and w.asg(a).forfeited and w.asg(a).judge_by == judge_by
    assert w.obligations() == {}
    # R6.2-15: rejoining is a new membership; the right stays forfeited.
    w.add(w.t, w.alice, w.carol)
    r = w.refuse("forbidden", lambda: w.judge(w.carol, a))
    assert "forfeited" in r.reason
    w.refuse("forbidden", lambda: w.judge(w.carol, a, "reject", b'{"reason":"no"}'))
    assert w.obligations() == {}
    # R6.2-14: it settles as undecided at its judgment deadline.
    w.now = judge_by
    e = ok(w.expire(w.t))
    assert e.result["expired"] == [a]
    assert w.asg(a).state == "undecided"


@pytest.mark.rules("R6.2-13", "L5-2")
def test_R6_2_13_a_second_departure_does_not_forfeit_again(w):
    trio(w)
    _, a = w.assign(w.carol, w.t, w.bob)
    ok(w.take(w.bob, a, deliver=text()))
    ok(w.leave(w.carol, w.t))
    w.add(w.t, w.alice, w.carol)
    d = ok(w.leave(w.carol, w.t))
    assert d.facts[0].forfeited == [] and d.result["ended"] == []


@pytest.mark.rules("R6.2-11", "R6.2-12", "R6.4-29")
def test_B14_untaken_assignment_to_a_departed_member_is_not_voided(w):
    trio(w)
    _, a = w.assign(w.alice, w.t, w.bob)
    _, b = w.assign(w.alice, w.t, w.bob)
    d = ok(w.leave(w.bob, w.t))
    assert d.facts[0].voided == []
    assert w.asg(a).state == "open" and w.asg(b).state == "open"
    w.refuse("not_found", lambda: w.take(w.bob, a))  # not a member: cannot even read it
    ok(w.void(w.alice, b))  # the creator may void it at any time
    w.add(w.t, w.alice, w.bob)
    ok(w.take(w.bob, a))  # after rejoining, the addressee may take it
    assert w.asg(a).taker == w.bob and w.asg(b).state == "voided"


@pytest.mark.rules("R6.2-15", "R6.2-10", "R6.2-11")
def test_R6_2_15_rejoining_revives_nothing(w):
    trio(w)
    ok(w.post(w.alice, w.t, ask=[w.bob]))
    _, a = w.assign(w.alice, w.t, w.bob)
    ok(w.take(w.bob, a))
    first_join = w.members(w.t)[w.bob]
    ok(w.leave(w.bob, w.t))
    w.advance(60)
    ok(w.admit(w.alice, w.t, "speaker"))
    d = ok(w.join(w.bob, w.t))
    assert d.result["existing"] is False and len(d.facts) == 1
    m = w.members(w.t)[w.bob]
    assert m.joined_at == w.now != first_join.joined_at and m.admission != first_join.admission
    assert w.pending(w.t, w.bob) == [] and w.response(w.t, 1, w.bob) == "ended"
    assert w.asg(a).state == "voided"
    assert w.obligations_of(w.bob) == set()
    w.refuse("conflict", lambda: w.deliver(w.bob, a))


# --- §6.5 closing ---------------------------------------------------------------------------------


@pytest.mark.rules("R6.5-1", "R6.5-2", "R6.2-22")
def test_R6_5_1_a_governor_closes_and_closing_is_terminal(w):
    trio(w)
    w.refuse("forbidden", lambda: w.close(w.bob, w.t))
    admission = w.thread(w.t).grant.admission  # trio() left dave's grant live
    d = ok(w.close(w.alice, w.t))  # trio() left dave's grant live
    assert d.facts == [ThreadClosed(at=w.now, by=w.alice, thread=w.t, admission=admission)]
    assert d.result == {"thread": w.t, "status": "closed", "ended": []}
    s = w.thread(w.t)
    assert s.status == "closed" and s.closed_at == w.now and not s.open
    w.refuse("conflict", lambda: w.close(w.alice, w.t))


@pytest.mark.rules("R6.5-3", "R8-28")
def test_R6_5_3_closing_ends_every_pending_response(w):
    trio(w)
    ok(w.post(w.alice, w.t, ask=[w.bob, w.carol]))
    ok(w.post(w.bob, w.t, ask=[w.alice]))
    d = ok(w.close(w.alice, w.t))
    assert d.facts[0].responses == [(1, w.bob), (1, w.carol), (2, w.alice)]
    assert set(d.facts[0].objects()) >= {entry_obj(w.t, 1), entry_obj(w.t, 2)}
    assert {w.response(w.t, 1, a) for a in (w.bob, w.carol)} == {"ended"}
    assert w.response(w.t, 2, w.alice) == "ended"
    assert w.thread_pending(w.t) == {} and w.obligations() == {}


@pytest.mark.rules("R6.5-4", "R8-34")
def test_R6_5_4_closing_voids_every_undelivered_assignment(w):
    trio(w)
    _, untaken = w.assign(w.alice, w.t, w.bob)
    _, taken = w.assign(w.bob, w.t, w.carol)
    ok(w.take(w.carol, taken))
    d = ok(w.close(w.alice, w.t))
    assert d.facts[0].voided == sorted([untaken, taken])
    assert ob_id("deliver", taken, w.carol) in d.result["ended"]
    assert w.asg(untaken).state == "voided" and w.asg(taken).state == "voided"
    assert w.live(w.t) == {}


@pytest.mark.rules("R6.5-5", "R6.5-6", "R6.4-12", "R8-39")
def test_R6_5_5_R6_5_6_delivered_work_keeps_its_deadline_and_its_judge(w):
    trio(w)
    _, a = w.assign(w.bob, w.t, w.carol)
    _, b = w.assign(w.bob, w.t, w.carol)
    ok(w.take(w.carol, a, deliver=text()))
    ok(w.take(w.carol, b, deliver=text()))
    due = {x: w.asg(x).judge_by for x in (a, b)}
    d = ok(w.close(w.alice, w.t))
    assert d.facts[0].voided == []
    assert {x: w.asg(x).judge_by for x in (a, b)} == due
    assert w.obligations_of(w.bob) == {("judge", a), ("judge", b)}
    assert ok(w.judge(w.bob, a, "reject", b'{"reason":"incomplete"}')).result["state"] == "rejected"
    w.now = due[b]
    ok(w.expire(w.t))
    assert w.asg(b).state == "undecided"


@pytest.mark.rules("R6.5-7", "R12-6")
def test_R6_5_7_closing_voids_the_admission(w):
    admission = ok(w.admit(w.alice, w.t)).result["admission"]
    d = ok(w.close(w.alice, w.t))
    assert d.facts[0].admission == admission
    assert w.thread(w.t).grant is None
    w.refuse("not_found", lambda: w.join(w.bob, w.t))


@pytest.mark.rules("R6.5-8", "R9-1", "R9-9")
def test_R6_5_8_memberships_remain_and_members_still_read(w):
    trio(w)
    members = dict(w.members(w.t))
    ok(w.close(w.alice, w.t))
    assert w.members(w.t) == members
    for agent in members:
        assert readable_thread(w.thread(w.t), w.t, w.member(w.t, agent)) is None
        assert w.t in w.memberships(agent)
    assert readable_thread(w.thread(w.t), w.t, w.member(w.t, w.root)) is not None


@pytest.mark.rules("R6.5-9", "R6.5-2", "R6.5-11")
def test_R6_5_9_B16_a_closed_thread_is_read_only(w):
    trio(w)
    ok(w.post(w.alice, w.t, ask=[w.bob]))
    _, a = w.assign(w.alice, w.t, w.bob)
    ok(w.admit(w.alice, w.t))
    ok(w.close(w.alice, w.t))
    for action in (
        lambda: w.post(w.alice, w.t),
        lambda: w.post(w.bob, w.t, reply_to=1),
        lambda: w.post(w.alice, w.t, assign=spec(w.bob)),
        lambda: w.admit(w.alice, w.t),
        lambda: w.void_admission(w.alice, w.t),
        lambda: w.set_role(w.alice, w.t, w.bob, "governor"),
        lambda: w.remove(w.alice, w.t, w.bob),
        lambda: w.close(w.alice, w.t),
        lambda: w.handle(w.bob, w.t, 1),
        lambda: w.retract(w.alice, w.t, 1),
        lambda: w.take(w.bob, a),
        lambda: w.void(w.alice, a),
    ):
        w.refuse("conflict", action)
    assert w.thread(w.t).status == "closed"
    assert not any(name.startswith("decide_") and "open" in name for name in dir(thread_core))


@pytest.mark.rules("R6.5-10", "R6.2-1", "R6.2-5")
def test_R6_5_10_members_may_leave_a_closed_thread_even_the_sole_governor(w):
    trio(w)
    ok(w.close(w.alice, w.t))
    for agent in (w.bob, w.alice, w.dave):
        ok(w.leave(agent, w.t))
    assert set(w.members(w.t)) == {w.carol}
    assert w.thread(w.t).status == "closed"  # no governor, and still closed, not reopened


@pytest.mark.rules("R6.5-12", "R5-8")
def test_R6_5_12_a_new_thread_may_pin_the_same_memory_versions(w):
    mid = w.memory(w.alice, versions=2)
    ok(w.post(w.alice, w.t, pin=Pin(memory=mid, version=1)))
    ok(w.close(w.alice, w.t))
    t2 = w.create_thread(w.alice)
    d = ok(w.post(w.alice, t2, pin=Pin(memory=mid, version=1)))
    assert d.result["pin"] == {"memory": mid, "version": 1}
    assert (w.entry(t2, 1).pin_memory, w.entry(t2, 1).pin_version) == (mid, 1)


@pytest.mark.rules("R6.5-13", "R6.3-3")
def test_R6_5_13_replies_do_not_cross_threads(w):
    for _ in range(3):
        ok(w.post(w.alice, w.t))
    t2 = w.create_thread(w.alice)
    ok(w.post(w.alice, t2))
    w.refuse("not_found", lambda: w.post(w.alice, t2, reply_to=3))
    assert ok(w.post(w.alice, t2, reply_to=1)).facts[-1].reply_to == 1


# --- §9 reading a Thread ------------------------------------------------------------------------


@pytest.mark.rules("R9-9", "R9-4", "R12-9")
def test_R9_9_only_current_members_read_a_thread_worded_as_a_missing_id(w):
    trio(w)
    state = w.thread(w.t)
    for agent in (w.alice, w.bob, w.dave):
        assert readable_thread(state, w.t, w.member(w.t, agent)) is None
    outsider = readable_thread(state, w.t, w.member(w.t, w.root))
    missing = readable_thread(None, w.t, w.member(w.t, w.root))
    assert outsider is not None and outsider == missing
    assert outsider.code == "not_found"


@pytest.mark.rules("R9-2", "R6.2-10")
def test_R9_2_an_ended_membership_ends_reading_and_acting(w):
    trio(w)
    ok(w.post(w.alice, w.t, ask=[w.bob, w.carol]))
    ok(w.leave(w.bob, w.t))
    ok(w.remove(w.alice, w.t, w.carol))
    ok(w.deactivate(w.root, w.dave))
    state = w.thread(w.t)
    for agent in (w.bob, w.carol):
        assert readable_thread(state, w.t, w.member(w.t, agent)) == readable_thread(None, w.t, w.member(w.t, agent))
        w.refuse("not_found", lambda: w.post(agent, w.t))
        w.refuse("not_found", lambda: w.handle(agent, w.t, 1))
    assert readable_thread(state, w.t, w.member(w.t, w.dave)) is not None


@pytest.mark.rules("R6.2-4", "R6.2-5")
def test_R6_2_4_an_open_thread_keeps_a_governor_through_removal(w):
    trio(w)
    ok(w.set_role(w.alice, w.t, w.bob, "governor"))
    ok(w.remove(w.bob, w.t, w.alice))  # one governor removes another
    assert w.governors(w.t) == [w.bob]
    w.refuse("conflict", lambda: w.leave(w.bob, w.t))


@pytest.mark.rules("R6.4-6")
def test_thread_next_due_follows_running_deadlines_only(w):
    """The Thread's deadline index: untaken work runs no deadline (R6.4-6)."""
    trio(w)
    _, a = w.assign(w.alice, w.t, w.bob, deliver_within_s=HOUR)
    assert w.next_due(w.t) is None
    ok(w.take(w.bob, a))
    assert w.next_due(w.t) == w.now + HOUR * 1000
