"""§7.2 audience against every revision: no sequence of judge changes,
eligibility changes, pauses and resumes lets an agent outside a restricted
Task's creation-time audience take it (R7.2-3, R7.2-4, R7.3-1).

Reading the contract layer (D22: every judge of any version reads it) is not
being in the audience (security review H3: a former judge took the Task).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import pytest

from kungfud.core.engagement import take_refusal
from kungfud.core.task import in_audience, may_read_contract
from kungfud.errors import Rejection

from .test_task import Cast, TaskWorld, ok

# Agents by index into the cast: 0 alice (author), 1 jude, 2 bob, 3 carol, 4 dave, 5 eve.
AGENT = st.integers(0, 5)
STEP = st.one_of(
    st.tuples(st.just("revise"), st.one_of(st.none(), AGENT), st.one_of(st.none(), st.lists(AGENT, max_size=4, unique=True))),
    st.tuples(st.just("pause"), st.none(), st.none()),
    st.tuples(st.just("resume"), st.none(), st.none()),
    st.tuples(st.just("take"), AGENT, st.none()),
)


@pytest.mark.rules("R7.2-3", "R7.2-4", "R7.3-1")
@settings(max_examples=400, deadline=None, derandomize=True)
@given(
    audience=st.lists(st.integers(2, 5), min_size=1, max_size=3, unique=True),
    first_judge=st.one_of(st.none(), AGENT),
    steps=st.lists(STEP, max_size=12),
)
def test_R7_2_3_no_revision_sequence_lets_an_agent_outside_the_audience_take(audience, first_judge, steps):
    w = TaskWorld()
    a = Cast(w)
    cast = [a.alice, a.jude, a.bob, a.carol, a.dave, a.eve]
    named = [cast[i] for i in audience]
    judge = None if first_judge in (None, 0) else cast[first_judge]
    t = w.new_task(a.alice, named, judge=judge)
    for kind, x, y in steps:
        if kind == "revise":
            j = None if x in (None, 0) else cast[x]
            eligibility = None if y is None else [cast[i] for i in y]
            w.revise(a.alice, t, judge=j, eligibility=eligibility)
        elif kind == "pause":
            w.pause(a.alice, t)
        elif kind == "resume":
            w.resume(a.alice, t)
        else:
            taker = cast[x]
            r = w.take(taker, t)
            if taker not in named:
                assert isinstance(r, Rejection), f"{taker} outside the audience {named} took the Task"
        # After every step: nobody outside the audience is one the Task is offered to,
        # even when it may read the contract (a judge of any version, D22).
        task = w.task(t)
        assert task.audience == named  # R7.2-4
        latest = w.contract(t, task.latest)
        for agent in cast:
            if agent not in named:
                assert not in_audience(task, agent)
                assert take_refusal(task, latest, agent) is not None
    engaged = {e.agent for e in w.states.values() if getattr(e, "engagement", None) and getattr(e, "task", None) == t}
    assert engaged <= set(named)


@pytest.mark.rules("R7.2-3", "R7.3-1", "R9-14")
def test_R7_2_3_a_former_judge_reads_a_restricted_contract_but_may_not_take_it():
    """The review's reproduction (H3), in the core."""
    w = TaskWorld()
    a = Cast(w)
    t = w.new_task(a.alice, [a.bob], judge=a.jude)
    w.refuse("forbidden", lambda: w.take(a.jude, t))  # B17: the current judge
    ok(w.revise(a.alice, t))  # a new version without a designated judge
    task = w.task(t)
    assert may_read_contract(task, a.jude)  # D22: it still reads the contract layer
    r = w.refuse("forbidden", lambda: w.take(a.jude, t), "stop")
    assert r.rule == "R7.2-3" and "R7.2-3" not in r.reason
    ok(w.take(a.bob, t))
