"""Outcomes over the real daemon (WIRE.md 1.1 "Outcomes: every party learns how
the work ended"): the ``outcome`` event in the durable per-agent feed — to every
party of an assignment or engagement except the agent whose action ended it,
replayed by ``subscribe {since}`` — and the ``outcomes`` read, newest first,
paged without skipping. The taker reads the rejection's reason (R6.4-26,
R7.3-17); a deadline's outcome has no ``by``; an assignment's outcome is Thread
history, read by current members only (R9-9, R9-2)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from kungfud.client import Client
from tests.e2e.thread_kit import Member, admit_join, agents, close_all, fails, new_thread


@pytest.fixture
def daemon(shared_daemon):
    """One daemon for the module (tests/conftest.py ``shared_daemon``): each test
    registers agents of its own and reads only what they wrote."""
    return shared_daemon


TERMINAL = {"adopted", "rejected", "undecided", "timed_out", "dropped", "voided"}
CONTRACT = {"content": {"output": "a haiku", "criteria": "5-7-5"}}


async def assign(creator: Member, thread: str, to: Member, **extra: Any) -> str:
    spec = {"to": to.id, "content": {"criteria": "tests pass"}, **extra}
    r = await creator.act("thread.post", {"thread": thread, "content": {"text": "please"}, "ask": [], "assign": spec})
    return r["assignment"]


async def take_deliver(who: Member, asg: str) -> None:
    await who.act("assignment.take", {"assignment": asg, "deliver": {"content": {"patch": who.name}}})


async def all_outcomes(who: Member, limit: int = 100) -> list[dict]:
    items: list[dict] = []
    cursor = None
    for _ in range(1000):
        page = await who.read("outcomes", {"cursor": cursor, "limit": limit})
        assert page.keys() == {"items", "cursor"}, page
        items += page["items"]
        cursor = page["cursor"]
        if cursor is None:
            return items
    raise AssertionError("outcomes paging did not end")


def check_item(it: dict) -> None:
    """WIRE.md 1.1: ``{ref, state, at, by?, content?:{reason}}``."""
    assert {"ref", "state", "at"} <= it.keys() <= {"ref", "state", "at", "by", "content"}, it
    assert it["ref"].keys() in ({"thread", "assignment"}, {"task", "engagement"}), it
    assert it["state"] in TERMINAL, it
    assert it["at"].endswith("Z") and len(it["at"]) == len("2026-11-30T12:00:00.000Z"), it
    if "content" in it:
        assert it["state"] == "rejected" and it["content"].keys() == {"reason"}, it


async def feed(who: Member, url: str, since: int = 0) -> list[dict]:
    """Every event of ``who``'s durable feed after ``since``, replayed by a new
    subscription. The replay is sent right after the subscribe reply, so once
    the reply to a later read arrives every replayed event is in (no sleeping)."""
    c = await Client.connect(url, who.key)
    try:
        await c.read("subscribe", {"since": since})
        await c.read("agent.whoami", {})
        out: list[dict] = []
        while not c._events.empty():
            out.append(c._events.get_nowait())
        return out
    finally:
        await c.close()


def outcome_events(events: list[dict]) -> list[dict]:
    return [e for e in events if e["event"] == "outcome"]


async def until(fn, done, timeout: float = 8.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = await fn()
        if done(got) or time.monotonic() > deadline:
            return got
        # A condition, bounded: the deadline outcomes below fire on the real
        # clock on purpose (end-to-end coverage of the wall-clock path).
        await asyncio.sleep(0.1)


# --- assignments --------------------------------------------------------------------------


@pytest.mark.rules("R8-20", "R8-19", "R6.4-26", "R6.4-25", "R8-37", "R8-38")
async def test_R8_20_adopt_and_reject_reach_the_takers_with_the_reason_not_the_judge(daemon):
    lead, w1, w2 = await agents(daemon.url, "lead", "w1", "w2")
    t = await new_thread(lead, (w1, "speaker"), (w2, "speaker"))
    as1, as2 = await assign(lead, t, w1), await assign(lead, t, w2)
    await take_deliver(w1, as1)
    await take_deliver(w2, as2)
    await lead.act("assignment.judge", {"assignment": as1, "verdict": "adopt"})
    await lead.act("assignment.judge", {"assignment": as2, "verdict": "reject", "content": {"reason": "no tests"}})

    [e1] = outcome_events(await feed(w1, daemon.url))
    [e2] = outcome_events(await feed(w2, daemon.url))
    for e in (e1, e2):
        assert e.keys() == {"seq", "event", "data"}
        check_item(e["data"])
    assert {k: v for k, v in e1["data"].items() if k != "at"} == {
        "ref": {"thread": t, "assignment": as1}, "state": "adopted", "by": lead.id,
    }
    assert {k: v for k, v in e2["data"].items() if k != "at"} == {
        "ref": {"thread": t, "assignment": as2}, "state": "rejected", "by": lead.id, "content": {"reason": "no tests"},
    }
    # The agent whose action ended the work gets no event of it.
    assert outcome_events(await feed(lead, daemon.url)) == []

    # The read: each party's ended work, newest first, the same items as the events.
    assert await all_outcomes(w2) == [e2["data"]]
    assert await all_outcomes(w1) == [e1["data"]]
    assert await all_outcomes(lead) == [e2["data"], e1["data"]]
    await close_all(lead, w1, w2)


@pytest.mark.rules("R8-20", "R8-33", "R8-39", "R6.4-12", "R6.4-13", "L4-2")
async def test_R8_20_a_deadline_ends_the_work_for_every_party_with_no_by(daemon):
    lead, w = await agents(daemon.url, "lead", "w")
    t = await new_thread(lead, (w, "speaker"))
    late = await assign(lead, t, w, deliver_within_s=1)
    await w.act("assignment.take", {"assignment": late})
    unjudged = await assign(lead, t, w, judge_within_s=1)
    await take_deliver(w, unjudged)

    def ended(items: list[dict]) -> bool:
        return {i["ref"]["assignment"] for i in items} == {late, unjudged}

    items = await until(lambda: all_outcomes(w), ended)
    assert ended(items), items
    by_id = {i["ref"]["assignment"]: i for i in items}
    assert by_id[late]["state"] == "timed_out" and by_id[unjudged]["state"] == "undecided"
    assert all("by" not in i and "content" not in i for i in items)
    assert await all_outcomes(lead) == items  # both parties, the same items

    # Each party also gets the event, right after the turn event of the same
    # fact, each with its own seq (WIRE.md 1.2).
    for who, obligation_of in ((w, late), (lead, unjudged)):
        events = await feed(who, daemon.url)
        [outcome] = [e for e in outcome_events(events) if e["data"]["ref"]["assignment"] == obligation_of]
        at = events.index(outcome)
        turn = events[at - 1]
        assert turn["event"] == "turn" and turn["seq"] < outcome["seq"], events
        assert [x["why"] for x in turn["data"]["ended"]] == ["expired"]
        assert len({e["seq"] for e in events}) == len(events), "every event its own seq"
    await close_all(lead, w)


@pytest.mark.rules("R8-20", "R8-32", "R8-34", "R6.4-18")
async def test_R8_20_drop_and_void_tell_the_other_party(daemon):
    lead, w = await agents(daemon.url, "lead", "w")
    t = await new_thread(lead, (w, "speaker"))
    dropped, voided = await assign(lead, t, w), await assign(lead, t, w)
    await w.act("assignment.take", {"assignment": dropped})
    await w.act("assignment.take", {"assignment": voided})
    await w.act("assignment.drop", {"assignment": dropped})
    await lead.act("assignment.void", {"assignment": voided})
    [to_lead] = outcome_events(await feed(lead, daemon.url))
    [to_w] = outcome_events(await feed(w, daemon.url))
    assert (to_lead["data"]["ref"]["assignment"], to_lead["data"]["state"], to_lead["data"]["by"]) == (dropped, "dropped", w.id)
    assert (to_w["data"]["ref"]["assignment"], to_w["data"]["state"], to_w["data"]["by"]) == (voided, "voided", lead.id)
    assert [i["state"] for i in await all_outcomes(w)] == ["voided", "dropped"]  # newest first
    await close_all(lead, w)


@pytest.mark.rules("R9-9", "R9-2", "R6.4-26")
async def test_R9_2_an_assignment_outcome_is_read_by_current_members_only(daemon):
    """An assignment's outcome (and its reason) is Thread history: a taker removed
    after delivering gets no event and does not read it; after rejoining it does."""
    lead, w = await agents(daemon.url, "lead", "w")
    t = await new_thread(lead, (w, "speaker"))
    asg = await assign(lead, t, w)
    await take_deliver(w, asg)
    await lead.act("thread.remove", {"thread": t, "agent": w.id})
    await lead.act("assignment.judge", {"assignment": asg, "verdict": "reject", "content": {"reason": "secret"}})
    assert outcome_events(await feed(w, daemon.url)) == []
    assert await all_outcomes(w) == []
    await admit_join(lead, t, w)
    [item] = await all_outcomes(w)
    assert item["ref"] == {"thread": t, "assignment": asg} and item["content"] == {"reason": "secret"}
    await close_all(lead, w)


# --- engagements --------------------------------------------------------------------------


@pytest.mark.rules("R8-20", "R7.3-17", "R9-16", "R8-36")
async def test_R7_3_17_engagement_outcomes_reach_author_and_taker_not_the_judge_who_acted(daemon):
    author, judge, w = await agents(daemon.url, "author", "judge", "w")
    tk = (await author.act("task.create", {"audience": "open", "contract": {**CONTRACT, "judge": judge.id}}))["task"]
    en = (await w.act("task.take", {"task": tk, "deliver": {"content": {"poem": "…"}}}))["engagement"]
    await judge.act("task.judge", {"engagement": en, "verdict": "reject", "content": {"reason": "6-7-5"}})
    ref = {"task": tk, "engagement": en}
    for who in (w, author):
        [e] = outcome_events(await feed(who, daemon.url))
        check_item(e["data"])
        assert {k: v for k, v in e["data"].items() if k != "at"} == {
            "ref": ref, "state": "rejected", "by": judge.id, "content": {"reason": "6-7-5"},
        }
        assert await all_outcomes(who) == [e["data"]]
    assert outcome_events(await feed(judge, daemon.url)) == []
    [mine] = await all_outcomes(judge)  # the read lists the judge's own verdicts too
    assert mine["ref"] == ref and mine["by"] == judge.id

    # A drop by the engaged agent tells the author and the judge.
    en2 = (await w.act("task.take", {"task": tk}))["engagement"]
    await w.act("task.drop", {"engagement": en2})
    for who in (author, judge):
        newest = (await who.read("outcomes", {"limit": 1}))["items"]
        assert [(i["ref"]["engagement"], i["state"], i["by"]) for i in newest] == [(en2, "dropped", w.id)]
    await close_all(author, judge, w)


# --- the read -----------------------------------------------------------------------------


@pytest.mark.rules("R8-10", "R8-13")
async def test_outcomes_pages_newest_first_without_skipping_and_refuses_a_forged_cursor(daemon):
    lead, w = await agents(daemon.url, "lead", "w")
    t = await new_thread(lead, (w, "speaker"))
    ids = []
    for _ in range(5):
        asg = await assign(lead, t, w)
        await w.act("assignment.take", {"assignment": asg})
        await w.act("assignment.drop", {"assignment": asg})
        ids.append(asg)
    whole = await all_outcomes(lead)
    assert [i["ref"]["assignment"] for i in whole] == ids[::-1]
    # One at a time, with a new outcome arriving between pages: nothing skipped,
    # nothing twice; the newer outcome is not in this walk (it began before it).
    first = await lead.read("outcomes", {"limit": 2})
    late = await assign(lead, t, w)
    await w.act("assignment.take", {"assignment": late})
    await w.act("assignment.drop", {"assignment": late})
    rest, cursor = [], first["cursor"]
    while cursor is not None:
        page = await lead.read("outcomes", {"cursor": cursor, "limit": 1})
        rest += page["items"]
        cursor = page["cursor"]
    assert first["items"] + rest == whole
    assert [i["ref"]["assignment"] for i in await all_outcomes(lead)] == [late] + ids[::-1]
    for bad in ("zz", "00", "ff" * 120):
        err = await fails(lead, "outcomes", {"cursor": bad}, "bad_request")
        assert "cursor" in err["reason"]
    await fails(lead, "outcomes", {"limit": 0}, "bad_request")
    await close_all(lead, w)
