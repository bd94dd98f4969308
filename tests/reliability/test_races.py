"""Competing actions over the real daemon (L5; issue 6, item 5).

Every race fires its requests at the same moment on separate connections and
then checks the recorded outcome against a legal serial order (L5-1) and that
each obligation ended at most once (L5-2):

(a) reply vs handle vs retract on one pending response (30 rounds);
(b) an admin deactivating agent D while D joins one thread and posts in
    another (15 rounds): D ends a member nowhere, and D's entry exists exactly
    when its post was acknowledged — with a seq below the deactivation's;
(c) the addressee taking one assignment on 5 connections with 5 keys (20 rounds);
(d) the two governors of a thread demoting each other (30 rounds).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kungfud.client import Client, new_key
from tests.e2e.helpers import check_failure, register

CONFIG = "[limits]\nactions_per_minute = 1000000\n"  # the rate limit (L4-5) is not under test here


class Agent:
    def __init__(self, agent: str, key: str, clients: list[Client]):
        self.id = agent
        self.key = key
        self.clients = clients

    @property
    def c(self) -> Client:
        return self.clients[0]

    async def act(self, op: str, args: dict, conn: int = 0) -> Any:
        return await self.clients[conn].act(op, args)

    async def close(self) -> None:
        for c in self.clients:
            await c.close()


async def agent(url: str, name: str, connections: int = 1) -> Agent:
    a, key = await register(url, name)
    clients = list(await asyncio.gather(*(Client.connect(url, key) for _ in range(connections))))
    return Agent(a, key, clients)


async def request(who: Agent, conn: int, op: str, args: dict) -> dict:
    return await who.clients[conn].request(op, args, key=new_key())


async def at_once(*calls: Any, rotate: int = 0) -> list[dict]:
    """Send all requests before awaiting any reply, the ``rotate``-th first (so
    each side of a race gets to arrive first); results in argument order."""
    n = len(calls)
    order = [(rotate + i) % n for i in range(n)]
    tasks: list[asyncio.Task | None] = [None] * n
    for i in order:
        tasks[i] = asyncio.ensure_future(calls[i])
    return list(await asyncio.gather(*tasks))  # type: ignore[arg-type]


async def turn_items(c: Client) -> list[dict]:
    items: list[dict] = []
    cursor = None
    while True:
        page = await c.read("turn", {"cursor": cursor, "limit": 100})
        items += page["items"]
        cursor = page["cursor"]
        if cursor is None:
            return items


async def entries(c: Client, thread: str) -> list[dict]:
    out: list[dict] = []
    cursor = None
    while True:
        page = await c.read("thread.entries", {"thread": thread, "cursor": cursor, "limit": 100})
        out += page["items"]
        cursor = page["cursor"]
        if cursor is None:
            return out


async def admit_join(gov: Agent, thread: str, who: Agent, role: str = "speaker") -> None:
    grant = await gov.act("thread.admit", {"thread": thread, "role": role})
    await who.act("thread.join", {"token": grant["token"]})


# --- (a) ----------------------------------------------------------------------------


@pytest.mark.rules("L5-1", "L5-2", "R6.3-13", "R6.3-16", "R6.3-18", "R6.3-19", "R8-25", "R8-26")
async def test_L5_2_reply_handle_and_retract_racing_on_one_pending_response_end_it_once(make_daemon):
    d = make_daemon(CONFIG, name="races-a")
    author = await agent(d.url, "author", 2)
    responder = await agent(d.url, "responder", 2)
    third = await agent(d.url, "third")
    t = (await author.act("thread.create", {"content": {"title": "race"}}))["thread"]
    await admit_join(author, t, responder)
    await admit_join(author, t, third)
    winners: dict[str, int] = {}
    try:
        for round_no in range(30):
            e = (await author.act("thread.post", {"thread": t, "content": {"q": round_no}, "ask": [responder.id]}))["entry"]
            [ob] = [i for i in await turn_items(responder.c) if i["ref"] == {"thread": t, "entry": e}]
            ob_id = ob["obligation_id"]
            reply, handle, retract = await at_once(
                request(responder, 0, "thread.post", {"thread": t, "content": {"a": round_no}, "reply_to": e, "ask": []}),
                request(responder, 1, "thread.handle", {"thread": t, "entry": e, "content": {"note": "seen"}}),
                request(author, 1, "thread.retract", {"thread": t, "entry": e}),
                rotate=round_no,
            )
            outcome = {"replied": reply, "handled": handle, "retracted": retract}
            enders = [why for why, r in outcome.items() if r["ok"] and ob_id in r["result"]["ended"]]
            assert len(enders) == 1, (round_no, ob_id, outcome)  # ends exactly once (L5-2)
            for why, r in outcome.items():
                if not r["ok"]:
                    check_failure(r, "conflict")
            # The one that ended it ran first in the serial order: a handle
            # after it has nothing to handle, so it must have been refused.
            if enders != ["handled"]:
                assert not handle["ok"], (round_no, outcome)
            assert ob_id not in {i["obligation_id"] for i in await turn_items(responder.c)}
            [entry] = [x for x in await entries(author.c, t) if x["entry"] == e]
            [resp] = [x for x in entry["responses"] if x["agent"] == responder.id]
            assert resp["state"] == enders[0], (round_no, resp, outcome)
            winners[enders[0]] = winners.get(enders[0], 0) + 1
    finally:
        for a in (author, responder, third):
            await a.close()
    print(f"reply/handle/retract race: the response was ended by {winners} over 30 rounds")


# --- (b) -------------------------------------------------------------------------------


@pytest.mark.rules("L5-1", "R4-1", "R4-6", "R6.1-5", "R6.3-1", "R9-2")
async def test_L5_1_deactivation_racing_a_join_and_a_post_leaves_the_agent_a_member_nowhere(make_daemon):
    d = make_daemon(CONFIG, name="races-b")
    async with await Client.connect(d.url, d.admin_key) as admin:
        gov = await agent(d.url, "governor")
        events = await Client.connect(d.url, gov.key)
        await events.read("subscribe", {})
        counts = {"post": 0, "join": 0}
        try:
            for round_no in range(15):
                victim = await agent(d.url, f"victim{round_no}", 2)
                t1 = (await gov.act("thread.create", {"content": {"title": f"home {round_no}"}}))["thread"]
                await admit_join(gov, t1, victim)
                t2 = (await gov.act("thread.create", {"content": {"title": f"new {round_no}"}}))["thread"]
                token = (await gov.act("thread.admit", {"thread": t2, "role": "speaker"}))["token"]
                deact, join, post = await at_once(
                    admin.request("admin.agent.set_status", {"agent": victim.id, "status": "deactivated"}, key=new_key()),
                    request(victim, 0, "thread.join", {"token": token}),
                    request(victim, 1, "thread.post", {"thread": t1, "content": {"n": round_no}, "ask": [gov.id]}),
                    rotate=round_no,
                )
                assert deact["ok"] is True, deact
                deact_seq = deact["result"]["seq"]
                for name, r in (("join", join), ("post", post)):
                    if r["ok"]:
                        counts[name] += 1
                    else:  # refused as an action of a deactivated agent (R4-1)
                        check_failure(r, "forbidden")
                # Member nowhere (R4-6), whatever the order.
                for t in (t1, t2):
                    got = await gov.c.read("thread.get", {"thread": t})
                    assert victim.id not in {m["agent"] for m in got["members"]}, (round_no, t, join, post, got["members"])
                # The entry exists exactly when the post was acknowledged …
                mine = [x for x in await entries(gov.c, t1) if x["author"] == victim.id]
                assert len(mine) == (1 if post["ok"] else 0), (round_no, post, mine)
                if post["ok"]:
                    # … and its fact precedes the deactivation in the one serial order:
                    # the event it produced for the asked governor has a smaller seq.
                    seq = await _event_seq(events, t1, post["result"]["entry"])
                    assert seq < deact_seq, (round_no, seq, deact_seq)
                if join["ok"]:
                    assert join["result"]["thread"] == t2
                # And the deactivated agent acts no more (R4-1), nor reads the threads (R9-2).
                late = await request(victim, 0, "thread.post", {"thread": t1, "content": {"late": True}})
                check_failure(late, "forbidden")
                for t in (t1, t2):
                    check_failure(await victim.clients[0].request("thread.get", {"thread": t}), "not_found")
                await victim.close()
        finally:
            await gov.close()
            await events.close()
    print(f"deactivation race: of 15 rounds, the post won {counts['post']} and the join {counts['join']}")


async def _event_seq(events: Client, thread: str, entry: int) -> int:
    """The seq of the turn event that added the respond item for ``entry``."""
    while True:
        ev = await asyncio.wait_for(anext(events.events()), 10)
        for item in ev["data"].get("added", []) if ev["event"] == "turn" else []:
            if item["ref"] == {"thread": thread, "entry": entry}:
                return ev["seq"]


# --- (c) ------------------------------------------------------------------------------------


@pytest.mark.rules("L5-1", "L5-2", "R6.4-11", "R6.4-19")
async def test_L5_1_the_addressee_taking_one_assignment_on_5_connections_takes_it_once(make_daemon):
    d = make_daemon(CONFIG, name="races-c")
    creator = await agent(d.url, "creator")
    taker = await agent(d.url, "taker", 5)
    t = (await creator.act("thread.create", {"content": {"title": "takes"}}))["thread"]
    await admit_join(creator, t, taker)
    try:
        for round_no in range(20):
            asg = (
                await creator.act(
                    "thread.post",
                    {"thread": t, "content": {"n": round_no}, "assign": {"to": taker.id, "content": {"criteria": "done"}}},
                )
            )["assignment"]
            takes = await at_once(*(request(taker, i, "assignment.take", {"assignment": asg}) for i in range(5)), rotate=round_no)
            won = [r for r in takes if r["ok"]]
            assert len(won) == 1, (round_no, takes)
            assert won[0]["result"]["state"] == "taken"
            for r in takes:
                if not r["ok"]:
                    check_failure(r, "conflict")
            got = await creator.c.read("assignment.get", {"assignment": asg})
            assert got["state"] == "taken" and got["taker"] == taker.id, got
            delivers = [i for i in await turn_items(taker.c) if i["ref"].get("assignment") == asg]
            assert len(delivers) == 1 and delivers[0]["obligation"] == "deliver", delivers
            await taker.act("assignment.deliver", {"assignment": asg, "content": {"r": round_no}})
    finally:
        await creator.close()
        await taker.close()


# --- (d) -------------------------------------------------------------------------------------


@pytest.mark.rules("L5-1", "R6.2-3", "R6.2-4")
async def test_L5_1_R6_2_4_two_governors_demoting_each_other_leave_a_governor(make_daemon):
    d = make_daemon(CONFIG, name="races-d")
    g1 = await agent(d.url, "gov1")
    g2 = await agent(d.url, "gov2")
    outcomes: dict[str, int] = {}
    try:
        for round_no in range(30):
            t = (await g1.act("thread.create", {"content": {"n": round_no}}))["thread"]
            await admit_join(g1, t, g2, "governor")
            a, b = await at_once(
                request(g1, 0, "thread.set_role", {"thread": t, "agent": g2.id, "role": "observer"}),
                request(g2, 0, "thread.set_role", {"thread": t, "agent": g1.id, "role": "observer"}),
                rotate=round_no,
            )
            assert [a["ok"], b["ok"]].count(True) == 1, (round_no, a, b)  # the second one cannot also succeed
            loser = b if a["ok"] else a
            err = check_failure(loser)
            assert err["code"] in ("forbidden", "conflict"), loser
            outcomes[err["code"]] = outcomes.get(err["code"], 0) + 1
            got = await g1.c.read("thread.get", {"thread": t})
            roles = {m["agent"]: m["role"] for m in got["members"]}
            assert got["status"] == "open" and list(roles.values()).count("governor") == 1, (round_no, roles)
            winner = g1 if a["ok"] else g2
            assert roles[winner.id] == "governor", roles
    finally:
        await g1.close()
        await g2.close()
    print(f"governor race: the loser was refused with {outcomes}")
