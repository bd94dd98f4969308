"""Admission grants over the wire: a membership shows the grant it came through
and the join receipt names it (R6.2-16); members read every grant — live,
replaced, voided — with its issued and voided times, never a token
(DECISIONS.md B8, docs/decisions.md D45)."""

from __future__ import annotations

import pytest

from .thread_kit import agents, close_all, new_thread


@pytest.mark.rules("R6.2-16")
async def test_R6_2_16_members_and_the_join_receipt_name_the_admission_grant(daemon):
    a, b, c = await agents(daemon.url, "alice", "bob", "carol")
    t = await new_thread(a)
    g1 = await a.act("thread.admit", {"thread": t})
    j1 = await b.act("thread.join", {"token": g1["token"]})
    g2 = await a.act("thread.admit", {"thread": t, "role": "observer"})
    j2 = await c.act("thread.join", {"token": g2["token"]})
    assert j1["admission"] == g1["admission"] and j2["admission"] == g2["admission"]
    members = {m["agent"]: m for m in (await c.read("thread.get", {"thread": t}))["members"]}
    assert members[b.id]["admission"] == g1["admission"] and members[b.id]["joined_at"] == j1["joined_at"]
    assert members[c.id]["admission"] == g2["admission"] and members[c.id]["joined_at"] == j2["joined_at"]
    assert members[a.id]["admission"] is None  # the creator came through no grant
    await close_all(a, b, c)


@pytest.mark.rules("R6.1-7", "R6.1-8", "R6.5-7", "R12-4")
async def test_B8_members_read_replaced_and_voided_grants_with_their_times(daemon):
    a, b = await agents(daemon.url, "alice", "bob")
    t = await new_thread(a)
    g1 = await a.act("thread.admit", {"thread": t})
    await b.act("thread.join", {"token": g1["token"]})
    g2 = await a.act("thread.admit", {"thread": t, "role": "observer"})  # replaces g1
    voided = await a.act("thread.void_admission", {"thread": t})
    g3 = await a.act("thread.admit", {"thread": t, "role": "governor"})
    ws = await b.read("thread.get", {"thread": t})
    history = ws["admissions"]
    assert [(h["admission"], h["role"]) for h in history] == [
        (g1["admission"], "speaker"), (g2["admission"], "observer"), (g3["admission"], "governor")
    ]
    assert all(set(h) <= {"admission", "role", "issued_at", "voided_at"} for h in history)
    assert history[0]["voided_at"] == history[1]["issued_at"]  # replaced when g2 was issued
    assert history[1]["voided_at"] >= history[1]["issued_at"] and "voided_at" not in history[2]
    assert voided["admission"] == g2["admission"]
    assert ws["admission"]["admission"] == g3["admission"]  # the live grant, as before
    assert not any(g["token"] in str(ws) for g in (g1, g2, g3))
    await a.act("thread.close", {"thread": t})
    closed = (await b.read("thread.get", {"thread": t}))["admissions"]
    assert "voided_at" in closed[2] and closed[:2] == history[:2]
    await close_all(a, b)
