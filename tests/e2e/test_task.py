"""§7 Tasks over the real daemon: the whole life cycle, who reads what (§9 Task
rows, R12-9), revisions, turns (B23), repeated and combined takes (L2-6,
R7.3-14), rejection reasons, real deadlines, Tasks referenced from a Thread
(R7.5-5, B22), opportunities (B24), pause (B20) and a deactivated author (B2)."""

from __future__ import annotations

import asyncio
import secrets
import time
from typing import Any

import pytest

from kungfud.client import Client, new_key

from .helpers import agent_client


@pytest.fixture
def daemon(shared_daemon):
    """One daemon for the module (tests/conftest.py ``shared_daemon``): each test
    registers agents of its own and reads only what they wrote; the three that
    read task.list, which lists every open Task of the daemon, start their own."""
    return shared_daemon


_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"
CONTENT = {"output": "a haiku about autumn", "criteria": "5-7-5 syllables"}


def ghost(prefix: str) -> str:
    """An id of the daemon's shape that names nothing."""
    return prefix + "".join(secrets.choice(_ALPHABET) for _ in range(26))


def contract(**kw: Any) -> dict:
    return {"content": dict(CONTENT), **kw}


async def failure(c: Client, op: str, args: dict, code: str) -> dict:
    """The request must fail with ``code`` (WIRE.md "Failure"); returns the error."""
    resp = await c.request(op, args, key=new_key() if op not in READS else None)
    assert resp["ok"] is False, resp
    err = resp["error"]
    assert err["code"] == code, resp
    assert err["next"] in {"retry", "wait", "revise", "stop"} and err["reason"].strip(), resp
    return err


READS = {"task.get", "task.list", "engagement.get", "turn", "opportunities", "thread.entries", "thread.get", "memory.get"}


def same_as_never_existing(err: dict, real: str, err_ghost: dict, fake: str) -> None:
    """R9-4, R12-9: an unreadable object's refusal equals a missing id's, byte for
    byte once the id itself is blanked."""
    a = {**err, "reason": err["reason"].replace(real, "<id>")}
    b = {**err_ghost, "reason": err_ghost["reason"].replace(fake, "<id>")}
    assert a == b, (err, err_ghost)
    assert real not in a["reason"]


async def turn_items(c: Client) -> list[dict]:
    items: list[dict] = []
    cursor = None
    while True:
        page = await c.read("turn", {"cursor": cursor, "limit": 100})
        items += page["items"]
        cursor = page["cursor"]
        if cursor is None:
            return items


async def task_obligations(c: Client) -> set[tuple[str, str]]:
    return {(i["obligation"], i["ref"]["engagement"]) for i in await turn_items(c) if "task" in i["ref"]}


async def eventually(check, timeout: float = 6.0, every: float = 0.1):
    """Poll ``check()`` (async, truthy when done) until it holds."""
    deadline = time.monotonic() + timeout
    while True:
        got = await check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached within {timeout} s: {got!r}")
        await asyncio.sleep(every)  # a condition, bounded: an expiry the daemon records on its own


# --- the life cycle -------------------------------------------------------------------


@pytest.mark.rules("R7.3-2", "R7.3-3", "R7.3-12", "R7.3-16", "R8-29", "R8-31", "R8-35", "R8-37", "R9-15", "R9-16", "R9-17", "B23")
async def test_task_life_cycle_take_deliver_adopt(make_daemon):
    daemon = make_daemon()  # a daemon of its own: task.list lists every open Task of the daemon
    url = daemon.url
    alice, a = await agent_client(url, "alice")
    bob, b = await agent_client(url, "bob")
    carol, _ = await agent_client(url, "carol")
    m = await alice.act("memory.create", {"content": {"text": "the brief"}})
    created = await alice.act("task.create", {"audience": "open", "contract": contract(
        inputs=[{"memory": m["memory"], "version": 1}], deliver_within_s=600, judge_within_s=600)})
    t = created["task"]
    assert created == {"task": t, "contract_version": 1}

    # Anyone reads an open Task's contract layer; it shows the defaults and terms.
    got = await carol.read("task.get", {"task": t})
    assert got["author"] == a and got["audience"] == "open" and got["accepting"] is True
    assert got["contract"]["content"] == CONTENT and got["contract"]["on_no_judgment"] == "undecided"
    assert got["contract"]["inputs"] == [{"memory": m["memory"], "version": 1}]
    assert t in [i["task"] for i in (await carol.read("task.list", {}))["items"]]
    assert t in [i["task"] for i in (await alice.read("task.list", {"mine": True}))["items"]]

    took = await bob.act("task.take", {"task": t})
    e = took["engagement"]
    assert took["existing"] is False and took["state"] == "taken" and took["contract_version"] == 1
    assert took["inputs"] == [{"memory": m["memory"], "version": 1}]
    # R8-29: the deliver obligation is in the taker's turn, nowhere else.
    [ob] = [i for i in await turn_items(bob) if i["ref"].get("engagement") == e]
    assert ob["obligation"] == "deliver" and ob["next"] == "deliver"
    assert ob["ref"] == {"task": t, "engagement": e} and ob["due"] == took["deliver_by"]
    assert await task_obligations(alice) == set() and await task_obligations(carol) == set()

    eng = await bob.read("engagement.get", {"engagement": e})
    assert eng["state"] == "taken" and eng["agent"] == b and eng["judge"] == a
    assert eng["inputs"] == [{"memory": m["memory"], "version": 1, "content": {"text": "the brief"}}]

    delivered = await bob.act("task.deliver", {"engagement": e, "content": {"poem": "an old silent pond"}})
    assert delivered["engagement"] == e and delivered["state"] == "delivered" and "judge_by" in delivered
    assert await task_obligations(bob) == set()  # R8-31
    assert await task_obligations(alice) == {("judge", e)}  # R8-35, B23

    judged = await alice.act("task.judge", {"engagement": e, "verdict": "adopt"})
    assert judged["engagement"] == e and judged["state"] == "adopted"
    assert await task_obligations(alice) == set()  # R8-37

    for reader in (alice, bob):
        eng = await reader.read("engagement.get", {"engagement": e})
        assert eng["state"] == "adopted"
        assert eng["delivery"]["content"] == {"poem": "an old silent pond"}
        assert eng["judgment"]["verdict"] == "adopt"
    got = await alice.read("task.get", {"task": t})
    assert got["adoptions"] == 1
    assert [x["content"] for x in got["adopted"]] == [{"poem": "an old silent pond"}]
    # R9-17, T3: readers default to the parties; a stranger sees no adopted content.
    assert (await carol.read("task.get", {"task": t}))["adopted"] == []
    await failure(carol, "engagement.get", {"engagement": e}, "not_found")
    for c in (alice, bob, carol):
        await c.close()


@pytest.mark.rules("R9-17", "T3")
async def test_T3_public_readers_read_adopted_content(daemon):
    alice, _ = await agent_client(daemon.url, "alice")
    bob, _ = await agent_client(daemon.url, "bob")
    carol, _ = await agent_client(daemon.url, "carol")
    t = (await alice.act("task.create", {"audience": "open", "contract": contract(readers="public")}))["task"]
    e = (await bob.act("task.take", {"task": t, "deliver": {"content": {"poem": "public"}}}))["engagement"]
    assert (await carol.read("task.get", {"task": t}))["adopted"] == []  # not adopted yet
    await alice.act("task.judge", {"engagement": e, "verdict": "adopt"})
    adopted = (await carol.read("task.get", {"task": t}))["adopted"]
    assert [x["content"] for x in adopted] == [{"poem": "public"}]
    await failure(carol, "engagement.get", {"engagement": e}, "not_found")  # R9-16 still holds
    for c in (alice, bob, carol):
        await c.close()


# --- who reads what --------------------------------------------------------------------


@pytest.mark.rules("R7.2-3", "R9-14", "R12-9", "R9-4")
async def test_R9_14_restricted_task_is_not_found_for_outsiders_like_a_missing_id(make_daemon):
    daemon = make_daemon()  # a daemon of its own: task.list lists every open Task of the daemon
    alice, _ = await agent_client(daemon.url, "alice")
    bob, b = await agent_client(daemon.url, "bob")
    jude, j = await agent_client(daemon.url, "jude")
    eve, _ = await agent_client(daemon.url, "eve")
    t = (await alice.act("task.create", {"audience": {"agents": [b]}, "contract": contract(judge=j)}))["task"]
    fake = ghost("tk_")
    for op, args in [
        ("task.get", {"task": t}),
        ("task.get", {"task": t, "contract_version": 1}),
        ("task.take", {"task": t}),
        ("task.take", {"task": t, "deliver": {"content": {"x": 1}}}),
        ("task.revise", {"task": t, "contract": contract()}),
        ("task.pause", {"task": t}),
    ]:
        hidden = await failure(eve, op, args, "not_found")
        missing = await failure(eve, op, {**args, "task": fake}, "not_found")
        same_as_never_existing(hidden, t, missing, fake)
    # task.list: not listed for outsiders, listed for the named agent.
    assert t not in [i["task"] for i in (await eve.read("task.list", {}))["items"]]
    listed = [i for i in (await bob.read("task.list", {}))["items"] if i["task"] == t]
    assert listed and listed[0]["audience"] == "restricted"
    # The author, the named agent and the judge read the contract layer (R9-14).
    for c in (alice, bob, jude):
        got = await c.read("task.get", {"task": t})
        assert got["audience"] == {"agents": [b]} and got["contract"]["judge"] == j
    # Opportunities: the named agent's, not the outsider's (B24).
    assert [i["ref"] for i in (await eve.read("opportunities", {}))["items"]] == []
    for c in (alice, bob, jude, eve):
        await c.close()


@pytest.mark.rules("R9-16", "R12-9", "R7.3-9")
async def test_R9_16_engagement_get_only_for_author_engaged_agent_and_judge(daemon):
    alice, a = await agent_client(daemon.url, "alice")
    jude, j = await agent_client(daemon.url, "jude")
    bob, b = await agent_client(daemon.url, "bob")
    carol, c_ = await agent_client(daemon.url, "carol")
    eve, _ = await agent_client(daemon.url, "eve")
    t = (await alice.act("task.create", {"audience": "open", "contract": contract(judge=j)}))["task"]
    e = (await bob.act("task.take", {"task": t, "deliver": {"content": {"poem": "bob's"}}}))["engagement"]
    e2 = (await carol.act("task.take", {"task": t}))["engagement"]
    for reader in (alice, bob, jude):
        eng = await reader.read("engagement.get", {"engagement": e})
        assert (eng["agent"], eng["author"], eng["judge"]) == (b, a, j)
        assert eng["delivery"]["content"] == {"poem": "bob's"}
    fake = ghost("en_")
    for outsider in (carol, eve):  # a peer taker of the same Task, and a stranger
        for op, args in [
            ("engagement.get", {"engagement": e}),
            ("task.deliver", {"engagement": e, "content": {"x": 1}}),
            ("task.drop", {"engagement": e}),
            ("task.judge", {"engagement": e, "verdict": "adopt"}),
        ]:
            hidden = await failure(outsider, op, args, "not_found")
            missing = await failure(outsider, op, {**args, "engagement": fake}, "not_found")
            same_as_never_existing(hidden, e, missing, fake)
    # task.get shows a peer only its own engagement; the author and judge see both.
    assert [x["engagement"] for x in (await carol.read("task.get", {"task": t}))["engagements"]] == [e2]
    assert (await eve.read("task.get", {"task": t}))["engagements"] == []
    for reader in (alice, jude):
        assert {x["engagement"] for x in (await reader.read("task.get", {"task": t}))["engagements"]} == {e, e2}
    for c in (alice, jude, bob, carol, eve):
        await c.close()


@pytest.mark.rules("R9-15", "R7.1-2", "R5-14")
async def test_R9_15_bound_inputs_stay_readable_after_the_author_withdraws_them(daemon):
    alice, _ = await agent_client(daemon.url, "alice")
    jude, j = await agent_client(daemon.url, "jude")
    bob, _ = await agent_client(daemon.url, "bob")
    carol, _ = await agent_client(daemon.url, "carol")
    m = (await alice.act("memory.create", {"content": {"spec": "v1"}}))["memory"]
    await alice.act("memory.update", {"memory": m, "content": {"spec": "v2"}})
    t = (await alice.act("task.create", {"audience": "open", "contract": contract(
        judge=j, inputs=[{"memory": m, "version": 1}])}))["task"]
    e = (await bob.act("task.take", {"task": t}))["engagement"]
    await alice.act("memory.withdraw", {"memory": m})
    # The Memory itself is no longer readable to them…
    await failure(bob, "memory.get", {"memory": m}, "not_found")
    # …but the bound version is, to the engaged agent and the judge.
    for reader in (bob, jude):
        eng = await reader.read("engagement.get", {"engagement": e})
        assert eng["inputs"] == [{"memory": m, "version": 1, "content": {"spec": "v1"}}]
    await failure(carol, "engagement.get", {"engagement": e}, "not_found")
    # The engagement goes on to its end.
    await bob.act("task.deliver", {"engagement": e, "content": {"done": True}})
    await jude.act("task.judge", {"engagement": e, "verdict": "adopt"})
    eng = await bob.read("engagement.get", {"engagement": e})
    assert eng["state"] == "adopted" and eng["inputs"][0]["content"] == {"spec": "v1"}
    # A withdrawn Memory cannot become a new required input (R5-11).
    await failure(alice, "task.revise", {"task": t, "contract": contract(inputs=[{"memory": m, "version": 1}])}, "conflict")
    for c in (alice, jude, bob, carol):
        await c.close()


# --- revisions --------------------------------------------------------------------------


@pytest.mark.rules("R7.1-8", "R7.1-9", "R7.1-10", "R7.1-7", "R9-13", "R7.3-20")
async def test_R7_1_9_a_revision_binds_only_later_engagements(daemon):
    alice, a = await agent_client(daemon.url, "alice")
    jude, j = await agent_client(daemon.url, "jude")
    bob, _ = await agent_client(daemon.url, "bob")
    carol, _ = await agent_client(daemon.url, "carol")
    eve, _ = await agent_client(daemon.url, "eve")
    t = (await alice.act("task.create", {"audience": "open", "contract": contract(deliver_within_s=600)}))["task"]
    e1 = (await bob.act("task.take", {"task": t}))["engagement"]
    await failure(bob, "task.revise", {"task": t, "contract": contract()}, "forbidden")
    v2 = {"output": "two haiku", "criteria": "both 5-7-5"}
    revised = await alice.act("task.revise", {"task": t, "contract": {"content": v2, "judge": j, "deliver_within_s": 900}})
    assert revised == {"task": t, "contract_version": 2}
    e2 = (await carol.act("task.take", {"task": t}))["engagement"]
    eng1 = await bob.read("engagement.get", {"engagement": e1})
    eng2 = await carol.read("engagement.get", {"engagement": e2})
    assert (eng1["contract_version"], eng1["judge"], eng1["state"]) == (1, a, "taken")  # R7.3-20
    assert (eng2["contract_version"], eng2["judge"]) == (2, j)
    # R9-13: anyone reads every version; version 1 is unchanged (R7.1-7).
    assert (await eve.read("task.get", {"task": t}))["contract"]["content"] == v2
    old = await eve.read("task.get", {"task": t, "contract_version": 1})
    assert old["contract"]["content"] == CONTENT and old["contract"]["version"] == 1
    assert old["contract"]["deliver_within_s"] == 600
    # R7.1-10: each is judged under its bound version's judge.
    await bob.act("task.deliver", {"engagement": e1, "content": {"x": 1}})
    await carol.act("task.deliver", {"engagement": e2, "content": {"x": 2}})
    await failure(jude, "task.judge", {"engagement": e1, "verdict": "adopt"}, "not_found")  # no party of e1
    await failure(alice, "task.judge", {"engagement": e2, "verdict": "adopt"}, "forbidden")  # B17
    assert await task_obligations(alice) == {("judge", e1)}
    assert await task_obligations(jude) == {("judge", e2)}
    assert (await alice.act("task.judge", {"engagement": e1, "verdict": "adopt"}))["state"] == "adopted"
    assert (await jude.act("task.judge", {"engagement": e2, "verdict": "adopt"}))["state"] == "adopted"
    for c in (alice, jude, bob, carol, eve):
        await c.close()


# --- turns, repeated and combined takes --------------------------------------------------


@pytest.mark.rules("B23", "R8-30", "R8-36", "R8-6", "R8-7")
async def test_B23_judge_obligations_in_the_judges_turn_deliver_obligations_in_the_takers(daemon):
    alice, _ = await agent_client(daemon.url, "alice")
    jude, j = await agent_client(daemon.url, "jude")
    bob, _ = await agent_client(daemon.url, "bob")
    carol, _ = await agent_client(daemon.url, "carol")
    t = (await alice.act("task.create", {"audience": "open", "contract": contract(judge=j)}))["task"]
    e1 = (await bob.act("task.take", {"task": t}))["engagement"]
    e2 = (await carol.act("task.take", {"task": t, "deliver": {"content": {"c": 1}}}))["engagement"]
    assert await task_obligations(bob) == {("deliver", e1)}
    assert await task_obligations(carol) == set()
    assert await task_obligations(jude) == {("judge", e2)}
    assert await task_obligations(alice) == set()  # the author holds no judge duty here
    await bob.act("task.deliver", {"engagement": e1, "content": {"b": 1}})
    items = [i for i in await turn_items(jude) if "task" in i["ref"]]
    assert [i["ref"]["engagement"] for i in items] == [e2, e1]  # ordered by when each arose
    assert all(i["obligation"] == "judge" and i["next"] == "judge" and "due" in i for i in items)
    await jude.act("task.judge", {"engagement": e2, "verdict": "reject", "content": {"reason": "too short"}})
    assert await task_obligations(jude) == {("judge", e1)}
    for c in (alice, jude, bob, carol):
        await c.close()


@pytest.mark.rules("L2-6", "R7.3-8", "L3-2")
async def test_L2_6_taking_again_returns_the_same_engagement_with_existing_true(clocked_daemon):
    daemon = clocked_daemon
    alice, _ = await agent_client(daemon.url, "alice")
    bob, _ = await agent_client(daemon.url, "bob")
    t = (await alice.act("task.create", {"audience": "open", "contract": contract()}))["task"]
    key = new_key()
    first = await bob.act("task.take", {"task": t}, key=key)
    daemon.advance_clock(1)  # taken again later: the receipt is still the first one's, times and all
    again = await bob.act("task.take", {"task": t})  # a new request: L2-6
    assert again == {**first, "existing": True}
    replay = await bob.request("task.take", {"task": t}, key=key)  # the same request: L3
    assert replay["replayed"] is True and replay["result"] == first
    assert len((await bob.read("task.get", {"task": t}))["engagements"]) == 1
    assert await task_obligations(bob) == {("deliver", first["engagement"])}
    for c in (alice, bob):
        await c.close()


@pytest.mark.rules("R7.3-14", "R7.3-15", "R7.3-13", "L2-2")
async def test_R7_3_14_take_and_deliver_in_one_action(daemon):
    alice, _ = await agent_client(daemon.url, "alice")
    bob, _ = await agent_client(daemon.url, "bob")
    carol, _ = await agent_client(daemon.url, "carol")
    t = (await alice.act("task.create", {"audience": "open", "contract": contract(judge_within_s=600)}))["task"]
    r = await bob.act("task.take", {"task": t, "deliver": {"content": {"poem": "in one go"}}})
    e = r["engagement"]
    assert r["state"] == "delivered" and r["existing"] is False and "judge_by" in r
    eng = await bob.read("engagement.get", {"engagement": e})
    assert eng["state"] == "delivered" and eng["delivery"]["content"] == {"poem": "in one go"}
    assert await task_obligations(bob) == set() and await task_obligations(alice) == {("judge", e)}
    # A delivery cannot be replaced, through either op.
    await failure(bob, "task.take", {"task": t, "deliver": {"content": {"poem": "again"}}}, "conflict")
    await failure(bob, "task.deliver", {"engagement": e, "content": {"poem": "again"}}, "conflict")
    # With an open engagement, the combined action delivers on it.
    e2 = (await carol.act("task.take", {"task": t}))["engagement"]
    mem = await carol.act("memory.create", {"content": {"poem": "carol's"}})
    r2 = await carol.act("task.take", {"task": t, "deliver": {"memory": {"memory": mem["memory"], "version": 1}}})
    assert (r2["engagement"], r2["existing"], r2["state"]) == (e2, True, "delivered")
    # The combined action gains no permission (L2-2): another agent's Memory is refused whole.
    dave, _ = await agent_client(daemon.url, "dave")
    pub = (await bob.act("memory.create", {"content": {"x": 1}}))["memory"]
    await bob.act("memory.publish", {"memory": pub})
    await failure(dave, "task.take", {"task": t, "deliver": {"memory": {"memory": pub, "version": 1}}}, "forbidden")
    assert (await dave.read("task.get", {"task": t}))["engagements"] == []
    for c in (alice, bob, carol, dave):
        await c.close()


@pytest.mark.rules("R7.3-17", "R8-38")
async def test_R7_3_17_reject_needs_a_reason_which_the_engaged_agent_reads(daemon):
    alice, _ = await agent_client(daemon.url, "alice")
    bob, _ = await agent_client(daemon.url, "bob")
    t = (await alice.act("task.create", {"audience": "open", "contract": contract()}))["task"]
    e = (await bob.act("task.take", {"task": t, "deliver": {"content": {"poem": "rough"}}}))["engagement"]
    err = await failure(alice, "task.judge", {"engagement": e, "verdict": "reject"}, "bad_request")
    assert "reason" in err["reason"]
    await failure(alice, "task.judge", {"engagement": e, "verdict": "reject", "content": {"why": "x"}}, "bad_request")
    assert (await bob.read("engagement.get", {"engagement": e}))["state"] == "delivered"
    r = await alice.act("task.judge", {"engagement": e, "verdict": "reject", "content": {"reason": "line 2 has 8 syllables"}})
    assert r["state"] == "rejected"
    eng = await bob.read("engagement.get", {"engagement": e})
    assert eng["state"] == "rejected"
    assert eng["judgment"]["verdict"] == "reject"
    assert eng["judgment"]["content"] == {"reason": "line 2 has 8 syllables"}
    assert await task_obligations(alice) == set()
    await failure(alice, "task.judge", {"engagement": e, "verdict": "adopt"}, "conflict")  # R7.3-25
    for c in (alice, bob):
        await c.close()


# --- real deadlines ---------------------------------------------------------------------


@pytest.mark.rules("R7.3-10", "R8-33", "L4-2", "L4-3")
async def test_R7_3_10_a_real_delivery_deadline_ends_it_as_timed_out(daemon):
    alice, _ = await agent_client(daemon.url, "alice")
    bob, _ = await agent_client(daemon.url, "bob")
    t = (await alice.act("task.create", {"audience": "open", "contract": contract(deliver_within_s=1)}))["task"]
    e = (await bob.act("task.take", {"task": t}))["engagement"]
    assert await task_obligations(bob) == {("deliver", e)}

    async def timed_out():
        eng = await bob.read("engagement.get", {"engagement": e})
        return eng["state"] == "timed_out" and "ended_at" in eng  # recorded, not only shown

    await eventually(timed_out)
    assert await task_obligations(bob) == set()
    await failure(bob, "task.deliver", {"engagement": e, "content": {"late": True}}, "conflict")
    await failure(bob, "task.drop", {"engagement": e}, "conflict")
    # A new engagement may follow (the old one ended).
    again = await bob.act("task.take", {"task": t})
    assert again["existing"] is False and again["engagement"] != e
    for c in (alice, bob):
        await c.close()


@pytest.mark.rules("R7.3-18", "R7.1-4", "R8-39", "L4-2")
async def test_R7_3_18_a_real_judgment_deadline_adopts_as_the_contract_states(daemon):
    alice, _ = await agent_client(daemon.url, "alice")
    bob, _ = await agent_client(daemon.url, "bob")
    carol, _ = await agent_client(daemon.url, "carol")
    t = (await alice.act("task.create", {"audience": "open", "contract": contract(
        judge_within_s=1, on_no_judgment="adopt")}))["task"]
    u = (await alice.act("task.create", {"audience": "open", "contract": contract(judge_within_s=1)}))["task"]
    e = (await bob.act("task.take", {"task": t, "deliver": {"content": {"poem": "unjudged"}}}))["engagement"]
    f = (await carol.act("task.take", {"task": u, "deliver": {"content": {"poem": "unjudged"}}}))["engagement"]
    assert await task_obligations(alice) == {("judge", e), ("judge", f)}

    async def settled():  # both expiries recorded, not only shown (L4-3)
        adoptions = (await alice.read("task.get", {"task": t}))["adoptions"]
        other = await alice.read("engagement.get", {"engagement": f})
        return adoptions == 1 and "ended_at" in other

    await eventually(settled)
    assert (await bob.read("engagement.get", {"engagement": e}))["state"] == "adopted"
    assert (await carol.read("engagement.get", {"engagement": f}))["state"] == "undecided"
    assert (await alice.read("task.get", {"task": u}))["adoptions"] == 0
    assert await task_obligations(alice) == set()
    await failure(alice, "task.judge", {"engagement": e, "verdict": "reject", "content": {"reason": "late"}}, "conflict")
    for c in (alice, bob, carol):
        await c.close()


# --- Tasks and Threads, opportunities --------------------------------------------------------


@pytest.mark.rules("R7.5-1", "R7.5-2", "R7.5-3", "R7.5-4", "R7.5-5", "B22", "R10.2-7")
async def test_R7_5_5_a_task_reference_in_a_thread_grants_nothing(daemon):
    alice, _ = await agent_client(daemon.url, "alice")
    bob, b = await agent_client(daemon.url, "bob")
    dave, _ = await agent_client(daemon.url, "dave")
    t = (await alice.act("task.create", {"audience": "open", "contract": contract()}))["task"]
    r = (await alice.act("task.create", {"audience": {"agents": [b]}, "contract": contract()}))["task"]
    e = (await bob.act("task.take", {"task": t, "deliver": {"content": {"poem": "secret"}}}))["engagement"]
    th = (await bob.act("thread.create", {}))["thread"]
    token = (await bob.act("thread.admit", {"thread": th}))["token"]
    await dave.act("thread.join", {"token": token})
    before = await alice.read("task.get", {"task": t})
    posted = await bob.act("thread.post", {"thread": th, "content": {"text": "see my engagement"}, "task": t})
    await bob.act("thread.post", {"thread": th, "content": {"text": "and this one"}, "task": r})
    entries = (await dave.read("thread.entries", {"thread": th}))["items"]
    assert [x.get("task") for x in entries] == [t, None]  # D43: r is not dave's to read
    # R7.5-3: the Task is unchanged by the reference.
    after = await alice.read("task.get", {"task": t})
    assert after == before
    # R7.5-2 / B22: the open Task's contract layer is readable (it is to everyone)…
    assert (await dave.read("task.get", {"task": t}))["contract"]["content"] == CONTENT
    # …a restricted one stays unreadable to a member who is not named (B22).
    await failure(dave, "task.get", {"task": r}, "not_found")
    # R7.5-5: no access to the deliveries or engagements.
    await failure(dave, "engagement.get", {"engagement": e}, "not_found")
    got = await dave.read("task.get", {"task": t})
    assert got["engagements"] == [] and got["adopted"] == []
    # R7.5-4: no member's turn gains a Task obligation from the reference.
    assert await task_obligations(dave) == set()
    assert all("task" not in i["ref"] for i in await turn_items(dave))
    assert posted["entry"] == 1
    for c in (alice, bob, dave):
        await c.close()


@pytest.mark.rules("B24", "R8-3", "R8-4", "R8-5")
async def test_B24_opportunities_list_a_restricted_task_naming_the_caller(daemon):
    alice, a = await agent_client(daemon.url, "alice")
    bob, b = await agent_client(daemon.url, "bob")
    carol, _ = await agent_client(daemon.url, "carol")
    r = (await alice.act("task.create", {"audience": {"agents": [b]}, "contract": contract()}))["task"]
    o = (await alice.act("task.create", {"audience": "open", "contract": contract()}))["task"]
    items = (await bob.read("opportunities", {}))["items"]
    tasks = [i for i in items if i["opportunity"] == "task"]
    assert [i["ref"] for i in tasks] == [{"task": r}]  # the restricted Task, not the open one
    assert tasks[0]["author"] == a
    assert o not in str(items)
    assert (await carol.read("opportunities", {}))["items"] == []
    assert (await alice.read("opportunities", {}))["items"] == []
    # R8-5: an opportunity binds no one; it is not in the turn.
    assert await turn_items(bob) == []
    for c in (alice, bob, carol):
        await c.close()


# --- pause, deactivation, contract validation ------------------------------------------------------


@pytest.mark.rules("B20", "R7.3-21", "L2-7")
async def test_B20_pause_and_resume_over_the_wire(daemon):
    alice, _ = await agent_client(daemon.url, "alice")
    bob, _ = await agent_client(daemon.url, "bob")
    carol, _ = await agent_client(daemon.url, "carol")
    t = (await alice.act("task.create", {"audience": "open", "contract": contract()}))["task"]
    e = (await bob.act("task.take", {"task": t}))["engagement"]
    assert await alice.act("task.pause", {"task": t}) == {"task": t, "accepting": False}
    err = await failure(carol, "task.take", {"task": t}, "conflict")
    assert err["next"] == "wait"
    await failure(alice, "task.pause", {"task": t}, "conflict")
    await failure(bob, "task.pause", {"task": t}, "forbidden")
    assert (await alice.read("task.get", {"task": t}))["accepting"] is False
    await bob.act("task.deliver", {"engagement": e, "content": {"x": 1}})  # R7.3-21
    assert await alice.act("task.resume", {"task": t}) == {"task": t, "accepting": True}
    await failure(alice, "task.resume", {"task": t}, "conflict")
    await carol.act("task.take", {"task": t})
    for c in (alice, bob, carol):
        await c.close()


@pytest.mark.rules("B2", "R7.3-22", "R4-7", "B1")
async def test_B2_a_deactivated_authors_task_refuses_new_takes_existing_ones_go_on(clocked_daemon):
    daemon = clocked_daemon
    admin = await Client.connect(daemon.url, daemon.admin_key)
    alice, a = await agent_client(daemon.url, "alice")
    bob, _ = await agent_client(daemon.url, "bob")
    carol, _ = await agent_client(daemon.url, "carol")
    t = (await alice.act("task.create", {"audience": "open", "contract": contract(judge_within_s=60)}))["task"]
    e = (await bob.act("task.take", {"task": t}))["engagement"]
    await admin.act("admin.agent.set_status", {"agent": a, "status": "deactivated"})
    err = await failure(carol, "task.take", {"task": t}, "conflict")
    assert "deactivated" in err["reason"]
    again = await bob.act("task.take", {"task": t})
    assert again["existing"] is True and again["engagement"] == e
    await bob.act("task.deliver", {"engagement": e, "content": {"x": 1}})
    # B1: the deactivated author's judgment runs to its deadline, as the contract states.
    await failure(alice, "task.judge", {"engagement": e, "verdict": "adopt"}, "forbidden")
    daemon.advance_clock(60.5)  # the judgment deadline passes: the next read wakes the deadline clock

    async def ended():
        eng = await bob.read("engagement.get", {"engagement": e})
        return eng["state"] == "undecided" and "ended_at" in eng

    await eventually(ended)
    for c in (admin, alice, bob, carol):
        await c.close()


@pytest.mark.rules("R7-2", "R7.1-1", "B19", "B3", "R7.2-6")
async def test_R7_2_contract_validation_over_the_wire(daemon):
    alice, a = await agent_client(daemon.url, "alice")
    bob, b = await agent_client(daemon.url, "bob")
    mem = (await alice.act("memory.create", {"content": {"x": 1}}))["memory"]
    for bad in [
        contract(judge=mem),  # R7-2: not an agent
        contract(judge=ghost("ag_")),  # R7-2: no such agent
        {"content": {"output": "x"}},  # R7.1-1: the criteria are missing
        {"content": {"criteria": "x"}},  # R7.1-1: the output is missing
        contract(approval=True),  # B19: no approval step exists
        contract(deliver_within_s=0),
        contract(judge_within_s=31_536_001),
    ]:
        await failure(alice, "task.create", {"audience": "open", "contract": bad}, "bad_request")
    await failure(alice, "task.create", {"audience": {"agents": [a]}, "contract": contract()}, "bad_request")
    t = (await alice.act("task.create", {"audience": "open", "contract": contract()}))["task"]
    c = (await bob.read("task.get", {"task": t}))["contract"]
    assert (c["deliver_within_s"], c["judge_within_s"], c["on_no_judgment"]) == (86_400, 86_400, "undecided")  # B3
    err = await failure(alice, "task.take", {"task": t}, "forbidden")  # R7.2-6
    assert err["next"] == "stop"
    for x in (alice, bob):
        await x.close()


@pytest.mark.rules("R7.2-2")
async def test_task_list_pages_through_every_takeable_task(make_daemon):
    daemon = make_daemon()  # a daemon of its own: task.list lists every open Task of the daemon
    alice, _ = await agent_client(daemon.url, "alice")
    bob, b = await agent_client(daemon.url, "bob")
    made = set()
    for i in range(7):
        aud = "open" if i % 2 else {"agents": [b]}
        made.add((await alice.act("task.create", {"audience": aud, "contract": contract()}))["task"])
    seen: list[str] = []
    cursor = None
    while True:
        page = await bob.read("task.list", {"cursor": cursor, "limit": 2})
        assert len(page["items"]) <= 2
        seen += [i["task"] for i in page["items"]]
        cursor = page["cursor"]
        if cursor is None:
            break
    assert len(seen) == len(set(seen)) and set(seen) == made
    # The author's own Tasks are not offered to it, but listed with `mine`.
    assert not made & {i["task"] for i in (await alice.read("task.list", {"limit": 100}))["items"]}
    assert made == {i["task"] for i in (await alice.read("task.list", {"limit": 100, "mine": True}))["items"]}
    for x in (alice, bob):
        await x.close()


@pytest.mark.rules("R7.4-2", "B21", "L5-1", "L4-3", "R10.2-5")
async def test_B21_deadlines_recorded_late_adopt_in_the_order_they_fell_due(clocked_daemon):
    """Two adopt-on-no-judgment deliveries compete for the last slot (limit 1). The
    daemon is down while both judgment deadlines pass; on restart both expiries
    are recorded together. First come first served (R7.4-2): the delivery whose
    deadline passed first takes the slot, whatever the engagement ids."""
    daemon = clocked_daemon
    alice, _ = await agent_client(daemon.url, "alice")
    bob, _ = await agent_client(daemon.url, "bob")
    carol, _ = await agent_client(daemon.url, "carol")
    t = (await alice.act("task.create", {"audience": "open", "contract": contract(
        judge_within_s=60, on_no_judgment="adopt", adoption_limit=1)}))["task"]
    first_taken = (await bob.act("task.take", {"task": t}))["engagement"]
    daemon.advance_clock(0.05)
    first_due = (await carol.act("task.take", {"task": t, "deliver": {"content": {"c": 1}}}))["engagement"]
    daemon.advance_clock(0.3)
    late = await bob.act("task.deliver", {"engagement": first_taken, "content": {"b": 1}})
    due_first = (await carol.read("engagement.get", {"engagement": first_due}))["judge_by"]
    assert due_first < late["judge_by"]
    for c in (alice, bob, carol):
        await c.close()
    daemon.kill()  # both deadlines pass while the daemon is down
    daemon.advance_clock(60.8)
    daemon.start()
    alice = await Client.connect(daemon.url, alice.key)

    async def both_recorded():
        es = [await alice.read("engagement.get", {"engagement": e}) for e in (first_due, first_taken)]
        return es if all("ended_at" in e for e in es) else None

    winner, loser = await eventually(both_recorded)
    assert (await alice.read("task.get", {"task": t}))["adoptions"] == 1
    assert (winner["state"], loser["state"]) == ("adopted", "undecided"), (
        "the deadline that passed first must take the last slot; "
        f"got {first_due}: {winner['state']}, {first_taken}: {loser['state']}"
    )
    await alice.close()
