"""The worker: takes what it is offered, answers, delivers, and learns how each
piece of work ended — redoing a rejected Task delivery with the judge's reason
in mind. Run by run.py (or: KUNGFU_KEY=… python worker.py --lead ag_… --state worker.json).
Of the open Tasks, offered to everyone, it takes only its lead's (--lead): a
daemon used for other things has other agents' open Tasks, which no one here
would judge.

It ends when it owes nothing, nothing is offered to it, and every delivery it
made has an outcome."""

from __future__ import annotations

import argparse
import asyncio
import os

from agent import State, log, run, unless_finished
from kungfud.client import Client

WHO = "worker"


def learn(state: State, outcome: dict) -> None:
    """Note how a piece of work ended (an ``outcome`` event, or the ``outcomes`` list)."""
    ref = outcome["ref"]
    work = ref.get("assignment") or ref["engagement"]
    if state["outcomes"].get(work) == outcome["state"]:
        return  # learned before
    state["outcomes"][work] = outcome["state"]
    reason = (outcome.get("content") or {}).get("reason")
    log(WHO, f"learned: {work} {outcome['state']}" + (f" ({reason})" if reason else ""))
    if outcome["state"] == "rejected" and "task" in ref:
        state["reasons"][ref["task"]] = reason  # the redo takes it into account
        state["taken"] = [t for t in state["taken"] if t != ref["task"]]  # it may be taken again


async def open_tasks(c: Client, state: State) -> list[str]:
    """My lead's open Tasks I have not taken. They are offered to everyone, so
    they are on no one's opportunities; task.list has them (and docs/wire.md
    announces them as task_offered events to subscribe {open_tasks: true})."""
    return [t["task"] async for t in c.items("task.list")
            if t["audience"] == "open" and t["author"] == state["lead"] and t["task"] not in state["taken"]]


async def catch_up(c: Client, state: State) -> None:
    """Learn from the ``outcomes`` list what no event has told yet: a rejected
    delivery is offered again by the same fact that ends it, and its reason must
    be known before the redo, whichever event arrives first."""
    if any(s is None for s in state["outcomes"].values()):
        for o in [o async for o in c.items("outcomes")]:
            learn(state, o)


async def work(c: Client, events: list[dict], state: State) -> None:
    for event in events:
        if event["event"] == "outcome":
            learn(state, event["data"])
    await catch_up(c, state)
    # What is offered: assignments addressed to me, restricted Tasks naming me.
    offers = [o["ref"] async for o in c.items("opportunities")]
    offers += [{"task": t} for t in await open_tasks(c, state)]
    for ref in offers:
        target = ref.get("assignment") or ref["task"]
        taken = await unless_finished(WHO, f"taking {target}", c.take(target))
        if taken is not None and not taken.get("existing"):
            log(WHO, f"took {target}")
        if taken is not None and "task" in ref:
            state["taken"].append(ref["task"])
    # Then everything I owe, read again now (the events only woke me).
    for item in [i async for i in c.items("turn")]:
        ref = item["ref"]
        if item["obligation"] == "respond":
            asked = await c.read("thread.entry", {"thread": ref["thread"], "entry": ref["entry"]})
            # A plain reply obligates the asker: the lead learns the answer from its turn.
            answer = "alembic" if "migration" in asked["content"].get("text", "") else "noted"
            if await unless_finished(WHO, "an answer", c.post(ref["thread"], answer, reply_to=ref["entry"])):
                log(WHO, f"answered {ref['thread']}#{ref['entry']}")
        elif item["obligation"] == "deliver" and "assignment" in ref:
            asg = await c.read("assignment.get", {"assignment": ref["assignment"]})
            result = {"text": f"done: {asg['instruction']['content'].get('text')}"}
            if await unless_finished(WHO, "a delivery", c.deliver(ref["assignment"], content=result)):
                state["outcomes"].setdefault(ref["assignment"], None)
                log(WHO, f"delivered {ref['assignment']}")
        elif item["obligation"] == "deliver":
            await catch_up(c, state)  # a redo: its rejection may have come after the pass began
            eng = await c.read("engagement.get", {"engagement": ref["engagement"]})
            result = {"text": eng["contract"]["content"]["output"]}
            if state["reasons"].get(ref["task"]):  # rejected before: do what the judge asked
                result["title"] = "Release 1.2"
            if await unless_finished(WHO, "a delivery", c.deliver(ref["engagement"], content=result)):
                state["outcomes"].setdefault(ref["engagement"], None)
                log(WHO, f"delivered {ref['engagement']}")
    state.save()


async def done(c: Client, state: State) -> bool:
    """Nothing owed or offered, and every delivery's outcome learned. The
    ``outcomes`` list is read too: it has what a lost event would have said."""
    await catch_up(c, state)
    state.save()
    if any(s is None for s in state["outcomes"].values()):
        return False
    if (await c.turn())["items"] or (await c.opportunities())["items"]:
        return False
    return not await open_tasks(c, state)


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--lead", required=True, help="the lead's agent id: the only author whose open Tasks it takes")
    p.add_argument("--state", default="worker.json", help="where the worker keeps its seq and notes")
    ns = p.parse_args()
    key = os.environ["KUNGFU_KEY"]
    state = State(ns.state)
    state.setdefault("lead", ns.lead)
    for field, empty in (("outcomes", {}), ("reasons", {}), ("taken", [])):
        state.setdefault(field, empty)
    if "me" not in state:
        async with await Client.connect(os.environ.get("KUNGFU_URL", "ws://127.0.0.1:8740/v1"), key) as c:
            state["me"] = (await c.whoami())["agent"]
    await run(WHO, key, state, lambda c, ev: work(c, ev, state), lambda c: done(c, state))
    log(WHO, f"done: {len(state['outcomes'])} outcomes learned")


if __name__ == "__main__":
    asyncio.run(main())
