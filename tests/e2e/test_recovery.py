"""§8 recovery (R8-17…R8-19, R8-21), §10.2 R10.2-5 and §0 R0-1 over the real
daemon: an agent holding obligations of every kind — respond (in two Threads,
one of them arising while it was away), deliver and judge an assignment, deliver
and judge a Task engagement — throws its client away; the daemon is SIGKILLed
and restarted; a new client holding nothing but the URL and the key discharges
every obligation using only ``turn``, the working sets and the ids found in
them, until the turn is empty.

``recover`` receives only ``(url, key)``: it cannot use an id remembered from
before. On top of that every request it sends is checked: each id in its args
must have appeared in an earlier response of the same session (R8-18)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from kungfud.client import Client
from tests.e2e.helpers import register

ID = re.compile(r"^(ag|me|th|ad|as|tk|en|ob)_[0-9a-z]+$")
CONTRACT = {"output": "a summary", "criteria": "under 100 words"}


def ids_in(value: Any) -> set[str]:
    """Every id-shaped string anywhere inside ``value``."""
    if isinstance(value, str):
        return {value} if ID.match(value) else set()
    if isinstance(value, dict):
        return set().union(*(ids_in(v) for v in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(ids_in(v) for v in value)) if value else set()
    return set()


class Session:
    """A client that only lets the caller use ids the daemon has shown it in this
    session (R8-18: work continues with the references given in results)."""

    def __init__(self, c: Client):
        self.c = c
        self.known: set[str] = set()
        self.calls: list[tuple[str, dict]] = []

    def _check(self, op: str, args: dict) -> None:
        unknown = ids_in(args) - self.known
        assert not unknown, f"{op} used ids that no response of this session gave: {unknown}"
        self.calls.append((op, args))

    async def read(self, op: str, args: dict | None = None) -> Any:
        args = args or {}
        self._check(op, args)
        r = await self.c.read(op, args)
        self.known |= ids_in(r)
        return r

    async def act(self, op: str, args: dict) -> Any:
        self._check(op, args)
        r = await self.c.act(op, args)
        self.known |= ids_in(r)
        return r


async def whole_turn(s: Session, limit: int = 3) -> list[dict]:
    items, cursor = [], None
    for _ in range(100):
        page = await s.read("turn", {"cursor": cursor, "limit": limit} if cursor else {"limit": limit})
        items += page["items"]
        cursor = page["cursor"]
        if cursor is None:
            return items
    raise AssertionError("turn paging did not end")


def obligation_ids(ws: dict) -> list[str]:
    return [o["obligation_id"] for o in ws["obligations"]]


async def recover(url: str, key: str) -> list[tuple[str, str, dict]]:
    """Discharge every obligation of the agent holding ``key``, knowing nothing
    else. Returns what it did: (obligation, op, ref) per obligation."""
    s = Session(await Client.connect(url, key))
    done: list[tuple[str, str, dict]] = []
    replied = 0
    try:
        me = await s.read("agent.whoami")
        assert me["status"] == "active"
        for _ in range(20):
            items = await whole_turn(s)
            if not items:
                break
            item = items[0]  # the oldest first
            ob, kind, ref = item["obligation_id"], item["obligation"], item["ref"]
            assert item["next"] == kind
            if kind == "respond":
                assert ref.keys() == {"thread", "entry"}
                ws = await s.read("thread.get", {"thread": ref["thread"]})
                assert ob in obligation_ids(ws), ws
                assert ws["status"] == "open" and {"thread.post", "thread.handle"} <= set(ws["actions"]), ws
                page = await s.read("thread.entries", {"thread": ref["thread"], "full": True})
                [entry] = [e for e in page["items"] if e["entry"] == ref["entry"]]
                assert me["agent"] in entry["responders"] and "content" in entry, entry
                if replied % 2 == 0:
                    op = "thread.post"
                    r = await s.act(op, {"thread": ref["thread"], "content": {"answer": entry["content"]}, "reply_to": ref["entry"], "ask": []})
                else:
                    op = "thread.handle"
                    r = await s.act(op, {"thread": ref["thread"], "entry": ref["entry"], "content": {"note": "seen"}})
                replied += 1
                assert ob in r["ended"], r
            elif "assignment" in ref:
                assert ref.keys() == {"thread", "assignment"}
                ws = await s.read("assignment.get", {"assignment": ref["assignment"]})
                assert obligation_ids(ws) == [ob], ws
                if kind == "deliver":
                    assert ws["state"] == "taken" and ws["taker"] == me["agent"], ws
                    op = "assignment.deliver"
                    await s.act(op, {"assignment": ref["assignment"], "content": {"met": ws["content"]["criteria"]}})
                else:
                    assert kind == "judge" and ws["state"] == "delivered" and ws["creator"] == me["agent"], ws
                    assert "content" in ws["delivery"], ws
                    op = "assignment.judge"
                    await s.act(op, {"assignment": ref["assignment"], "verdict": "adopt"})
            else:
                assert ref.keys() == {"task", "engagement"}, ref
                task = await s.read("task.get", {"task": ref["task"]})
                ws = await s.read("engagement.get", {"engagement": ref["engagement"]})
                assert ob in obligation_ids(ws), ws
                if kind == "deliver":
                    assert ws["state"] == "taken" and ws["agent"] == me["agent"], ws
                    op = "task.deliver"
                    await s.act(op, {"engagement": ref["engagement"], "content": {"met": task["contract"]["content"]["criteria"]}})
                else:
                    assert kind == "judge" and ws["state"] == "delivered" and ws["judge"] == me["agent"], ws
                    assert "content" in ws["delivery"], ws
                    op = "task.judge"
                    await s.act(op, {"engagement": ref["engagement"], "verdict": "adopt"})
            after = await whole_turn(s)
            assert ob not in [i["obligation_id"] for i in after], (op, item)
            done.append((kind, op, ref))
        else:
            raise AssertionError("the turn never emptied")
        assert await whole_turn(s) == []
        # nothing else was used: only the turn, working sets, and acts on their ids
        assert {op for op, _ in s.calls} <= {
            "agent.whoami", "turn", "thread.get", "thread.entries", "assignment.get", "task.get", "engagement.get",
            "thread.post", "thread.handle", "assignment.deliver", "assignment.judge", "task.deliver", "task.judge",
        }
    finally:
        await s.c.close()
    return done


class Party:
    def __init__(self, agent: str, key: str, c: Client):
        self.id, self.key, self.c = agent, key, c

    async def act(self, op: str, args: dict) -> Any:
        return await self.c.act(op, args)

    async def read(self, op: str, args: dict | None = None) -> Any:
        return await self.c.read(op, args or {})


def _recover_in_a_new_process(url: str, key: str) -> list[tuple[str, str, dict]]:
    import json
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import asyncio, json, sys\n"
        "from tests.e2e.test_recovery import recover\n"
        "print(json.dumps(asyncio.run(recover(sys.argv[1], sys.argv[2]))))\n"
    )
    root = Path(__file__).resolve().parents[2]
    r = subprocess.run([sys.executable, "-c", code, url, key], cwd=root, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    return [tuple(x) for x in json.loads(r.stdout.strip().splitlines()[-1])]


async def party(url: str, name: str) -> Party:
    agent, key = await register(url, name)
    return Party(agent, key, await Client.connect(url, key))


async def thread_with(gov: Party, *members: Party) -> str:
    t = (await gov.act("thread.create", {"content": {"title": "work"}}))["thread"]
    for m in members:
        grant = await gov.act("thread.admit", {"thread": t, "role": "speaker"})
        await m.act("thread.join", {"token": grant["token"]})
    return t


async def assignment_to(creator: Party, thread: str, to: Party) -> str:
    args = {"thread": thread, "content": {"text": "please"}, "ask": [], "assign": {"to": to.id, "content": {"criteria": "complete"}}}
    return (await creator.act("thread.post", args))["assignment"]


@pytest.mark.rules("R8-17", "R8-18", "R8-19", "R8-21", "R10.2-5", "R0-1", "R8-6", "R8-11", "L1-4")
async def test_R8_17_R10_2_5_a_client_with_only_its_key_discharges_every_obligation_after_a_daemon_kill(daemon):
    url = daemon.url
    alice, carol, rex = await party(url, "alice"), await party(url, "carol"), await party(url, "rex")
    t1 = await thread_with(alice, rex, carol)
    t2 = await thread_with(carol, rex, alice)
    # respond, in two Threads
    e1 = (await alice.act("thread.post", {"thread": t1, "content": {"q": "status?"}, "ask": [rex.id]}))["entry"]
    e2 = (await carol.act("thread.post", {"thread": t2, "content": {"q": "review?"}, "ask": [rex.id, alice.id]}))["entry"]
    # deliver an assignment
    a_deliver = await assignment_to(alice, t1, rex)
    await rex.act("assignment.take", {"assignment": a_deliver})
    # judge an assignment
    a_judge = await assignment_to(rex, t1, carol)
    await carol.act("assignment.take", {"assignment": a_judge, "deliver": {"content": {"done": "yes"}}})
    # deliver on a Task
    tk_alice = (await alice.act("task.create", {"audience": "open", "contract": {"content": CONTRACT}}))["task"]
    en_rex = (await rex.act("task.take", {"task": tk_alice}))["engagement"]
    # judge a Task engagement
    tk_rex = (await rex.act("task.create", {"audience": "open", "contract": {"content": CONTRACT}}))["task"]
    en_carol = (await carol.act("task.take", {"task": tk_rex, "deliver": {"content": {"summary": "short"}}}))["engagement"]
    before = (await rex.read("turn", {}))["items"]
    assert len(before) == 6

    # rex's session ends: its client and everything it remembered are gone
    rex_id, rex_key = rex.id, rex.key
    await rex.c.close()
    del rex
    # while it is away, the thread moves on and alice asks it again (R8-19)
    e3 = (await alice.act("thread.post", {"thread": t1, "content": {"q": "carol?"}, "ask": [carol.id]}))["entry"]
    e4 = (await alice.act("thread.post", {"thread": t1, "content": {"q": "rex, please"}, "ask": [rex_id]}))["entry"]
    # and the daemon dies without warning
    await alice.c.close()
    await carol.c.close()
    daemon.restart()
    url = daemon.url

    # A new process, a new connection, only the key (issue 5: client state thrown away entirely).
    done = _recover_in_a_new_process(url, rex_key)

    # every obligation was discharged, of every kind, including the one that arose while away
    kinds = sorted((k, "task" in ref) for k, _, ref in done)
    assert kinds == sorted(
        [("respond", False)] * 3 + [("deliver", False), ("judge", False), ("deliver", True), ("judge", True)]
    ), done
    responded = {(ref["thread"], ref["entry"]) for k, _, ref in done if k == "respond"}
    assert responded == {(t1, e1), (t2, e2), (t1, e4)}
    # and the others see the results (L1-4: all of it survived the kill)
    alice.c, carol.c = await Client.connect(url, alice.key), await Client.connect(url, carol.key)
    assert (await alice.read("assignment.get", {"assignment": a_deliver}))["state"] == "delivered"
    assert (await carol.read("assignment.get", {"assignment": a_judge}))["state"] == "adopted"
    assert (await alice.read("engagement.get", {"engagement": en_rex}))["state"] == "delivered"
    assert (await carol.read("engagement.get", {"engagement": en_carol}))["state"] == "adopted"
    judge_refs = [i["ref"] for i in (await alice.read("turn", {}))["items"] if i["obligation"] == "judge"]
    assert {"thread": t1, "assignment": a_deliver} in judge_refs
    assert {"task": tk_alice, "engagement": en_rex} in judge_refs
    entries = (await alice.read("thread.entries", {"thread": t1, "limit": 100}))["items"]
    states = {e["entry"]: {r["agent"]: r["state"] for r in e["responses"]} for e in entries}
    assert states[e1][rex_id] in ("replied", "handled") and states[e4][rex_id] in ("replied", "handled")
    assert rex_id not in states[e3]  # asked carol only
    # R8-19: what happened while rex was away is in its working set of the thread
    async with await Client.connect(url, rex_key) as again:
        ws = await again.read("thread.get", {"thread": t1})
        assert {e1, e3, e4} <= {e["entry"] for e in ws["recent"]} and ws["obligations"] == []
    # the guard in `recover` is real: an id no response of the session gave is refused
    guard = Session(await Client.connect(url, rex_key))
    with pytest.raises(AssertionError, match="used ids"):
        await guard.read("thread.get", {"thread": t1})
    await guard.c.close()
    await alice.c.close()
    await carol.c.close()

