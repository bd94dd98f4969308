"""DECISIONS.md B8 and R6.2-16 in the pure core: a Thread remembers the grants
it issued — live, replaced and voided, each with when it was issued and voided —
never a token; a membership names the grant it came through, and so does the
join receipt (security review: the reference suite's two deviations)."""

from __future__ import annotations

import msgspec
import pytest

from kungfud.core.thread import ADMISSION_HISTORY, GrantRecord

from .world import World, ok


@pytest.fixture
def w() -> World:
    w = World()
    w.root = w.register("root", admin=True)
    w.alice = w.register("alice")
    w.bob = w.register("bob")
    w.t = w.create_thread(w.alice)
    return w


@pytest.mark.rules("R6.1-7", "R6.1-8", "R6.5-7")
def test_B8_replaced_and_voided_grants_stay_in_the_threads_history(w):
    first = ok(w.admit(w.alice, w.t, "speaker"))
    t1 = w.now
    w.advance(10)
    second = ok(w.admit(w.alice, w.t, "observer"))  # replaces the first (R6.1-7)
    t2 = w.now
    w.advance(10)
    ok(w.void_admission(w.alice, w.t))  # voided on its own (R6.1-8)
    t3 = w.now
    w.advance(10)
    third = ok(w.admit(w.alice, w.t, "governor"))
    t4 = w.now
    w.advance(10)
    ok(w.close(w.alice, w.t))  # closing voids the live grant (R6.5-7)
    t5 = w.now
    assert w.thread(w.t).admissions == [
        GrantRecord(first.result["admission"], "speaker", t1, t2),
        GrantRecord(second.result["admission"], "observer", t2, t3),
        GrantRecord(third.result["admission"], "governor", t4, t5),
    ]
    tokens = [d.result["token"].encode() for d in (first, second, third)]
    encoded = msgspec.json.encode(w.thread(w.t).admissions)
    assert not any(tok in encoded for tok in tokens)
    assert w.fold(w.t) == w.thread(w.t)  # L1-1: the history is a fold of the facts


@pytest.mark.rules("R6.1-7")
def test_B8_the_history_keeps_the_newest_grants_within_its_bound(w):
    issued = [ok(w.admit(w.alice, w.t)).result["admission"] for _ in range(ADMISSION_HISTORY + 5)]
    history = w.thread(w.t).admissions
    assert [g.admission for g in history] == issued[-ADMISSION_HISTORY:]
    assert all(g.voided_at is not None for g in history[:-1]) and history[-1].voided_at is None


@pytest.mark.rules("R6.2-16")
def test_R6_2_16_the_join_receipt_names_the_grant_it_came_through(w):
    grant = ok(w.admit(w.alice, w.t)).result["admission"]
    joined = ok(w.join(w.bob, w.t))
    assert joined.result["admission"] == grant
    ok(w.admit(w.alice, w.t, "governor"))
    again = ok(w.join(w.bob, w.t))  # B9: the existing membership, through its own grant
    assert again.result["existing"] is True and again.result["admission"] == grant
