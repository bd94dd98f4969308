"""§6.4 assignments over the real daemon: the whole life cycle, who may do what,
terminal states, and real deadlines — including one that passes while the daemon
is stopped (R6.4-*, R8-29…R8-39, L4-2, L4-3, L1-4)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from datetime import datetime

import pytest

from kungfud.client import Client
from tests.conftest import ROOT
from tests.e2e.thread_kit import (
    Member,
    agents,
    close_all,
    entry,
    fails,
    new_thread,
    opportunity_items,
    poll,
    response_of,
    turn_items,
)


@pytest.fixture
def daemon(shared_daemon):
    """One daemon for the module (tests/conftest.py ``shared_daemon``): each test
    registers agents of its own and reads only what they wrote."""
    return shared_daemon


TERMINAL = {"adopted", "rejected", "undecided", "dropped", "timed_out", "voided"}


def ts(s: str) -> float:
    """RFC 3339 with milliseconds (WIRE.md "Conventions") to epoch seconds."""
    assert s.endswith("Z") and len(s) == len("2026-11-30T12:00:00.000Z"), s
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


async def assign(creator: Member, thread: str, to: Member, **extra) -> dict:
    """Post an entry carrying an assignment; returns the post receipt."""
    spec = {"to": to.id, "content": {"criteria": "tests pass", "output": "a patch"}, **extra}
    r = await creator.act("thread.post", {"thread": thread, "content": {"text": "please do this"}, "assign": spec})
    assert r["assignment"].startswith("as_")
    return r


async def state(who: Member, asg: str) -> str:
    return (await who.read("assignment.get", {"assignment": asg}))["state"]


def kinds(items: list[dict]) -> list[tuple[str, str | int]]:
    return [(i["obligation"], i["ref"].get("assignment", i["ref"].get("entry"))) for i in items]


@pytest.mark.rules(
    "R6.4-1", "R6.4-2", "R6.4-3", "R6.4-4", "R6.4-5", "R6.4-6", "R6.4-7", "R6.4-19", "R6.4-20", "R6.4-22",
    "R6.4-25", "R8-29", "R8-31", "R8-35", "R8-37", "L4-2",
)
async def test_R6_4_20_life_cycle_post_take_deliver_adopt(daemon):
    a, b = await agents(daemon.url, "alice", "bob")
    t = await new_thread(a, (b, "speaker"))
    p = await assign(a, t, b)
    asg = p["assignment"]
    assert p["entry"] == 1 and p["responders"] == [b.id]
    e = await entry(b, t, 1)
    assert e["assignment"] == asg
    got = await b.read("assignment.get", {"assignment": asg})
    assert got["state"] == "open" and got["creator"] == a.id and got["to"] == b.id
    assert got["content"] == {"criteria": "tests pass", "output": "a patch"}
    assert got["deliver_within_s"] == 86400 and got["judge_within_s"] == 86400  # R6.4-4 defaults
    assert "deliver_by" not in got and "judge_by" not in got  # R6.4-6: no deadline runs yet
    # R6.4-7: untaken, it is an opportunity and no obligation
    assert kinds(await turn_items(b)) == [("respond", 1)]
    assert [o["ref"] for o in await opportunity_items(b)] == [{"thread": t, "assignment": asg}]
    [respond] = await turn_items(b)

    before = time.time()
    took = await b.act("assignment.take", {"assignment": asg})
    assert took["assignment"] == asg and took["state"] == "taken"
    assert took["ended"] == [respond["obligation_id"]]  # R6.4-20
    assert abs(ts(took["deliver_by"]) - (before + 86400)) < 5  # R6.4-5: runs from taking
    assert response_of(await entry(a, t, 1), b.id)["state"] == "ended"
    [deliver] = await turn_items(b)
    assert deliver["obligation"] == "deliver" and deliver["ref"] == {"thread": t, "assignment": asg}
    assert deliver["due"] == took["deliver_by"]  # L4-2
    assert await opportunity_items(b) == []

    before = time.time()
    d = await b.act("assignment.deliver", {"assignment": asg, "content": {"patch": "diff --git"}})
    assert d["assignment"] == asg and d["state"] == "delivered"
    assert abs(ts(d["judge_by"]) - (before + 86400)) < 5  # from accepted delivery
    assert await turn_items(b) == []
    [judge] = await turn_items(a)
    assert judge["obligation"] == "judge" and judge["ref"] == {"thread": t, "assignment": asg}
    assert judge["due"] == d["judge_by"]
    got = await a.read("assignment.get", {"assignment": asg})
    assert got["state"] == "delivered" and got["delivery"]["content"] == {"patch": "diff --git"}
    assert got["taker"] == b.id and got["deliver_by"] == took["deliver_by"] and got["judge_by"] == d["judge_by"]

    j = await a.act("assignment.judge", {"assignment": asg, "verdict": "adopt"})
    assert j["assignment"] == asg and j["state"] == "adopted"
    assert await turn_items(a) == []
    got = await b.read("assignment.get", {"assignment": asg})
    assert got["state"] == "adopted" and got["judgment"]["verdict"] == "adopt"
    await close_all(a, b)


@pytest.mark.rules("R6.4-26", "R6.4-24", "R8-38", "L2-3")
async def test_R6_4_26_reject_needs_a_reason_the_taker_reads(daemon):
    a, b = await agents(daemon.url, "alice", "bob")
    t = await new_thread(a, (b, "speaker"))
    asg = (await assign(a, t, b))["assignment"]
    await b.act("assignment.take", {"assignment": asg, "deliver": {"content": {"patch": "v1"}}})
    for args in ({}, {"content": {}}, {"content": {"reason": ""}}):
        await fails(a, "assignment.judge", {"assignment": asg, "verdict": "reject", **args}, "bad_request")
    assert await state(a, asg) == "delivered"
    assert [i["obligation"] for i in await turn_items(a)] == ["judge"]
    # only the creator judges
    await fails(b, "assignment.judge", {"assignment": asg, "verdict": "adopt"}, "forbidden")
    r = await a.act("assignment.judge", {"assignment": asg, "verdict": "reject", "content": {"reason": "breaks the build"}})
    assert r["state"] == "rejected"
    got = await b.read("assignment.get", {"assignment": asg})
    assert got["state"] == "rejected"
    assert got["judgment"]["verdict"] == "reject" and got["judgment"]["content"] == {"reason": "breaks the build"}
    assert await turn_items(a) == []
    await close_all(a, b)


@pytest.mark.rules("R6.4-10")
async def test_R6_4_10_a_redo_is_a_new_assignment_referencing_the_old(daemon):
    a, b = await agents(daemon.url, "alice", "bob")
    t = await new_thread(a, (b, "speaker"))
    old = (await assign(a, t, b))["assignment"]
    await b.act("assignment.take", {"assignment": old, "deliver": {"content": {"patch": "v1"}}})
    await a.act("assignment.judge", {"assignment": old, "verdict": "reject", "content": {"reason": "no tests"}})
    new = (await assign(a, t, b, redoes=old))["assignment"]
    assert new != old
    got = await b.read("assignment.get", {"assignment": new})
    assert got["redoes"] == old and got["state"] == "open"
    assert await state(b, old) == "rejected"
    await close_all(a, b)


@pytest.mark.rules("R6.4-27", "R6.4-28", "R8-32")
async def test_R6_4_28_drop_only_before_delivery_and_only_by_the_taker(daemon):
    a, b = await agents(daemon.url, "alice", "bob")
    t = await new_thread(a, (b, "speaker"))
    asg = (await assign(a, t, b))["assignment"]
    await fails(b, "assignment.drop", {"assignment": asg}, "forbidden")  # not taken: b is not yet the taker
    took = await b.act("assignment.take", {"assignment": asg})
    [deliver] = await turn_items(b)
    await fails(a, "assignment.drop", {"assignment": asg}, "forbidden")
    r = await b.act("assignment.drop", {"assignment": asg})
    assert r["assignment"] == asg and r["state"] == "dropped"
    assert deliver["obligation_id"] in r.get("ended", [deliver["obligation_id"]])
    assert await turn_items(b) == [] and await state(a, asg) == "dropped"
    assert took["state"] == "taken"

    asg2 = (await assign(a, t, b))["assignment"]
    await b.act("assignment.take", {"assignment": asg2, "deliver": {"content": {"x": 1}}})
    await fails(b, "assignment.drop", {"assignment": asg2}, "conflict")
    assert await state(a, asg2) == "delivered"
    assert [i["obligation"] for i in await turn_items(a)] == ["judge"]
    await close_all(a, b)


@pytest.mark.rules("R6.4-29", "R6.4-8", "R8-34")
async def test_R6_4_29_creator_voids_undelivered_work_and_nobody_else_does(daemon):
    a, b = await agents(daemon.url, "alice", "bob")
    t = await new_thread(a, (b, "speaker"))
    untaken = (await assign(a, t, b))["assignment"]
    taken = (await assign(a, t, b))["assignment"]
    delivered = (await assign(a, t, b))["assignment"]
    await b.act("assignment.take", {"assignment": taken})
    await b.act("assignment.take", {"assignment": delivered, "deliver": {"content": {"x": 1}}})
    for asg in (untaken, taken, delivered):
        await fails(b, "assignment.void", {"assignment": asg}, "forbidden")
    r = await a.act("assignment.void", {"assignment": untaken})
    assert r["assignment"] == untaken and r["state"] == "voided"
    deliver_ob = [i for i in await turn_items(b) if i["obligation"] == "deliver"]
    assert [i["ref"]["assignment"] for i in deliver_ob] == [taken]
    r = await a.act("assignment.void", {"assignment": taken})
    assert r["state"] == "voided" and deliver_ob[0]["obligation_id"] in r["ended"]
    assert [i for i in await turn_items(b) if i["obligation"] == "deliver"] == []
    await fails(a, "assignment.void", {"assignment": delivered}, "conflict")
    assert [await state(b, x) for x in (untaken, taken, delivered)] == ["voided", "voided", "delivered"]
    # a voided untaken assignment is no longer an opportunity and cannot be taken
    assert await opportunity_items(b) == []
    await fails(b, "assignment.take", {"assignment": untaken}, "conflict")
    await close_all(a, b)


@pytest.mark.rules("R6.4-19", "R6.4-11", "R6.4-1")
async def test_R6_4_19_only_the_addressee_takes_and_only_once(daemon):
    a, b, c, o = await agents(daemon.url, "alice", "bob", "carol", "oscar")
    t = await new_thread(a, (b, "speaker"), (c, "speaker"), (o, "observer"))
    asg = (await assign(a, t, b))["assignment"]
    await fails(c, "assignment.take", {"assignment": asg}, "forbidden")
    await fails(a, "assignment.take", {"assignment": asg}, "forbidden")
    await b.act("assignment.take", {"assignment": asg})
    await fails(b, "assignment.take", {"assignment": asg}, "conflict")
    # R6.4-1: addressed to exactly one member who may speak — not an observer, not a non-member
    out = (await agents(daemon.url, "outsider"))[0]
    for bad in (o, out):
        err = await fails(a, "thread.post", {"thread": t, "content": {"x": 1}, "assign": {"to": bad.id, "content": {"criteria": "c"}}}, "bad_request")
        assert bad.id in err["reason"]
    # ... and possibly the creator itself
    own = (await assign(a, t, a))["assignment"]
    assert (await a.act("assignment.take", {"assignment": own}))["state"] == "taken"
    await close_all(a, b, c, o, out)


@pytest.mark.rules("R6.4-21", "R6.4-23", "L2-1", "L2-2")
async def test_R6_4_21_take_and_deliver_in_one_action(daemon):
    a, b = await agents(daemon.url, "alice", "bob")
    t = await new_thread(a, (b, "speaker"))
    asg = (await assign(a, t, b))["assignment"]
    # a delivery pinning another agent's Memory is refused, and then the take does not happen either
    foreign = (await a.act("memory.create", {"content": {"mine": 1}}))["memory"]
    await a.act("memory.publish", {"memory": foreign})
    await fails(b, "assignment.take", {"assignment": asg, "deliver": {"memory": {"memory": foreign}}}, "forbidden")
    assert await state(a, asg) == "open"
    assert [i["obligation"] for i in await turn_items(b)] == ["respond"]
    # with its own Memory it succeeds as one action
    own = (await b.act("memory.create", {"content": {"patch": "p"}}))["memory"]
    r = await b.act("assignment.take", {"assignment": asg, "deliver": {"memory": {"memory": own}}})
    assert r["assignment"] == asg and r["state"] == "delivered" and "judge_by" in r
    assert await turn_items(b) == []
    got = await a.read("assignment.get", {"assignment": asg})
    assert got["state"] == "delivered" and got["delivery"]["pin"] == {"memory": own, "version": 1}
    assert got["delivery"]["content"] == {"patch": "p"}
    assert [i["obligation"] for i in await turn_items(a)] == ["judge"]
    await close_all(a, b)


@pytest.mark.rules("R6.4-9", "R6.4-11")
async def test_R6_4_9_a_second_delivery_is_a_conflict(daemon):
    a, b = await agents(daemon.url, "alice", "bob")
    t = await new_thread(a, (b, "speaker"))
    asg = (await assign(a, t, b))["assignment"]
    await b.act("assignment.take", {"assignment": asg})
    await b.act("assignment.deliver", {"assignment": asg, "content": {"v": 1}})
    await fails(b, "assignment.deliver", {"assignment": asg, "content": {"v": 2}}, "conflict")
    await fails(b, "assignment.take", {"assignment": asg, "deliver": {"content": {"v": 3}}}, "conflict")
    await fails(a, "assignment.deliver", {"assignment": asg, "content": {"v": 4}}, "forbidden")
    got = await a.read("assignment.get", {"assignment": asg})
    assert got["state"] == "delivered" and got["delivery"]["content"] == {"v": 1}
    await close_all(a, b)


@pytest.mark.rules("R6.4-18", "R6.4-17", "R6.4-15")
async def test_R6_4_18_terminal_states_are_irreversible(daemon):
    a, b = await agents(daemon.url, "alice", "bob")
    t = await new_thread(a, (b, "speaker"))
    ended: dict[str, str] = {}
    x = (await assign(a, t, b))["assignment"]
    await b.act("assignment.take", {"assignment": x, "deliver": {"content": {"v": 1}}})
    await a.act("assignment.judge", {"assignment": x, "verdict": "adopt"})
    ended[x] = "adopted"
    x = (await assign(a, t, b))["assignment"]
    await b.act("assignment.take", {"assignment": x, "deliver": {"content": {"v": 1}}})
    await a.act("assignment.judge", {"assignment": x, "verdict": "reject", "content": {"reason": "no"}})
    ended[x] = "rejected"
    x = (await assign(a, t, b))["assignment"]
    await b.act("assignment.take", {"assignment": x})
    await b.act("assignment.drop", {"assignment": x})
    ended[x] = "dropped"
    x = (await assign(a, t, b))["assignment"]
    await a.act("assignment.void", {"assignment": x})
    ended[x] = "voided"
    for asg, final in ended.items():
        before = await a.read("assignment.get", {"assignment": asg})
        assert before["state"] == final
        attempts = [
            (b, "assignment.take", {"assignment": asg}),
            (b, "assignment.take", {"assignment": asg, "deliver": {"content": {"v": 9}}}),
            (b, "assignment.deliver", {"assignment": asg, "content": {"v": 9}}),
            (b, "assignment.drop", {"assignment": asg}),
            (a, "assignment.void", {"assignment": asg}),
            (a, "assignment.judge", {"assignment": asg, "verdict": "adopt"}),
            (a, "assignment.judge", {"assignment": asg, "verdict": "reject", "content": {"reason": "r"}}),
        ]
        for who, op, args in attempts:
            never_taken = final == "voided" and op in ("assignment.deliver", "assignment.drop")
            # D5: b never took the voided one, so it is refused for want of the role first
            err = await fails(who, op, args, "forbidden" if never_taken else "conflict")
            assert err["next"] in ("stop", "revise"), (final, op, err)
        assert await a.read("assignment.get", {"assignment": asg}) == before, final
    assert await turn_items(a) == []
    assert [i["obligation"] for i in await turn_items(b)] == ["respond"]  # only the voided one's entry is owed
    await close_all(a, b)


@pytest.mark.rules("R6.4-13", "R6.4-6", "L4-3", "R8-33", "L4-1")
async def test_R6_4_13_a_passed_delivery_deadline_times_out(clocked_daemon):
    daemon = clocked_daemon
    a, b = await agents(daemon.url, "alice", "bob")
    t = await new_thread(a, (b, "speaker"))
    # A deadline no test waits for in real time: only advancing the clock passes it.
    asg = (await assign(a, t, b, deliver_within_s=60))["assignment"]
    idle = (await assign(a, t, b, deliver_within_s=60))["assignment"]
    took = await b.act("assignment.take", {"assignment": asg})
    [deliver] = [i for i in await turn_items(b) if i["obligation"] == "deliver"]
    assert deliver["due"] == took["deliver_by"]
    daemon.advance_clock(60.5)  # the read below sees it and wakes the deadline clock
    got = await b.read("assignment.get", {"assignment": asg})
    assert got["state"] == "timed_out"
    assert got.get("obligations", []) == []
    assert [i for i in await turn_items(b) if i["obligation"] == "deliver"] == []  # L4-3
    err = await fails(b, "assignment.deliver", {"assignment": asg, "content": {"late": True}}, "conflict")
    assert err["next"] in ("stop", "revise")
    # the expiry is recorded as a fact
    got = await poll(lambda: a.read("assignment.get", {"assignment": asg}), lambda g: "ended_at" in g)
    assert got["state"] == "timed_out" and "ended_at" in got and "delivery" not in got
    # R6.4-6: an untaken assignment never times out
    assert await state(b, idle) == "open"
    assert [o["ref"]["assignment"] for o in await opportunity_items(b)] == [idle]
    await close_all(a, b)


@pytest.mark.rules("R6.4-12", "R6.4-14", "L4-3", "R8-39")
async def test_R6_4_12_a_passed_judgment_deadline_ends_undecided(clocked_daemon):
    daemon = clocked_daemon
    a, b = await agents(daemon.url, "alice", "bob")
    t = await new_thread(a, (b, "speaker"))
    asg = (await assign(a, t, b, judge_within_s=60))["assignment"]
    d = await b.act("assignment.take", {"assignment": asg, "deliver": {"content": {"v": 1}}})
    [judge] = await turn_items(a)
    assert judge["obligation"] == "judge" and judge["due"] == d["judge_by"]
    daemon.advance_clock(60.5)
    assert await state(a, asg) == "undecided"
    assert await turn_items(a) == []
    await fails(a, "assignment.judge", {"assignment": asg, "verdict": "adopt"}, "conflict")
    got = await poll(lambda: b.read("assignment.get", {"assignment": asg}), lambda g: "ended_at" in g)
    assert got["state"] == "undecided" and "judgment" not in got
    assert got["delivery"]["content"] == {"v": 1}
    await close_all(a, b)


def _check(daemon) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kungfud", "check", *daemon.store_args],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )


@pytest.mark.rules("L1-4", "L1-1", "R6.4-13", "R6.4-12", "R8-19", "L4-1")
async def test_L1_4_a_deadline_passing_while_the_daemon_is_stopped_is_recorded_after_restart(clocked_daemon):
    daemon = clocked_daemon
    a, b = await agents(daemon.url, "alice", "bob")
    t = await new_thread(a, (b, "speaker"))
    asg = (await assign(a, t, b, deliver_within_s=60))["assignment"]
    judged = (await assign(a, t, b, judge_within_s=60))["assignment"]
    await b.act("assignment.take", {"assignment": asg})
    await b.act("assignment.take", {"assignment": judged, "deliver": {"content": {"v": 1}}})
    owed = (await a.act("thread.post", {"thread": t, "content": {"q": "still there?"}}))["entry"]  # b responds
    await close_all(a, b)
    daemon.kill()  # no cleanup at all, well before the deadlines
    daemon.advance_clock(60.6)  # the deadlines pass while it is down
    daemon.start()
    a2 = Member(await Client.connect(daemon.url, a.key), a.id, "alice", a.key)
    b2 = Member(await Client.connect(daemon.url, b.key), b.id, "bob", b.key)
    got = await poll(lambda: a2.read("assignment.get", {"assignment": asg}), lambda g: "ended_at" in g)
    assert got["state"] == "timed_out" and "ended_at" in got, got
    got = await poll(lambda: b2.read("assignment.get", {"assignment": judged}), lambda g: "ended_at" in g)
    assert got["state"] == "undecided" and "ended_at" in got, got
    # the expired obligations are gone; the respond obligation survived the kill (R8-19)
    assert [(i["obligation"], i["ref"]) for i in await turn_items(b2)] == [("respond", {"thread": t, "entry": owed})]
    assert await turn_items(a2) == []
    await close_all(a2, b2)
    assert daemon.terminate() == 0
    r = _check(daemon)
    assert r.returncode == 0, r.stdout + r.stderr
    # and the recorded states survive another restart
    daemon.start()
    async with await Client.connect(daemon.url, a.key) as c:
        assert (await c.read("assignment.get", {"assignment": asg}))["state"] == "timed_out"
        assert (await c.read("assignment.get", {"assignment": judged}))["state"] == "undecided"


@pytest.mark.rules("L4-3", "R6.4-13", "R6.4-14")
async def test_L4_3_an_action_just_after_the_deadline_loses_to_it(daemon):
    a, b = await agents(daemon.url, "alice", "bob")
    t = await new_thread(a, (b, "speaker"))
    late_deliver = (await assign(a, t, b, deliver_within_s=1))["assignment"]
    late_judge = (await assign(a, t, b, judge_within_s=1))["assignment"]
    took = await b.act("assignment.take", {"assignment": late_deliver})
    d = await b.act("assignment.take", {"assignment": late_judge, "deliver": {"content": {"v": 1}}})
    # act a few milliseconds after each deadline, before the daemon need have recorded it (B5).
    # Real time on purpose: the one end-to-end check that both assignment
    # deadlines fire on the daemon's own wall clock (the others move a test clock).
    await asyncio.sleep(max(0.0, ts(took["deliver_by"]) - time.time()) + 0.005)
    await fails(b, "assignment.deliver", {"assignment": late_deliver, "content": {"v": 1}}, "conflict")
    await asyncio.sleep(max(0.0, ts(d["judge_by"]) - time.time()) + 0.005)
    await fails(a, "assignment.judge", {"assignment": late_judge, "verdict": "adopt"}, "conflict")
    assert await state(a, late_deliver) == "timed_out"
    assert await state(a, late_judge) == "undecided"
    await close_all(a, b)
