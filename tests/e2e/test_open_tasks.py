"""Open Tasks, announced (WIRE.md 1.2, D201, D202): ``subscribe {open_tasks:
true}`` adds a content-free ``task_offered`` event ``{task, author,
contract_version, at}`` whenever an open-audience Task is created or takes
engagements again (resumed from a pause, its adoption limit raised above its
adoptions), with a seq of the one event sequence, so ``since`` resumes it with
the rest. It is heard only by agents that may take the Task: not its author,
not its designated judge, not an agent its allow-list leaves out; not for a
restricted Task (its audience gets an ``opportunity`` event); not without
``open_tasks``.
"""

from __future__ import annotations

import asyncio

import pytest

from kungfud.client import Client
from tests.e2e.thread_kit import Member, agents, close_all

CONTRACT = {"content": {"output": "a haiku", "criteria": "5-7-5"}}


async def replay(url: str, who: Member, since: int, open_tasks: bool = True) -> list[dict]:
    """Every event of ``who`` after ``since`` (with the open stream when
    ``open_tasks``), replayed by a new subscription: the replay is sent right
    after the subscribe reply, so once a later read is answered it is all in."""
    c = await Client.connect(url, who.key)
    try:
        await c.read("subscribe", {"since": since, "open_tasks": open_tasks})
        await c.read("agent.whoami", {})
        out: list[dict] = []
        while not c._events.empty():
            out.append(c._events.get_nowait())
        return out
    finally:
        await c.close()


async def next_offer(sub, timeout: float = 10.0) -> dict:
    async def run() -> dict:
        async for ev in sub:
            if ev["event"] == "task_offered":
                return ev
        raise AssertionError("the subscription ended")

    return await asyncio.wait_for(run(), timeout)


def offered(events: list[dict]) -> list[tuple[str, int]]:
    return [(e["data"]["task"], e["data"]["contract_version"]) for e in events if e["event"] == "task_offered"]


def check_offer(ev: dict, task: str, author: str, version: int = 1) -> None:
    assert ev.keys() == {"seq", "event", "data"} and ev["event"] == "task_offered", ev
    assert ev["data"].keys() == {"task", "author", "contract_version", "at"}, ev  # content-free
    assert ev["data"]["task"] == task and ev["data"]["author"] == author, ev
    assert ev["data"]["contract_version"] == version and ev["data"]["at"].endswith("Z"), ev


async def create(author: Member, audience="open", **contract) -> str:
    return (await author.act("task.create", {"audience": audience, "contract": {**CONTRACT, **contract}}))["task"]


@pytest.mark.rules("R8-20", "R8-21", "R7.2-6")
async def test_R8_20_an_open_task_is_announced_live_and_on_replay_to_those_who_may_take_it(daemon):
    url = daemon.url
    author, w, plain, judge, other = await agents(url, "author", "worker", "plain", "judge", "other")
    sub_w = await w.c.subscribe(open_tasks=True)
    start = sub_w.seq
    sub_author = await author.c.subscribe(open_tasks=True)
    sub_judge = await judge.c.subscribe(open_tasks=True)

    tk = await create(author)
    ev = await next_offer(sub_w)
    check_offer(ev, tk, author.id)
    assert ev["seq"] > start
    # A restricted Task is no offer to the open stream (its audience gets an opportunity).
    restricted = await create(author, {"agents": [w.id]})
    # Judged by `judge`, for `w` only: neither `judge` nor `plain` may take it.
    only_w = await create(author, judge=judge.id, eligibility={"agents": [w.id]})
    ev2 = await next_offer(sub_w)
    check_offer(ev2, only_w, author.id)
    assert ev2["seq"] > ev["seq"]
    # Fence: `other`'s open Task is the first offer the author hears (none of
    # its own), and the judge's next after `tk` (not the one it judges).
    fence = await create(other)
    check_offer(await next_offer(sub_author), fence, other.id)
    check_offer(await next_offer(sub_judge), tk, author.id)
    check_offer(await next_offer(sub_judge), fence, other.id)
    ev3 = await next_offer(sub_w)
    check_offer(ev3, fence, other.id)

    # On replay, from the seq before: the same offers, in order, with the caller's own events.
    got = await replay(url, w, start)
    assert offered(got) == [(tk, 1), (only_w, 1), (fence, 1)]
    assert [e for e in got if e["event"] == "task_offered"] == [ev, ev2, ev3]  # the frames live, exactly
    assert [e["seq"] for e in got] == sorted({e["seq"] for e in got})
    assert [e["event"] for e in got if e["event"] == "opportunity"] == ["opportunity"]  # the restricted Task
    assert offered(await replay(url, plain, start)) == [(tk, 1), (fence, 1)]  # not on only_w's allow-list
    assert offered(await replay(url, judge, start)) == [(tk, 1), (fence, 1)]
    assert offered(await replay(url, author, start)) == [(fence, 1)]
    # Without open_tasks: none.
    assert offered(await replay(url, w, start, open_tasks=False)) == []
    # Resumed from the seq of the first offer: the rest.
    assert offered(await replay(url, w, ev["seq"])) == [(only_w, 1), (fence, 1)]
    assert restricted not in {t for t, _ in offered(got)}
    await close_all(author, w, plain, judge, other)


@pytest.mark.rules("R8-20")
async def test_R8_20_an_open_task_is_announced_again_when_it_takes_engagements_again(daemon):
    url = daemon.url
    author, w, v = await agents(url, "author", "worker", "second")
    sub = await w.c.subscribe(open_tasks=True)
    start = sub.seq
    tk = await create(author, adoption_limit=1)
    check_offer(await next_offer(sub), tk, author.id)
    # Paused and resumed: offered again.
    await author.act("task.pause", {"task": tk})
    await author.act("task.resume", {"task": tk})
    check_offer(await next_offer(sub), tk, author.id)
    # Its adoption limit reached: no offer; raised by a revision: offered again, at version 2.
    en = (await v.act("task.take", {"task": tk}))["engagement"]
    await v.act("task.deliver", {"engagement": en, "content": {"poem": "pond"}})
    await author.act("task.judge", {"engagement": en, "verdict": "adopt"})
    assert (await w.read("task.list", {}))["items"] == []  # takes no engagement now
    await author.act("task.revise", {"task": tk, "contract": {**CONTRACT, "adoption_limit": 2}})
    check_offer(await next_offer(sub), tk, author.id, version=2)
    # A revision of a Task that takes engagements all along is no new offer.
    await author.act("task.revise", {"task": tk, "contract": {**CONTRACT, "adoption_limit": 3}})
    fence = await create(v)
    check_offer(await next_offer(sub), fence, v.id)
    assert offered(await replay(url, w, start)) == [(tk, 1), (tk, 1), (tk, 2), (fence, 1)]
    await close_all(author, w, v)


def test_the_mcp_opportunities_tool_says_where_open_tasks_are():
    """Issue 24 part 4: a model reading the tool list learns that open Tasks
    are not in ``opportunities`` and are found with ``task_list``."""
    from kungfud.mcp.schemas import tool_specs

    tools = {t.name: t for t in tool_specs()}
    desc = tools["opportunities"].description
    assert "open Tasks are not listed here" in desc and "task_list" in desc and "task_list" in tools
