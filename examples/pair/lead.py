"""The lead: asks the worker a question, assigns it work with a deadline, and
publishes two Tasks — one restricted to the worker, one open to anyone — then
answers what its turn brings: it acknowledges the answer, adopts the assignment's
delivery, and judges each Task delivery by its criteria (a delivery without a
title is rejected with a reason; the worker redoes it). Run by run.py (or:
KUNGFU_KEY=… python lead.py --thread th_… --worker ag_… --state lead.json).

It ends when its question is answered and all three pieces of work are adopted."""

from __future__ import annotations

import argparse
import asyncio
import os

from agent import State, log, run, unless_finished
from kungfud.client import Client

WHO = "lead"
DEADLINES = {"deliver_within_s": 120, "judge_within_s": 120}


async def publish(c: Client, state: State, thread: str, worker: str) -> None:
    """The work, created once (its ids saved: a restarted lead does not post it twice)."""
    q = await c.post(thread, "Which migration tool should we use?", ask=[worker])
    a = await c.post(thread, "Write the migration for the users table.", ask=[], assign={
        "to": worker, "content": {"criteria": "upgrade and downgrade both work"}, **DEADLINES})
    criteria = {"output": "release notes", "criteria": "a title and a text"}
    restricted = await c.act("task.create", {"audience": {"agents": [worker]}, "contract": {
        "content": criteria, "adoption_limit": 1, **DEADLINES}})
    criteria = {"output": "a changelog", "criteria": "a title and a text"}
    open_ = await c.act("task.create", {"audience": "open", "contract": {"content": criteria, "adoption_limit": 1, **DEADLINES}})
    state.update(question=q["entry"], answered=False,
                 adopted={a["assignment"]: False, restricted["task"]: False, open_["task"]: False})
    state.save()
    log(WHO, f"posted a question, {a['assignment']}, {restricted['task']} (restricted), {open_['task']} (open)")


async def work(c: Client, events: list[dict], state: State) -> None:
    for event in events:
        if event["event"] == "outcome":  # work that ended without my action (a deadline, a drop)
            o = event["data"]
            log(WHO, f"learned: {o['ref']} {o['state']}")
    for item in [i async for i in c.items("turn")]:
        ref = item["ref"]
        if item["obligation"] == "respond":
            answer = await c.read("thread.entry", {"thread": ref["thread"], "entry": ref["entry"]})
            # Acknowledge without a reply: nobody owes anything more, the exchange ends.
            if await unless_finished(WHO, "an answer", c.handle(ref["thread"], ref["entry"], "thanks")):
                state["answered"] = state["answered"] or answer.get("reply_to") == state["question"]
                log(WHO, f"answer read: {answer['content']}")
        elif item["obligation"] == "judge" and "assignment" in ref:
            if await unless_finished(WHO, "a judgment", c.judge(ref["assignment"], "adopt")):
                state["adopted"][ref["assignment"]] = True
                log(WHO, f"adopted {ref['assignment']}")
        elif item["obligation"] == "judge":
            eng = await c.read("engagement.get", {"engagement": ref["engagement"]})
            delivered = (eng.get("delivery") or {}).get("content") or {}
            if "title" in delivered:
                if await unless_finished(WHO, "a judgment", c.judge(ref["engagement"], "adopt")):
                    state["adopted"][ref["task"]] = True
                    log(WHO, f"adopted {ref['engagement']} for {ref['task']}")
            elif await unless_finished(WHO, "a judgment", c.judge(ref["engagement"], "reject", "it needs a title")):
                log(WHO, f"rejected {ref['engagement']} for {ref['task']}: it needs a title")
    state.save()


async def done(c: Client, state: State) -> bool:
    return state["answered"] and all(state["adopted"].values()) and not (await c.turn())["items"]


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--thread", required=True, help="a Thread the worker is a speaker of")
    p.add_argument("--worker", required=True, help="the worker's agent id")
    p.add_argument("--state", default="lead.json", help="where the lead keeps its seq and notes")
    ns = p.parse_args()
    key = os.environ["KUNGFU_KEY"]
    state = State(ns.state)
    if "adopted" not in state:
        async with await Client.connect(os.environ.get("KUNGFU_URL", "ws://127.0.0.1:8740/v1"), key) as c:
            await publish(c, state, ns.thread, ns.worker)
    await run(WHO, key, state, lambda c, ev: work(c, ev, state), lambda c: done(c, state))
    log(WHO, "done: answered, and all three adopted")


if __name__ == "__main__":
    asyncio.run(main())
