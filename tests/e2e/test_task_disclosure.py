"""Tasks over the wire against the security review (reviews/security.md):
who may take a restricted Task (H3), what ``task.get`` shows strangers (L2),
agent existence through fields naming agents (L4), restricted Task ids shown
through entries (L9)."""

from __future__ import annotations

import pytest

from kungfud.client import new_key

from .helpers import agent_client
from .test_task import contract, failure, ghost


@pytest.mark.rules("R7.2-3", "R7.2-4", "R7.3-1")
async def test_R7_2_3_a_former_judge_outside_the_audience_cannot_take_a_restricted_task(daemon):
    """H3's reproduction: a judge of version 1, not named in the audience, after a
    revision without it as judge."""
    author, _ = await agent_client(daemon.url, "author")
    bob, b = await agent_client(daemon.url, "bob")
    judge, j = await agent_client(daemon.url, "judge")
    tk = (await author.act("task.create", {"audience": {"agents": [b]}, "contract": contract(judge=j)}))["task"]
    await failure(judge, "task.take", {"task": tk}, "forbidden")  # B17
    await author.act("task.revise", {"task": tk, "contract": {"content": {"output": "o2", "criteria": "c2"}}})
    # D22: the former judge still reads the contract layer…
    got = await judge.read("task.get", {"task": tk})
    assert got["contract_version"] == 2
    # …but it is not in the audience: no take offered, and a take is refused.
    assert "task.take" not in got["actions"]
    err = await failure(judge, "task.take", {"task": tk}, "forbidden")
    assert err["next"] == "stop"
    assert tk not in [i["task"] for i in (await judge.read("task.list", {}))["items"]]
    assert (await judge.read("opportunities", {}))["items"] == []
    # The named agent still takes it.
    assert "task.take" in (await bob.read("task.get", {"task": tk}))["actions"]
    took = await bob.act("task.take", {"task": tk})
    assert took["existing"] is False
    for c in (author, bob, judge):
        await c.close()


@pytest.mark.rules("R7.3-1", "R7.1-5", "B18")
async def test_R7_3_1_task_get_offers_take_only_to_an_eligible_agent(daemon):
    """``actions`` follows the same rule as taking: an agent a later version's
    eligibility leaves out is not offered ``task.take``."""
    author, _ = await agent_client(daemon.url, "author")
    bob, b = await agent_client(daemon.url, "bob")
    carol, _ = await agent_client(daemon.url, "carol")
    tk = (await author.act("task.create", {"audience": "open", "contract": contract()}))["task"]
    await author.act("task.revise", {"task": tk, "contract": contract(eligibility={"agents": [b]})})
    assert "task.take" not in (await carol.read("task.get", {"task": tk}))["actions"]
    await failure(carol, "task.take", {"task": tk}, "forbidden")
    assert "task.take" in (await bob.read("task.get", {"task": tk}))["actions"]
    for c in (author, bob, carol):
        await c.close()


@pytest.mark.rules("R9-16", "R12-9")
async def test_R9_16_task_get_counts_engagements_only_for_the_author(daemon):
    """L2: a stranger's ``task.get`` showed ``engagement_count`` of other agents'
    engagements; only the author is a party to every engagement it counts (D42)."""
    author, _ = await agent_client(daemon.url, "author")
    bob, _ = await agent_client(daemon.url, "bob")
    carol, _ = await agent_client(daemon.url, "carol")
    eve, _ = await agent_client(daemon.url, "eve")
    tk = (await author.act("task.create", {"audience": "open", "contract": contract()}))["task"]
    await bob.act("task.take", {"task": tk})
    await carol.act("task.take", {"task": tk})
    stranger = await eve.read("task.get", {"task": tk})
    assert stranger["engagements"] == [] and "engagement_count" not in stranger
    taker = await bob.read("task.get", {"task": tk})
    assert len(taker["engagements"]) == 1 and "engagement_count" not in taker
    assert (await author.read("task.get", {"task": tk}))["engagement_count"] == 2
    for c in (author, bob, carol, eve):
        await c.close()


@pytest.mark.rules("R12-9", "R7.2-3", "R7-2")
async def test_R12_9_fields_naming_agents_answer_alike_for_unknown_and_existing_ids(daemon):
    """L4: ``task.create``'s audience said "names no such agent" for an unknown id
    and accepted a real one (D41). Now: the audience and eligibility accept both
    alike; the judge (R7-2 requires an agent) answers an unknown id exactly as a
    deactivated agent; Thread fields naming agents answer alike for a non-member."""
    from kungfud.client import Client

    author, _ = await agent_client(daemon.url, "author")
    bob, b = await agent_client(daemon.url, "bob")
    gone, g = await agent_client(daemon.url, "gone")
    await gone.close()
    async with await Client.connect(daemon.url, daemon.admin_key) as admin:
        await admin.act("admin.agent.set_status", {"agent": g, "status": "deactivated"})
    nobody = ghost("ag_")

    real = await author.act("task.create", {"audience": {"agents": [b]}, "contract": contract(eligibility={"agents": [b]})})
    fake = await author.act("task.create", {"audience": {"agents": [nobody]}, "contract": contract(eligibility={"agents": [nobody]})})
    assert real.keys() == fake.keys() == {"task", "contract_version"}
    assert (await author.read("task.get", {"task": fake["task"]}))["audience"] == {"agents": [nobody]}

    def blank(err: dict, ident: str) -> dict:
        return {**err, "reason": err["reason"].replace(ident, "<id>")}

    judged = [await failure(author, "task.create", {"audience": "open", "contract": contract(judge=x)}, "bad_request") for x in (g, nobody)]
    assert blank(judged[0], g) == blank(judged[1], nobody)
    assert "<id>" in blank(judged[0], g)["reason"]  # the refusal is about the judge named

    th = (await author.act("thread.create", {}))["thread"]
    for op, args in (
        ("thread.remove", lambda x: {"thread": th, "agent": x}),
        ("thread.set_role", lambda x: {"thread": th, "agent": x, "role": "observer"}),
        ("thread.post", lambda x: {"thread": th, "content": {"t": 1}, "ask": [x]}),
        ("thread.post", lambda x: {"thread": th, "content": {"t": 1}, "assign": {"to": x, "content": {"criteria": "c"}}}),
    ):
        e1 = await author.request(op, args(b), key=new_key())
        e2 = await author.request(op, args(nobody), key=new_key())
        assert e1["ok"] is False and e2["ok"] is False, (op, e1, e2)
        assert blank(e1["error"], b) == blank(e2["error"], nobody), op
        assert "<id>" in blank(e1["error"], b)["reason"], (op, e1)  # about the agent named, not the frame
    for c in (author, bob):
        await c.close()


@pytest.mark.rules("R12-9", "R7.5-5", "R9-14")
async def test_R12_9_an_entry_shows_a_restricted_task_only_to_members_who_may_read_it(daemon):
    """L9: an entry referencing a restricted Task showed its id to every member;
    a member outside the audience then got not_found for it (D43)."""
    author, _ = await agent_client(daemon.url, "author")
    bob, b = await agent_client(daemon.url, "bob")
    dave, _ = await agent_client(daemon.url, "dave")
    restricted = (await author.act("task.create", {"audience": {"agents": [b]}, "contract": contract()}))["task"]
    th = (await bob.act("thread.create", {}))["thread"]
    token = (await bob.act("thread.admit", {"thread": th}))["token"]
    await dave.act("thread.join", {"token": token})
    await bob.act("thread.post", {"thread": th, "content": {"text": "see this"}, "task": restricted})
    seen = (await bob.read("thread.entries", {"thread": th}))["items"]
    assert [e.get("task") for e in seen] == [restricted]
    for reply in (
        await dave.read("thread.entries", {"thread": th}),
        await dave.read("thread.entries", {"thread": th, "full": True}),
        await dave.read("thread.get", {"thread": th}),
    ):
        assert restricted not in str(reply), reply
    [entry] = (await dave.read("thread.entries", {"thread": th}))["items"]
    assert "task" not in entry
    await failure(dave, "task.get", {"task": restricted}, "not_found")
    for c in (author, bob, dave):
        await c.close()
