"""The outcome feed and index (WIRE.md 1.1 "Outcomes", kungfud/core/events.py, kungfud/store/events.py):
derived fact by fact from how a fact moved an assignment or engagement into its
terminal state — events to every party but the actor, one index row per party —
and rebuilt identically from the log by ``kungfud check --rebuild`` (L1-1)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import msgspec
import pytest

from kungfud.core.kinds import apply_to
from kungfud.core.facts import (
    AssignmentCreated,
    AssignmentDelivered,
    AssignmentJudged,
    AssignmentTaken,
    MemberJoined,
    MembershipEnded,
    ThreadCreated,
)
from kungfud.store import Store
from kungfud.store.check import compare, expected_indexes
from kungfud.core.facts import member_obj
from kungfud.core.members import current
from kungfud.core.events import FactEvents
from kungfud.store.events import OutcomeRow, event_key, number, outcome_key, rendered
from kungfud.store.events import rows as stored_rows
from kungfud.store.layout import from_u64
from tests.conftest import ROOT
from tests.e2e.thread_kit import agents, close_all, new_thread
from tests.store.helpers import T0

LEAD, W, OTHER = "ag_lead", "ag_w", "ag_other"
TH, AS = "th_1", "as_1"


def _world(*facts: Any) -> dict[str, Any]:
    states: dict[str, Any] = {}
    for f in facts:
        for obj in f.objects():
            states[obj] = apply_to(obj, states.get(obj), f)
    return states


def _feed(states: dict[str, Any], fact: Any) -> FactEvents:
    # Membership as the serial order has it at this fact (D90): the states folded so far.
    feed = FactEvents(lambda th, ag: current(states.get(member_obj(th, ag))) is not None)
    for obj in fact.objects():
        before = states.get(obj)
        states[obj] = after = apply_to(obj, before, fact)
        feed.observe(obj, before, after, fact)
    return feed


def _delivered() -> dict[str, Any]:
    return _world(
        ThreadCreated(at=T0, by=LEAD, thread=TH, creator=LEAD),
        MemberJoined(at=T0, by=W, thread=TH, agent=W, role="speaker", admission="ad_1"),
        MemberJoined(at=T0, by=OTHER, thread=TH, agent=OTHER, role="speaker", admission="ad_2"),
        AssignmentCreated(
            at=T0, by=LEAD, assignment=AS, thread=TH, entry=1, creator=LEAD, to=W, content=b'{"criteria":"c"}',
            deliver_within_s=60, judge_within_s=60,
        ),
        AssignmentTaken(at=T0 + 1, by=W, assignment=AS, thread=TH, taker=W, deliver_by=T0 + 60_000),
        AssignmentDelivered(at=T0 + 2, by=W, assignment=AS, thread=TH, pin_memory="me_1", pin_version=1, judge_by=T0 + 60_000),
    )


REJECT = AssignmentJudged(at=T0 + 3, by=LEAD, assignment=AS, thread=TH, verdict="reject", reason=b'{"reason":"no"}')
ITEM = {
    "ref": {"thread": TH, "assignment": AS}, "state": "rejected", "at": "2025-11-30T12:00:00.003Z", "by": LEAD,
    "content": {"reason": "no"},
}


@pytest.mark.rules("R8-20", "R6.4-26")
def test_R8_20_a_rejection_is_an_event_for_the_taker_and_a_row_for_both_parties():
    feed = _feed(_delivered(), REJECT)
    events = [(agent, json.loads(ev)) for agent, ev in rendered(feed)]
    assert [(a, e["event"]) for a, e in events] == [(LEAD, "turn"), (W, "outcome")]  # not to the judge who acted
    assert events[1][1]["data"] == ITEM
    rows = stored_rows(feed, 7, number(rendered(feed), 0, 7))
    outcome_rows = {key: msgspec.msgpack.decode(value, type=OutcomeRow) for db, key, value in rows if db == "outcomes"}
    assert set(outcome_rows) == {outcome_key(W, 7, AS), outcome_key(LEAD, 7, AS)}
    for row in outcome_rows.values():
        assert row.thread == TH and json.loads(row.item) == ITEM
    event_rows = {key: value for db, key, value in rows if db == "events"}
    # WIRE.md 1.2: each event its own seq (D200), one row each.
    assert set(event_rows) == {event_key(LEAD, 7), event_key(W, 8)}


@pytest.mark.rules("R9-2", "R9-9")
def test_R9_2_a_party_no_longer_in_the_thread_gets_no_event_but_keeps_its_row():
    states = _delivered()
    _feed(states, MembershipEnded(at=T0 + 3, by=LEAD, thread=TH, agent=W, why="removed"))
    feed = _feed(states, REJECT)
    assert [a for a, ev in rendered(feed) if json.loads(ev)["event"] == "outcome"] == []
    # The row stays: the read shows it again once W is a member again.
    assert {key for db, key, _ in stored_rows(feed, 9, number(rendered(feed), 0, 9)) if db == "outcomes"} == {
        outcome_key(W, 9, AS), outcome_key(LEAD, 9, AS),
    }


@pytest.mark.rules("R8-20")
def test_R8_20_a_fact_that_moves_work_on_without_ending_it_makes_no_outcome():
    states = _delivered()
    states[AS] = apply_to(AS, None, AssignmentCreated(
        at=T0, by=LEAD, assignment=AS, thread=TH, entry=1, creator=LEAD, to=W, content=b"{}",
        deliver_within_s=60, judge_within_s=60,
    ))
    feed = _feed(states, AssignmentTaken(at=T0 + 1, by=W, assignment=AS, thread=TH, taker=W, deliver_by=T0 + 60_000))
    assert [json.loads(ev)["event"] for _, ev in rendered(feed)] == ["turn"]
    assert [r for r in stored_rows(feed, 1, number(rendered(feed), 0, 1)) if r[0] == "outcomes"] == []


@pytest.mark.rules("R8-20")
def test_R8_20_every_event_of_a_fact_gets_its_own_seq_never_below_the_fact_seq():
    """WIRE.md 1.2 (D200): one more than the event before, never below the
    seq of the fact that made it."""
    evs = [("a", b"1"), ("b", b"2"), ("a", b"3")]
    assert number(evs, 0, 7) == [("a", 7, b"1"), ("b", 8, b"2"), ("a", 9, b"3")]
    assert number(evs, 20, 7) == [("a", 21, b"1"), ("b", 22, b"2"), ("a", 23, b"3")]
    assert number([], 20, 7) == []


def _check(data: Any, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kungfud", "check", "--data-dir", str(data), *extra],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )


@pytest.mark.rules("L1-1", "L1-4", "R8-20")
async def test_L1_1_check_rebuilds_the_outcome_index_identically(daemon):
    lead, w, judge = await agents(daemon.url, "lead", "w", "judge")
    t = await new_thread(lead, (w, "speaker"))
    for verdict in ("adopt", "reject"):
        r = await lead.act("thread.post", {"thread": t, "content": {"text": "do"}, "ask": [], "assign": {"to": w.id, "content": {"criteria": "c"}}})
        await w.act("assignment.take", {"assignment": r["assignment"], "deliver": {"content": {"v": 1}}})
        args = {"assignment": r["assignment"], "verdict": verdict}
        await lead.act("assignment.judge", {**args, "content": {"reason": "r"}} if verdict == "reject" else args)
    tk = (await lead.act("task.create", {"audience": "open", "contract": {"judge": judge.id, "content": {"output": "o", "criteria": "c"}}}))["task"]
    en = (await w.act("task.take", {"task": tk}))["engagement"]
    await w.act("task.drop", {"engagement": en})
    await close_all(lead, w, judge)
    daemon.stop()

    store = Store(str(daemon.data_dir))
    try:
        expected = expected_indexes(store)
        with store.env.begin() as txn:
            stored = dict(txn.cursor(db=store.dbs["outcomes"]))
        assert stored == expected["outcomes"] and compare(store, expected) == []
        # 2 parties × 2 assignments + 3 parties × 1 engagement
        assert len(stored) == 7
        owners = sorted(k.split(b"\x00")[0].decode() for k in stored)
        assert owners == sorted([lead.id] * 3 + [w.id] * 3 + [judge.id])
        assert all(from_u64(k.split(b"\x00", 1)[1][:8]) > 0 for k in stored)
        with store.env.begin(write=True) as txn:
            txn.drop(store.dbs["outcomes"], delete=False)
    finally:
        store.close()

    r = _check(daemon.data_dir)
    assert r.returncode == 1 and "outcomes: missing" in r.stdout, r.stdout + r.stderr
    r = _check(daemon.data_dir, "--rebuild")
    assert r.returncode == 0, r.stdout + r.stderr
    store = Store(str(daemon.data_dir))
    try:
        with store.env.begin() as txn:
            assert dict(txn.cursor(db=store.dbs["outcomes"])) == stored
    finally:
        store.close()
