"""An assignment (§6.4) and a Task engagement (§7.3) side by side.

They share one mechanism — the commands and the deliver/drop/judge/expire
ladder of ``core/work.py`` over each kind's lifecycle table — and the spec keeps
them distinct concepts (R2): every place where the two behave differently is a
rule of one of them. Each test here puts such a difference side by side, so a
change to the shared ladder that erased it would fail.
"""

from __future__ import annotations

import pytest

from kungfud.core import assignment as asg_core
from kungfud.core import engagement as eng_core

from .test_task import REASON, Cast, TaskWorld
from .world import World, ok, text


@pytest.fixture
def w() -> World:
    """A Thread: alice governs; bob and carol speak."""
    w = World()
    w.alice, w.bob, w.carol = w.register("alice"), w.register("bob"), w.register("carol")
    w.t = w.create_thread(w.alice)
    w.add(w.t, w.alice, w.bob)
    w.add(w.t, w.alice, w.carol)
    return w


@pytest.fixture
def tasks() -> tuple[TaskWorld, Cast]:
    """A Task world and its usual cast: alice authors, jude judges, bob and carol take."""
    tw = TaskWorld()
    return tw, Cast(tw)


@pytest.mark.rules("R9-9", "R9-16", "R6.4-22", "R7.3-9")
def test_R9_9_R9_16_a_member_reads_every_assignment_of_its_thread_but_only_a_party_reads_an_engagement(w, tasks):
    tw, a = tasks
    _, asg = w.assign(w.alice, w.t, w.bob)
    ok(w.take(w.bob, asg))
    # carol, a member who did not take it, reads it (R9-9): the refusal names who delivers.
    r = w.refuse("forbidden", lambda: w.deliver(w.carol, asg), "stop")
    assert (r.reason, r.rule) == (f"only the member that took assignment {asg} delivers it", None)
    e = tw.engage(a.bob, tw.new_task(a.alice))
    # carol, no party to the engagement (R9-16), learns nothing of it.
    r = tw.refuse("not_found", lambda: tw.deliver(a.carol, e), "stop")
    assert r.reason == f"engagement {e} was not found, or you may not read it"
    # the author is a party but not the engaged agent: forbidden by R7.3-9.
    r = tw.refuse("forbidden", lambda: tw.deliver(a.alice, e), "stop")
    assert (r.reason, r.rule) == (f"only the engaged agent delivers engagement {e}", "R7.3-9")
    r = tw.refuse("forbidden", lambda: tw.drop(a.alice, e), "stop")
    assert (r.reason, r.rule) == (f"only the engaged agent may drop engagement {e}", "R7.3-9")


@pytest.mark.rules("R6.4-24", "R7-1", "R6.4-26", "R7.3-17")
def test_R6_4_24_R7_1_the_creator_judges_an_assignment_the_tasks_judge_an_engagement(w, tasks):
    tw, a = tasks
    _, asg = w.assign(w.alice, w.t, w.bob)
    ok(w.take(w.bob, asg, deliver=text("output")))
    r = w.refuse("forbidden", lambda: w.judge(w.bob, asg), "stop")
    assert (r.reason, r.rule) == (f"only the creator of assignment {asg} judges it", None)
    r = w.refuse("bad_request", lambda: w.judge(w.alice, asg, "reject", None), "revise")
    assert (r.reason, r.rule) == ('a rejection must carry a reason the taker can read: `"content": {"reason": "…"}`', "R6.4-26")
    e = tw.engage(a.bob, tw.new_task(a.alice, judge=a.jude), deliver=True)
    r = tw.refuse("forbidden", lambda: tw.judge(a.alice, e), "stop")  # the author, not the designated judge
    assert (r.reason, r.rule) == (f"only the judge of engagement {e} may judge it", "R7-1")
    r = tw.refuse("bad_request", lambda: tw.judge(a.jude, e, "reject", None), "revise")
    assert (r.reason, r.rule) == (
        'a rejection must carry a reason the engaged agent can read: `"content": {"reason": "…"}`', "R7.3-17"
    )


@pytest.mark.rules("R6.2-13", "R6.2-14")
def test_R6_2_13_a_forfeited_right_to_judge_is_refused_before_the_state_even_once_the_work_ended(w):
    _, asg = w.assign(w.carol, w.t, w.bob)
    ok(w.take(w.bob, asg, deliver=text("output")))
    ok(w.leave(w.carol, w.t))
    w.add(w.t, w.alice, w.carol)  # rejoining does not restore the right (R6.2-15)
    w.now = w.asg(asg).judge_by
    ok(w.expire(w.t))
    assert w.asg(asg).state == "undecided"
    for verdict in ("adopt", "reject"):
        r = w.refuse("forbidden", lambda: w.judge(w.carol, asg, verdict, REASON), "stop")
        assert r.rule == "R6.2-13" and "forfeited" in r.reason, r


@pytest.mark.rules("R7.4-2", "R6.4-24")
def test_R7_4_2_only_an_engagement_is_held_to_an_adoption_limit(w, tasks):
    tw, a = tasks
    for _ in range(2):  # a Thread's creator adopts as many assignments as it judges good
        _, asg = w.assign(w.alice, w.t, w.bob)
        ok(w.take(w.bob, asg, deliver=text("output")))
        assert ok(w.judge(w.alice, asg)).result["state"] == "adopted"
    t = tw.new_task(a.alice, adoption_limit=1)
    e1, e2 = tw.engage(a.bob, t, deliver=True), tw.engage(a.carol, t, deliver=True)
    ok(tw.judge(a.alice, e1))
    r = tw.refuse("conflict", lambda: tw.judge(a.alice, e2), "revise")
    assert r.hint is not None and r.hint.args == {"engagement": e2, "verdict": "reject"}
    ok(tw.reject(a.alice, e2))  # the one verdict left


@pytest.mark.rules("R6.4-29", "R7.3-20", "R7.3-21", "R7.3-22", "R7.3-23")
def test_R6_4_29_R7_3_20_an_assignment_can_be_voided_by_its_creator_nothing_cancels_an_engagement():
    assert asg_core.LIFECYCLE.parties["void"].field == "creator"
    assert "void" not in eng_core.LIFECYCLE.verbs and "void" not in eng_core.LIFECYCLE.parties
    assert not hasattr(eng_core, "decide_void")
    # Beyond voiding, the tables differ only in "take": an engagement is born taken (R7.3-2).
    assert asg_core.LIFECYCLE.verbs - eng_core.LIFECYCLE.verbs == {"take", "void"}
    assert eng_core.LIFECYCLE.verbs <= asg_core.LIFECYCLE.verbs
