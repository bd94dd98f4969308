"""The lifecycle tables of §6.4 assignments and §7.3 engagements, walked pair by
pair as h11's tests walk its state table: every (state, verb) pair the table has
no move for is refused — a ``conflict`` worded for the caller, the final-state
refusal for ended work — and leaves the state untouched; terminal states are
exactly the spec's and derived from the table."""

from __future__ import annotations

import itertools

import msgspec
import pytest

from kungfud.core import assignment as asg_core
from kungfud.core import engagement as eng_core
from kungfud.core.assignment import AssignmentState
from kungfud.core.engagement import EngagementState
from kungfud.core.lifecycle import Lifecycle
from kungfud.errors import DecisionRefused

from .world import T0, well_formed

DUE = T0 + 60_000


def _assignment(state: str) -> AssignmentState:
    return AssignmentState(
        assignment="as_1", thread="th_1", entry=1, creator="ag_c", to="ag_t", content=b"{}", deliver_within_s=60,
        judge_within_s=60, created_at=T0, state=state, taker=None if state == "open" else "ag_t",  # type: ignore[arg-type]
        deliver_by=None if state == "open" else DUE, judge_by=DUE if state not in ("open", "taken") else None,
        judged_at=DUE - 1 if state in ("adopted", "rejected") else None,
    )


def _engagement(state: str) -> EngagementState:
    return EngagementState(
        engagement="en_1", task="tk_1", agent="ag_t", author="ag_a", judge="ag_a", contract_version=1, inputs=[],
        taken_at=T0, deliver_by=DUE, judge_within_s=60, on_no_judgment="undecided", adoption_limit=None,
        readers="parties", state=state,  # type: ignore[arg-type]
        judge_by=DUE + 60_000 if state != "taken" else None,
        judged_at=DUE + 1 if state in ("adopted", "rejected") else None,
    )


TABLES = [
    pytest.param(asg_core.LIFECYCLE, _assignment, id="assignment"),
    pytest.param(eng_core.LIFECYCLE, _engagement, id="engagement"),
]


@pytest.mark.rules("R6.4-18", "R7.3-25", "R6.4-9", "R7.3-13", "R6.4-28", "L2-3")
@pytest.mark.parametrize("table,make", TABLES)
def test_R6_4_18_R7_3_25_every_pair_the_table_has_no_move_for_is_refused_and_changes_nothing(table: Lifecycle, make):
    verbs = sorted(table.verbs | {"expire"})
    for state, verb in itertools.product(sorted(table.states), verbs):
        obj = make(state)
        before = msgspec.msgpack.encode(obj)
        if verb == "expire":
            assert (state in table.deadlines) == (table.due(obj) is not None), (state, verb)
            continue
        if table.allows(state, verb):
            assert table.check(obj, verb) in table.states
            continue
        with pytest.raises(DecisionRefused) as refused:
            table.check(obj, verb)
        r = well_formed(refused.value.rejection)
        assert r.code == "conflict", (state, verb, r)
        assert r.reason.startswith(f"{table.name} {getattr(obj, table.name)} "), r
        if state in table.terminal:
            assert r == table.final(obj) and "that state is final" in r.reason, (state, verb, r)
        assert msgspec.msgpack.encode(obj) == before, "a refusal changed the state (L2-3)"


@pytest.mark.rules("R6.4-17", "R7.3-24")
def test_R6_4_17_R7_3_24_terminal_states_are_derived_from_the_tables_and_are_the_specs():
    assert asg_core.TERMINAL == {"adopted", "rejected", "undecided", "dropped", "timed_out", "voided"}
    assert eng_core.TERMINAL == {"adopted", "rejected", "undecided", "dropped", "timed_out"}
    for table in (asg_core.LIFECYCLE, eng_core.LIFECYCLE):
        reached = {t for moves in table.transitions.values() for t in moves.values()}
        reached |= {o for dl in table.deadlines.values() for o in dl.outcomes}
        assert table.terminal <= reached | set(table.terminal), table.name
        # Every terminal state is reached by a verb, a deadline or (voided) a Thread fact.
        assert table.terminal - reached <= {"voided"}, table.name


@pytest.mark.rules("R6.4-9", "R7.3-13", "R6.4-28", "R6.4-29")
def test_R6_4_9_R7_3_13_the_tables_keep_each_concepts_wording():
    """The two tables share the mechanism, not the words (R2): each refusal reads as before."""
    a, e = asg_core.LIFECYCLE, eng_core.LIFECYCLE
    r = a.refusal(_assignment("delivered"), "deliver")
    assert (r.code, r.reason, r.next, r.rule) == (
        "conflict", "assignment as_1 was already delivered; a delivery cannot be replaced", "stop", "R6.4-9"
    )
    assert a.refusal(_assignment("delivered"), "void").reason == "assignment as_1 was delivered; only undelivered work is voided"
    r = a.refusal(_assignment("taken"), "adopt")
    assert (r.reason, r.next) == ("assignment as_1 has not been delivered yet", "wait")
    assert a.refusal(_assignment("dropped"), "take").reason == "assignment as_1 is dropped; that state is final"
    assert a.refusal(_assignment("dropped"), "take").rule is None
    r = e.refusal(_engagement("delivered"), "deliver")
    assert (r.reason, r.rule) == ("engagement en_1 was already delivered; a delivery cannot be replaced", "R7.3-13")
    r = e.refusal(_engagement("rejected"), "drop")
    assert (r.reason, r.rule) == ("engagement en_1 is rejected; that state is final", "R7.3-25")


@pytest.mark.rules("L4-3", "R6.4-13", "R6.4-12", "R7.3-10", "R7.3-18")
def test_L4_3_work_a_deadline_ended_is_refused_naming_when_the_deadline_passed():
    a, e = asg_core.LIFECYCLE, eng_core.LIFECYCLE
    assert a.effective(_assignment("taken"), DUE - 1) == "taken"
    assert a.effective(_assignment("taken"), DUE) == "timed_out"
    assert a.effective(_assignment("delivered"), DUE) == "undecided"
    assert a.effective(_assignment("open"), DUE * 2) == "open"
    assert "delivery deadline passed" in a.final(_assignment("timed_out")).reason
    assert "delivery deadline passed" in a.final(_assignment("taken"), "timed_out").reason
    assert "judgment deadline passed" in a.final(_assignment("delivered"), "undecided").reason
    expired = _engagement("adopted")
    by_deadline = msgspec.structs.replace(expired, judged_at=None)
    assert "judgment deadline passed" in e.final(by_deadline).reason  # adopted by the contract at the deadline
    assert e.final(expired).reason == "engagement en_1 is adopted; that state is final"  # adopted by its judge
