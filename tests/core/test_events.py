"""Which events a fact makes, for whom, and what each says
(kungfud/core/events.py; WIRE.md "Event", §8 R8-20, R8-21, §9 R9-9): the kinds
as one tagged union, each kind's bytes exactly as WIRE.md shows them, and the
lifecycle tables walked pair by pair — every move and every deadline of an
assignment and an engagement, with the events it makes and to whom."""

from __future__ import annotations

import itertools
import json
from types import SimpleNamespace
from typing import Any, get_args, get_type_hints

import msgspec
import pytest

from kungfud import event_kinds
from kungfud.core import assignment as asg_core
from kungfud.core import engagement as eng_core
from kungfud.core.events import _WHY, OPEN, FactEvents, outcome_parties, why_ended
from kungfud.core.facts import EntryPosted, MembershipEnded
from kungfud.core.kinds import AnyFact
from kungfud.core.lifecycle import Lifecycle
from kungfud.core.obligations import Obligation
from kungfud.core.task import TaskState
from kungfud.event_kinds import AnyEvent, KINDS, Offered, TaskOffered, Turn, TurnData, kind_of

from .test_lifecycle import _assignment, _engagement
from .world import T0

_any = msgspec.json.Decoder(AnyEvent)


def _made(facts: FactEvents) -> list[tuple[str, dict]]:
    return [(agent, json.loads(event_kinds.encode(ev))) for agent, ev in facts.made()]


@pytest.mark.rules("R8-20")
def test_R8_20_the_kinds_are_the_tags_of_one_union_each_stored_tag_first_and_framed_seq_first():
    types = get_args(AnyEvent)
    assert KINDS == tuple(t.__struct_config__.tag for t in types)
    assert len(set(KINDS)) == len(KINDS)
    assert set(event_kinds.DEFAULT_KINDS) <= set(KINDS) and set(event_kinds.ORIGINAL_KINDS) <= set(KINDS)
    samples = {
        "turn": Turn(TurnData([], [event_kinds.Ended("ob_1", "replied")])),
        "opportunity": event_kinds.Opportunity({"opportunity": "task", "ref": {"task": "tk_1"}}),
        "outcome": event_kinds.Outcome(msgspec.Raw(b'{"state":"adopted"}')),
        "task_offered": TaskOffered(Offered("tk_1", "ag_a", 2, "2025-11-30T12:00:00.000Z")),
        "a2a_task": event_kinds.A2ATask(event_kinds.A2ATaskData("tk_1", "TASK_STATE_WORKING", 2, "2025-11-30T12:00:00.000Z")),
    }
    assert set(samples) == set(KINDS), "a sample of every kind"
    for kind, event in samples.items():
        raw = event_kinds.encode(event)
        assert raw.startswith(b'{"event":"%s","data":' % kind.encode()), raw  # the tag first
        assert kind_of(raw) == kind and _any.decode(raw) == event
        framed = event_kinds.frame(42, raw)
        assert framed == b'{"seq":42,' + raw[1:]  # WIRE.md "Event": {"event", "seq", "data"}
        assert json.loads(framed) == {"seq": 42, **json.loads(raw)}
    # The bytes WIRE.md shows for a turn event.
    assert event_kinds.encode(samples["turn"]) == b'{"event":"turn","data":{"added":[],"ended":[{"obligation_id":"ob_1","why":"replied"}]}}'
    assert kind_of(b'{ "data": {}, "event": "turn"}') == "turn"  # JSON not written by kungfud is decoded


@pytest.mark.rules("R8-20")
def test_R8_20_an_obligation_ended_by_a_fact_is_named_after_it_in_the_words_the_wire_lists():
    """docs/wire.md "Events": ``why`` is one of fourteen words — the ending
    facts' own, and a membership's end saying which (left, removed,
    deactivated); every fact named is one of the union of facts."""
    assert set(_WHY) <= set(get_args(AnyFact))
    membership = get_args(get_type_hints(MembershipEnded)["why"])
    words = set(_WHY.values()) | {
        why_ended(MembershipEnded(at=T0, by="ag_a", thread="th_1", agent="ag_b", why=w)) for w in membership
    }
    assert words == {"replied", "handled", "retracted", "left", "removed", "deactivated", "demoted", "closed",
                     "taken", "delivered", "judged", "dropped", "voided", "expired"}


def _walk(table: Lifecycle) -> list[tuple[str, str, str]]:
    """(state, verb or ``expire``, next state) of every move and every deadline."""
    moves = [(s, verb, nxt) for s, verbs in table.transitions.items() for verb, nxt in verbs.items()]
    moves += [(s, "expire", outcome) for s, d in table.deadlines.items() for outcome in d.outcomes]
    return moves


def _moved(make: Any, state: str, nxt: str, terminal: frozenset[str]) -> tuple[Any, Any]:
    """The work in ``state``, and in ``nxt`` after the move (an ended state has its time)."""
    before, after = make(state), make(nxt)
    if nxt in terminal:
        after = msgspec.structs.replace(after, ended_at=T0 + 5)
    return before, after


TABLES = [
    pytest.param(asg_core.LIFECYCLE, _assignment, "as_1", id="assignment"),
    pytest.param(eng_core.LIFECYCLE, _engagement, "en_1", id="engagement"),
]


@pytest.mark.rules("R8-20", "R9-9", "R9-2", "R9-16", "R6.4-17", "R7.3-24")
@pytest.mark.parametrize("table,make,obj", TABLES)
def test_R8_20_every_move_of_work_makes_an_outcome_exactly_when_it_ends_to_each_other_party_who_may_read_it(
    table: Lifecycle, make: Any, obj: str
):
    """Walked like the lifecycle tables: each move and deadline, acted by each
    party and by the clock (``by`` None), with every party a member of the
    Thread and with the taker gone from it."""
    walked = _walk(table)
    assert {nxt for _, _, nxt in walked} >= table.terminal, "every terminal state is reached by some move"
    for (state, verb, nxt), members in itertools.product(walked, ("all", "not the taker")):
        before, after = _moved(make, state, nxt, table.terminal)
        parties = outcome_parties(after)
        for by in [*parties, None]:
            facts = FactEvents(lambda thread, agent: members == "all" or agent != "ag_t")
            facts.observe(obj, before, after, SimpleNamespace(at=T0 + 5, by=by))
            outcomes = [(agent, ev["data"]) for agent, ev in _made(facts) if ev["event"] == "outcome"]
            ends = nxt in table.terminal and state not in table.terminal
            readers = [a for a in parties if a != by and (obj.startswith("en_") or members == "all" or a != "ag_t")]
            assert [a for a, _ in outcomes] == (readers if ends else []), (state, verb, nxt, by, members)
            for _, data in outcomes:
                assert data["state"] == nxt and data.get("by") == by  # by absent when a deadline ended it
            assert len(facts.outcomes()) == (1 if ends else 0)  # the outcomes index: one row per party, readers or not


@pytest.mark.rules("R8-20")
def test_R8_20_an_opportunity_is_made_once_to_the_addressee_of_a_new_open_assignment():
    opened = _assignment("open")
    for before, after, want in [
        (None, opened, ["ag_t"]),  # created, addressed
        (opened, opened, []),  # still open: not new
        (opened, _assignment("taken"), []),
    ]:
        facts = FactEvents(lambda thread, agent: True)
        facts.observe("as_1", before, after, SimpleNamespace(at=T0, by="ag_c"))
        got = [(a, ev["data"]["ref"]) for a, ev in _made(facts) if ev["event"] == "opportunity"]
        assert got == [(a, {"thread": "th_1", "assignment": "as_1"}) for a in want]


def _task(audience: list[str] | None) -> TaskState:
    return TaskState(task="tk_1", author="ag_a", audience=audience, created_at=T0, latest=1, accepting=True,
                     adoptions=0, judges=[])


@pytest.mark.rules("R8-20", "R7.1-5", "R7.2-6")
def test_R8_20_a_restricted_task_is_an_opportunity_to_each_new_member_of_its_audience_an_open_one_offered_once():
    facts = FactEvents(lambda thread, agent: True)
    facts.observe("tk_1", _task(["ag_b"]), _task(["ag_b", "ag_c"]), SimpleNamespace(at=T0, by="ag_a"))
    assert [(a, ev["event"]) for a, ev in _made(facts)] == [("ag_c", "opportunity")]
    opened = FactEvents(lambda thread, agent: True, lambda obj: None)
    opened.observe("tk_1", None, _task(None), SimpleNamespace(at=T0, by="ag_a"))
    assert _made(opened) == [(OPEN, {"event": "task_offered", "data": {
        "task": "tk_1", "author": "ag_a", "contract_version": 1, "at": "2025-11-30T12:00:00.000Z"}})]
    assert opened.offer_bars() == [(["ag_a"], None)]  # never offered to its author (R7.2-6)


def _ob(oid: str, holder: str, due: int | None = None) -> Obligation:
    return Obligation(oid, "respond", holder, {"thread": "th_1", "entry": 3}, T0, due)


@pytest.mark.rules("R8-20", "R8-21")
def test_R8_20_a_turn_event_to_each_holder_lists_the_obligations_a_fact_added_and_ended_with_why():
    """Grouped per holder across every object the fact touched, in the order
    holders first appear; an obligation that stays is in neither list; the
    item is the turn's (R8-21: the turn alone is sufficient)."""
    facts = FactEvents(lambda thread, agent: True)
    posted = EntryPosted(at=T0 + 7, by="ag_b", thread="th_1", entry=4, author="ag_b", pin_memory="me_1",
                         pin_version=1, responders=[], reply_to=3, replied=True)
    held = {"e1": [_ob("ob_1", "ag_a"), _ob("ob_2", "ag_b"), _ob("ob_3", "ag_a")], "e2": [_ob("ob_4", "ag_c")]}
    after = {"e1": [_ob("ob_3", "ag_a"), _ob("ob_5", "ag_b", due=T0 + 60_000)], "e2": [_ob("ob_4", "ag_c"), _ob("ob_6", "ag_a")]}
    for obj in ("e1", "e2"):
        facts.observe(obj, held[obj], after[obj], posted, lambda obj, obs: obs)
    made = _made(facts)
    assert [(a, ev["event"]) for a, ev in made] == [("ag_b", "turn"), ("ag_a", "turn")]
    turns = {a: ev["data"] for a, ev in made}
    assert turns["ag_a"] == {
        "added": [{"obligation_id": "ob_6", "obligation": "respond", "ref": {"thread": "th_1", "entry": 3},
                   "created_at": "2025-11-30T12:00:00.000Z", "next": "respond"}],
        "ended": [{"obligation_id": "ob_1", "why": "replied"}],
    }
    assert turns["ag_b"]["ended"] == [{"obligation_id": "ob_2", "why": "replied"}]
    assert [it["obligation_id"] for it in turns["ag_b"]["added"]] == ["ob_5"]
    assert turns["ag_b"]["added"][0]["due"] == "2025-11-30T12:01:00.000Z"
    # A fact that moves no obligation and no work makes nothing.
    quiet = FactEvents(lambda thread, agent: True)
    quiet.observe("e1", held["e1"], held["e1"], posted, lambda obj, obs: obs)
    assert quiet.quiet() and quiet.made() == []

