"""§6.2 and §6.5 over the real daemon: leaving, removal, role changes, closing and
deactivation, each with all its effects in one action (R6.2-*, R6.5-*, R4-5,
R4-6, R4-8, R8-27, R8-28)."""

from __future__ import annotations

import pytest

from kungfud.client import Client
from tests.e2e.thread_kit import (
    Member,
    admit_join,
    agents,
    all_entries,
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


async def assign(creator: Member, thread: str, to: Member, ask: list | None = None, **extra) -> str:
    args = {
        "thread": thread,
        "content": {"text": "work"},
        "assign": {"to": to.id, "content": {"criteria": "done"}, **extra},
    }
    if ask is not None:
        args["ask"] = ask
    return (await creator.act("thread.post", args))["assignment"]


async def state(who: Member, asg: str) -> str:
    return (await who.read("assignment.get", {"assignment": asg}))["state"]


def ob_of(items: list[dict], kind: str, **ref) -> str:
    [ob] = [i for i in items if i["obligation"] == kind and all(i["ref"].get(k) == v for k, v in ref.items())]
    return ob["obligation_id"]


@pytest.mark.rules("R6.2-1", "R6.2-10", "R6.2-11", "R6.2-12", "R8-27", "R8-34", "R9-2")
async def test_R6_2_12_leaving_voids_undelivered_assignments_it_took_or_created(daemon):
    a, b, c = await agents(daemon.url, "alice", "bob", "carol")
    t = await new_thread(a, (b, "speaker"), (c, "speaker"))
    await a.act("thread.post", {"thread": t, "content": {"q": 1}, "ask": [b.id]})  # entry 1: b owes a response
    took = await assign(a, t, b, ask=[])  # b takes it
    await b.act("assignment.take", {"assignment": took})
    made_open = await assign(b, t, c, ask=[])  # b created, untaken
    made_taken = await assign(b, t, c, ask=[])  # b created, c took
    await c.act("assignment.take", {"assignment": made_taken})
    b_turn, c_turn = await turn_items(b), await turn_items(c)
    expect = {
        ob_of(b_turn, "respond", entry=1),
        ob_of(b_turn, "deliver", assignment=took),
        ob_of(c_turn, "deliver", assignment=made_taken),
        took,
        made_open,
        made_taken,
    }
    r = await b.act("thread.leave", {"thread": t})
    assert r["thread"] == t and set(r["ended"]) == expect and len(r["ended"]) == len(expect)
    assert [await state(a, x) for x in (took, made_open, made_taken)] == ["voided"] * 3
    assert response_of(await entry(a, t, 1), b.id)["state"] == "ended"
    assert await turn_items(b) == [] and await turn_items(c) == []
    assert await opportunity_items(c) == []
    # the former member reads nothing of the thread any more (R9-2)
    await fails(b, "thread.get", {"thread": t}, "not_found")
    await fails(b, "assignment.get", {"assignment": took}, "not_found")
    assert b.id not in [m["agent"] for m in (await a.read("thread.get", {"thread": t}))["members"]]
    await close_all(a, b, c)


@pytest.mark.rules("R6.2-13", "R6.2-14", "R6.2-15", "R6.4-24")
async def test_R6_2_13_leaving_forfeits_judgment_which_settles_undecided_and_rejoining_revives_nothing(daemon):
    a, b = await agents(daemon.url, "alice", "bob")
    t = await new_thread(a, (b, "speaker"))
    await a.act("thread.post", {"thread": t, "content": {"q": 1}})  # entry 1: b owes a response
    voided = await assign(a, t, b, ask=[])
    await b.act("assignment.take", {"assignment": voided})
    delivered = await assign(b, t, a, ask=[], judge_within_s=2)  # b created, a delivers
    d = await a.act("assignment.take", {"assignment": delivered, "deliver": {"content": {"v": 1}}})
    judge_ob = ob_of(await turn_items(b), "judge", assignment=delivered)
    first_join = next(m for m in (await a.read("thread.get", {"thread": t}))["members"] if m["agent"] == b.id)
    r = await b.act("thread.leave", {"thread": t})
    assert judge_ob in r["ended"]
    got = await a.read("assignment.get", {"assignment": delivered})
    assert got["state"] == "delivered" and got["judge_by"] == d["judge_by"]  # not ended early
    assert got.get("obligations", []) == []
    # rejoining is a new membership that revives nothing
    j = await admit_join(a, t, b, "speaker")
    assert j["existing"] is False and j["joined_at"] != first_join["joined_at"]
    err = await fails(b, "assignment.judge", {"assignment": delivered, "verdict": "adopt"}, "forbidden")
    assert err["next"] == "stop"
    assert await state(b, voided) == "voided"
    await fails(b, "assignment.deliver", {"assignment": voided, "content": {"v": 1}}, "conflict")
    assert response_of(await entry(b, t, 1), b.id)["state"] == "ended"
    assert await turn_items(b) == []
    # R6.2-14: at the judgment deadline it settles undecided
    got = await poll(lambda: b.read("assignment.get", {"assignment": delivered}), lambda g: g["state"] != "delivered")
    assert got["state"] == "undecided" and "judgment" not in got
    await close_all(a, b)


@pytest.mark.rules("R6.2-2", "R6.2-20", "R6.2-10", "R6.2-11", "R8-27")
async def test_R6_2_10_removal_ends_pending_responses_and_voids_taken_work(daemon):
    a, b, c = await agents(daemon.url, "alice", "bob", "carol")
    t = await new_thread(a, (b, "speaker"), (c, "speaker"))
    await a.act("thread.post", {"thread": t, "content": {"q": 1}, "ask": [b.id, c.id]})
    asg = await assign(a, t, b, ask=[])
    await b.act("assignment.take", {"assignment": asg})
    items = await turn_items(b)
    # only a governor removes
    await fails(c, "thread.remove", {"thread": t, "agent": b.id}, "forbidden")
    r = await a.act("thread.remove", {"thread": t, "agent": b.id})
    assert r["thread"] == t and r["agent"] == b.id
    assert set(r["ended"]) == {i["obligation_id"] for i in items} | {asg}
    assert await state(a, asg) == "voided"
    e = await entry(a, t, 1)
    assert {x["agent"]: x["state"] for x in e["responses"]} == {b.id: "ended", c.id: "pending"}
    assert await turn_items(b) == []
    await fails(b, "thread.get", {"thread": t}, "not_found")
    await fails(a, "thread.remove", {"thread": t, "agent": b.id}, "conflict")  # no longer a member
    await close_all(a, b, c)


@pytest.mark.rules("R6.2-4", "R6.2-5", "R6.2-3", "R6.2-21")
async def test_R6_2_5_sole_governor_cannot_leave_an_open_thread(daemon):
    a, b = await agents(daemon.url, "alice", "bob")
    t = await new_thread(a, (b, "speaker"))
    err = await fails(a, "thread.leave", {"thread": t}, "conflict")
    assert err["next"] in ("stop", "revise", "retry")
    # nor demote itself as the last governor
    await fails(a, "thread.set_role", {"thread": t, "agent": a.id, "role": "speaker"}, "conflict")
    # a speaker cannot change roles
    await fails(b, "thread.set_role", {"thread": t, "agent": b.id, "role": "governor"}, "forbidden")
    ws = await b.read("thread.get", {"thread": t})
    assert {m["agent"]: m["role"] for m in ws["members"]} == {a.id: "governor", b.id: "speaker"}
    # after handing over, it may leave
    r = await a.act("thread.set_role", {"thread": t, "agent": b.id, "role": "governor"})
    assert r["role"] == "governor" and r["ended"] == []
    await a.act("thread.leave", {"thread": t})
    ws = await b.read("thread.get", {"thread": t})
    assert ws["status"] == "open" and [(m["agent"], m["role"]) for m in ws["members"]] == [(b.id, "governor")]
    await close_all(a, b)


@pytest.mark.rules("R6.2-8", "R6.2-9", "R6.2-6", "R6.2-7", "R8-27", "R6.2-24")
async def test_R6_2_8_demotion_ends_pending_responses_but_not_assignments(daemon):
    a, b = await agents(daemon.url, "alice", "bob")
    t = await new_thread(a, (b, "speaker"))
    await a.act("thread.post", {"thread": t, "content": {"q": 1}})  # b owes a response
    taken = await assign(a, t, b, ask=[])
    await b.act("assignment.take", {"assignment": taken})
    untaken = await assign(a, t, b, ask=[])
    created = await assign(b, t, a, ask=[])
    await a.act("assignment.take", {"assignment": created, "deliver": {"content": {"v": 1}}})
    items = await turn_items(b)
    respond = ob_of(items, "respond", entry=1)
    r = await a.act("thread.set_role", {"thread": t, "agent": b.id, "role": "observer"})
    assert r == {"thread": t, "agent": b.id, "role": "observer", "ended": [respond]}
    assert response_of(await entry(a, t, 1), b.id)["state"] == "ended"
    assert {i["obligation"] for i in await turn_items(b)} == {"deliver", "judge"}
    # R6.2-9, R6.2-6: the observer still takes, delivers, judges, drops
    assert (await b.act("assignment.deliver", {"assignment": taken, "content": {"v": 2}}))["state"] == "delivered"
    assert (await b.act("assignment.judge", {"assignment": created, "verdict": "adopt"}))["state"] == "adopted"
    assert [o["ref"]["assignment"] for o in await opportunity_items(b)] == [untaken]
    await b.act("assignment.take", {"assignment": untaken})
    assert (await b.act("assignment.drop", {"assignment": untaken}))["state"] == "dropped"
    # R6.2-7: but creates none, and posts nothing
    await fails(b, "thread.post", {"thread": t, "content": {"x": 1}, "assign": {"to": a.id, "content": {"criteria": "c"}}}, "forbidden")
    await fails(b, "thread.post", {"thread": t, "content": {"x": 1}}, "forbidden")
    assert await turn_items(b) == []
    await close_all(a, b)


@pytest.mark.rules("R6.2-9", "R6.2-6")
async def test_R6_2_9_demoted_creator_still_voids_and_judges(daemon):
    a, b, c = await agents(daemon.url, "alice", "bob", "carol")
    t = await new_thread(a, (b, "speaker"), (c, "speaker"))
    to_void = await assign(b, t, c, ask=[])
    to_judge = await assign(b, t, c, ask=[])
    await c.act("assignment.take", {"assignment": to_judge, "deliver": {"content": {"v": 1}}})
    await a.act("thread.set_role", {"thread": t, "agent": b.id, "role": "observer"})
    assert (await b.act("assignment.void", {"assignment": to_void}))["state"] == "voided"
    r = await b.act("assignment.judge", {"assignment": to_judge, "verdict": "reject", "content": {"reason": "r"}})
    assert r["state"] == "rejected"
    await close_all(a, b, c)


@pytest.mark.rules(
    "R6.5-1", "R6.5-2", "R6.5-3", "R6.5-4", "R6.5-5", "R6.5-6", "R6.5-8", "R6.5-9", "R6.5-10", "R6.5-11",
    "R6.2-22", "R8-28",
)
async def test_R6_5_3_closing_ends_pending_voids_undelivered_and_keeps_delivered_judgeable(daemon):
    a, b = await agents(daemon.url, "alice", "bob")
    t = await new_thread(a, (b, "speaker"))
    await a.act("thread.post", {"thread": t, "content": {"q": 1}})  # b owes a response
    untaken = await assign(a, t, b, ask=[])
    taken = await assign(a, t, b, ask=[])
    await b.act("assignment.take", {"assignment": taken})
    delivered = await assign(a, t, b, ask=[])
    d = await b.act("assignment.take", {"assignment": delivered, "deliver": {"content": {"v": 1}}})
    b_items = await turn_items(b)
    # only a governor closes
    await fails(b, "thread.close", {"thread": t}, "forbidden")
    r = await a.act("thread.close", {"thread": t})
    assert r["thread"] == t and r["status"] == "closed"
    expect = {ob_of(b_items, "respond", entry=1), ob_of(b_items, "deliver", assignment=taken), untaken, taken}
    assert set(r["ended"]) == expect and len(r["ended"]) == len(expect)
    assert [await state(a, x) for x in (untaken, taken, delivered)] == ["voided", "voided", "delivered"]
    got = await a.read("assignment.get", {"assignment": delivered})
    assert got["judge_by"] == d["judge_by"]  # R6.5-5
    assert await turn_items(b) == [] and await opportunity_items(b) == []
    assert [i["obligation"] for i in await turn_items(a)] == ["judge"]
    # members remain and read the closed thread (R6.5-8)
    ws = await b.read("thread.get", {"thread": t})
    assert ws["status"] == "closed" and len(ws["members"]) == 2
    assert response_of(await entry(b, t, 1), b.id)["state"] == "ended"
    # read-only: no post, no admission, no role change, no take, no second close (R6.5-9, R6.5-11)
    await fails(a, "thread.post", {"thread": t, "content": {"x": 1}}, "conflict")
    await fails(b, "thread.post", {"thread": t, "content": {"x": 1}}, "conflict")
    await fails(a, "thread.admit", {"thread": t}, "conflict")
    await fails(a, "thread.set_role", {"thread": t, "agent": b.id, "role": "governor"}, "conflict")
    await fails(a, "thread.close", {"thread": t}, "conflict")
    # the creator still judges (R6.5-6)
    assert (await a.act("assignment.judge", {"assignment": delivered, "verdict": "adopt"}))["state"] == "adopted"
    assert await turn_items(a) == []
    # members may still leave, the sole governor too (R6.5-10)
    await b.act("thread.leave", {"thread": t})
    await a.act("thread.leave", {"thread": t})
    await fails(a, "thread.get", {"thread": t}, "not_found")
    assert (await a.read("thread.list", {}))["items"] == []
    await close_all(a, b)


@pytest.mark.rules("R4-5", "R4-6", "R4-8", "R4-4", "R4-1", "R9-2", "R6.2-10", "R6.2-11", "R6.2-13", "R6.5-3", "R6.5-4")
async def test_R4_8_deactivation_ends_memberships_and_closes_a_thread_left_without_governor(daemon):
    a, b, c = await agents(daemon.url, "alice", "bob", "carol")
    solo = await new_thread(a, (b, "speaker"))  # a is its only governor
    await a.act("thread.post", {"thread": solo, "content": {"q": "from alice"}})  # b owes a response
    await b.act("thread.post", {"thread": solo, "content": {"q": "from bob"}})  # a owes a response
    open_asg = await assign(a, solo, b, ask=[])
    delivered = await assign(a, solo, b, ask=[], judge_within_s=3600)
    await b.act("assignment.take", {"assignment": delivered, "deliver": {"content": {"v": 1}}})
    shared = await new_thread(c, (a, "governor"), (b, "speaker"))  # c governs too
    await c.act("thread.post", {"thread": shared, "content": {"q": 1}, "ask": [a.id, b.id]})
    by_a = (await a.act("thread.post", {"thread": shared, "content": {"q": 2}, "ask": []}))["entry"]
    taken = await assign(c, shared, a, ask=[])
    await a.act("assignment.take", {"assignment": taken})
    a_items, b_items = await turn_items(a), await turn_items(b)
    assert len(a_items) == 4  # respond ×2, deliver, judge

    async with await Client.connect(daemon.url, daemon.admin_key) as admin:
        r = await admin.act("admin.agent.set_status", {"agent": a.id, "status": "deactivated"})
    assert r["agent"] == a.id and r["status"] == "deactivated"
    assert {i["obligation_id"] for i in a_items} <= set(r["ended"])
    assert {open_asg, taken} <= set(r["ended"])
    b_solo = [i for i in b_items if i["ref"]["thread"] == solo]
    assert {i["obligation_id"] for i in b_solo} <= set(r["ended"])  # ended by the closing, same action

    # the thread a governed alone is closed with every §6.5 effect (R4-8)
    ws = await b.read("thread.get", {"thread": solo})
    assert ws["status"] == "closed" and [m["agent"] for m in ws["members"]] == [b.id]
    assert ws["admission"] is None
    assert await state(b, open_asg) == "voided"
    got = await b.read("assignment.get", {"assignment": delivered})
    assert got["state"] == "delivered" and got.get("forfeited") is True  # R6.2-13: nobody may judge it
    assert (got["creator"], got["taker"]) == (a.id, b.id)  # R4-5
    # the other thread stays open without a (R4-6); its effects are §6.2's
    ws = await b.read("thread.get", {"thread": shared})
    assert ws["status"] == "open" and a.id not in [m["agent"] for m in ws["members"]]
    assert await state(c, taken) == "voided"
    assert response_of(await entry(c, shared, 1), a.id)["state"] == "ended"
    assert response_of(await entry(c, shared, 1), b.id)["state"] == "pending"
    assert [i["ref"] for i in await turn_items(b)] == [{"thread": shared, "entry": 1}]
    assert await turn_items(a) == [] and await turn_items(c) == []
    # entries keep their author (R4-5, R4-4)
    entries = await all_entries(b, solo, full=True)
    assert [(e["author"], e["content"]) for e in entries[:2]] == [(a.id, {"q": "from alice"}), (b.id, {"q": "from bob"})]
    # a reply to the deactivated author's entry has no responder (R6.3-8, DECISIONS.md B11)
    r = await b.act("thread.post", {"thread": shared, "content": {"re": 1}, "reply_to": by_a})
    assert r["responders"] == []
    # a deactivated agent is no member anywhere and may not act
    await fails(a, "thread.get", {"thread": solo}, "not_found")
    assert (await a.read("thread.list", {}))["items"] == []
    await fails(a, "thread.create", {}, "forbidden")
    await fails(a, "thread.post", {"thread": shared, "content": {"x": 1}}, "forbidden")
    # reactivation restores nothing (DECISIONS.md B2)
    async with await Client.connect(daemon.url, daemon.admin_key) as admin:
        r = await admin.act("admin.agent.set_status", {"agent": a.id, "status": "active"})
    assert r["status"] == "active" and r["ended"] == []
    assert (await a.read("thread.list", {}))["items"] == []
    await fails(a, "thread.get", {"thread": shared}, "not_found")
    assert await turn_items(a) == []
    await close_all(a, b, c)


@pytest.mark.rules("R6.2-11", "R6.4-8", "R8-4")
async def test_R6_4_8_an_untaken_assignment_to_a_departed_member_stays_open_for_its_return(daemon):
    """DECISIONS.md B14: not voided; an opportunity only while the addressee is a member."""
    a, b = await agents(daemon.url, "alice", "bob")
    t = await new_thread(a, (b, "speaker"))
    x = await assign(a, t, b, ask=[])
    await b.act("thread.leave", {"thread": t})
    assert await state(a, x) == "open"
    assert await opportunity_items(b) == []
    await admit_join(a, t, b)
    assert [o["ref"] for o in await opportunity_items(b)] == [{"thread": t, "assignment": x}]
    assert (await b.act("assignment.take", {"assignment": x}))["state"] == "taken"
    await close_all(a, b)


@pytest.mark.rules("L2-7", "R6.2-3")
async def test_L2_7_setting_the_role_a_member_already_has_is_a_conflict(daemon):
    a, b = await agents(daemon.url, "alice", "bob")
    t = await new_thread(a, (b, "speaker"))
    await fails(a, "thread.set_role", {"thread": t, "agent": b.id, "role": "speaker"}, "conflict")
    await fails(a, "thread.set_role", {"thread": t, "agent": a.id, "role": "governor"}, "conflict")
    await close_all(a, b)
