"""Only offers that can be taken, over the real daemon (WIRE.md 1.1 "Offers that
can be taken"): ``opportunities`` and ``task.list`` (without ``mine``) leave out
a Task that takes no new engagement now — paused (B20), its author deactivated
(B2), or its adoption limit reached (B21) — and list it again when it does; an
adoption refused at the limit points at the exit that remains, a rejection."""

from __future__ import annotations

import pytest

from kungfud.client import Client
from tests.e2e.thread_kit import Member, agents, close_all, fails

CONTENT = {"output": "a haiku", "criteria": "5-7-5"}


async def offered(who: Member) -> tuple[set[str], set[str]]:
    """(Tasks in ``opportunities``, Tasks in ``task.list``), every page."""
    opps: set[str] = set()
    listed: set[str] = set()
    for op, out in (("opportunities", opps), ("task.list", listed)):
        cursor = None
        while True:
            page = await who.read(op, {"cursor": cursor, "limit": 100})
            out |= {i["ref"]["task"] if op == "opportunities" else i["task"] for i in page["items"] if op == "task.list" or "task" in i["ref"]}
            cursor = page["cursor"]
            if cursor is None:
                break
    return opps, listed


@pytest.mark.rules("B20", "B21", "R7.4-2", "R8-4", "B24")
async def test_B21_a_paused_or_full_task_is_not_offered(daemon):
    author, w1, w2 = await agents(daemon.url, "author", "w1", "w2")
    restricted = (await author.act("task.create", {"audience": {"agents": [w1.id, w2.id]}, "contract": {"content": CONTENT, "adoption_limit": 1}}))["task"]
    open_tk = (await author.act("task.create", {"audience": "open", "contract": {"content": CONTENT}}))["task"]
    assert await offered(w2) == ({restricted}, {restricted, open_tk})

    await author.act("task.pause", {"task": restricted})
    assert await offered(w2) == (set(), {open_tk})
    await author.act("task.resume", {"task": restricted})
    assert await offered(w2) == ({restricted}, {restricted, open_tk})

    en = (await w1.act("task.take", {"task": restricted, "deliver": {"content": {"poem": "…"}}}))["engagement"]
    assert await offered(w2) == ({restricted}, {restricted, open_tk})  # taking does not use the limit up
    await author.act("task.judge", {"engagement": en, "verdict": "adopt"})
    assert await offered(w2) == (set(), {open_tk})  # full: a take would be refused
    assert "task.take" not in (await w2.read("task.get", {"task": restricted}))["actions"]
    err = await fails(w2, "task.take", {"task": restricted}, "conflict")
    assert "limit" in err["reason"]
    # Raising the limit by revision offers it again.
    await author.act("task.revise", {"task": restricted, "contract": {"content": CONTENT, "adoption_limit": 2}})
    assert await offered(w2) == ({restricted}, {restricted, open_tk})
    assert "task.take" in (await w2.read("task.get", {"task": restricted}))["actions"]
    # The author still lists its own Tasks with `mine`, whatever their state.
    await author.act("task.pause", {"task": open_tk})
    mine = {i["task"] for i in (await author.read("task.list", {"mine": True}))["items"]}
    assert mine == {restricted, open_tk}
    await close_all(author, w1, w2)


@pytest.mark.rules("B2")
async def test_B2_a_deactivated_authors_tasks_are_not_offered_until_reactivated(daemon):
    author, w = await agents(daemon.url, "author", "w")
    restricted = (await author.act("task.create", {"audience": {"agents": [w.id]}, "contract": {"content": CONTENT}}))["task"]
    open_tk = (await author.act("task.create", {"audience": "open", "contract": {"content": CONTENT}}))["task"]
    assert await offered(w) == ({restricted}, {restricted, open_tk})
    admin = await Client.connect(daemon.url, daemon.admin_key)
    try:
        await admin.act("admin.agent.set_status", {"agent": author.id, "status": "deactivated"})
        assert await offered(w) == (set(), set())
        await fails(w, "task.take", {"task": open_tk}, "conflict")
        await admin.act("admin.agent.set_status", {"agent": author.id, "status": "active"})
        assert await offered(w) == ({restricted}, {restricted, open_tk})
    finally:
        await admin.close()
    await close_all(author, w)


@pytest.mark.rules("R7.4-2", "B21", "L2-4", "R8-16")
async def test_R7_4_2_an_adoption_refused_at_the_limit_hints_the_reject(daemon):
    author, w1, w2 = await agents(daemon.url, "author", "w1", "w2")
    tk = (await author.act("task.create", {"audience": "open", "contract": {"content": CONTENT, "adoption_limit": 1}}))["task"]
    en1 = (await w1.act("task.take", {"task": tk, "deliver": {"content": {"poem": 1}}}))["engagement"]
    en2 = (await w2.act("task.take", {"task": tk, "deliver": {"content": {"poem": 2}}}))["engagement"]
    await author.act("task.judge", {"engagement": en1, "verdict": "adopt"})
    err = await fails(author, "task.judge", {"engagement": en2, "verdict": "adopt"}, "conflict")
    assert err["next"] == "revise"
    assert err["hint"] == {"op": "task.judge", "args": {"engagement": en2, "verdict": "reject"}}
    assert "limit" in err["reason"]
    # The hinted call, with the reason a rejection needs, is the exit.
    done = await author.act(err["hint"]["op"], {**err["hint"]["args"], "content": {"reason": "the slot is taken"}})
    assert done["state"] == "rejected"
    await close_all(author, w1, w2)
