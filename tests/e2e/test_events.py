"""§8 R8-20 notifications over the real daemon (WIRE.md "Event", docs/wire.md
"Events"): ``subscribe`` and its newest ``seq``; ``turn`` events whose ``added``
items are turn items and whose ``ended`` items name the exit; ``opportunity``
events; every subscribed connection of the agent gets them and no other agent
does (R12-8); ``subscribe {since}`` replays exactly the missed events, also
across a SIGKILL of the daemon (L1-4), then continues live with no gap and no
duplicate; a subscriber that stops reading is closed with 1008 while everyone
else keeps being served."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from typing import Any
from urllib.parse import urlparse

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from kungfud.client import Client
from tests.e2e.helpers import register


@pytest.fixture
def daemon(shared_daemon):
    """One daemon for the module (tests/conftest.py ``shared_daemon``): each test
    registers agents of its own and reads only what they wrote; the two that
    count the daemon's subscribers or kill it start their own."""
    return shared_daemon


WHYS = {
    "replied", "handled", "retracted", "left", "removed", "deactivated", "demoted", "closed",
    "taken", "delivered", "judged", "dropped", "voided", "expired",
}


# --- helpers ---------------------------------------------------------------------


class Agent:
    """A registered agent with its key, and one client connection."""

    def __init__(self, name: str, agent: str, key: str, c: Client):
        self.name, self.id, self.key, self.c = name, agent, key, c

    async def act(self, op: str, args: dict) -> Any:
        return await self.c.act(op, args)

    async def read(self, op: str, args: dict | None = None) -> Any:
        return await self.c.read(op, args or {})

    async def conn(self, url: str) -> Client:
        """Another connection of the same agent."""
        return await Client.connect(url, self.key)


async def agent(url: str, name: str) -> Agent:
    ag, key = await register(url, name)
    c = await Client.connect(url, key)
    c.agent = ag
    return Agent(name, ag, key, c)


async def thread_of(gov: Agent, *members: Agent, role: str = "speaker") -> str:
    t = (await gov.act("thread.create", {"content": {"title": "events"}}))["thread"]
    for m in members:
        grant = await gov.act("thread.admit", {"thread": t, "role": role})
        await m.act("thread.join", {"token": grant["token"]})
    return t


async def ask(by: Agent, thread: str, *who: Agent) -> int:
    r = await by.act("thread.post", {"thread": thread, "content": {"q": "?"}, "ask": [w.id for w in who]})
    assert r["responders"] == [w.id for w in who], r
    return r["entry"]


async def assign(by: Agent, thread: str, to: Agent, **extra: Any) -> str:
    args = {"thread": thread, "content": {"text": "work"}, "ask": [], "assign": {"to": to.id, "content": {"criteria": "done"}, **extra}}
    return (await by.act("thread.post", args))["assignment"]


async def next_event(c: Client, timeout: float = 5.0) -> dict:
    try:
        return await asyncio.wait_for(anext(c.events()), timeout)
    except asyncio.TimeoutError:
        raise AssertionError(f"no event within {timeout} s") from None


async def events(c: Client, n: int, timeout: float = 10.0) -> list[dict]:
    deadline = time.monotonic() + timeout
    return [await next_event(c, max(0.01, deadline - time.monotonic())) for _ in range(n)]


def pending(c: Client) -> list[dict]:
    """Events already received on ``c`` and not yet consumed."""
    out = []
    while not c._events.empty():
        out.append(c._events.get_nowait())
    return out


async def fence(by: Agent, thread: str, who: list[Agent], *cs: Client) -> dict:
    """Prove that nothing is on its way to the connections ``cs`` (of the agents
    ``who``, all subscribed): ``by`` asks ``who`` once more, and that entry's
    event must be the next each connection receives. Events reach a connection
    in seq order, so an event of anything done before would arrive first; this
    replaces waiting a while and finding nothing. Returns the fence event of
    the first connection."""
    entry = await ask(by, thread, *who)
    got = [await next_event(c) for c in cs]
    for ev in got:
        assert ev["event"] == "turn" and [i["ref"] for i in ev["data"]["added"]] == [{"thread": thread, "entry": entry}], (
            f"an event arrived before the fence: {ev}"
        )
    # One fact: WIRE.md 1.2 gives each agent's event its own seq, consecutive
    # (two connections of one agent get the same event).
    assert max(seqs(got)) - min(seqs(got)) < len(cs), got
    return got[0]


async def read_fence(c: Client) -> None:
    """Prove that nothing is on its way to ``c`` when no later event can mark it
    (a connection that never subscribed, an agent that can no longer be asked):
    the daemon publishes a commit's events before it replies to the action
    (docs/wire.md), so an event of any action already answered is queued to
    ``c`` before the reply to a request sent now, and one connection's frames
    arrive in order."""
    await c.request("agent.whoami")  # refused or not, its reply is the marker


async def subscribe(c: Client, since: int | None = None) -> int:
    r = await c.read("subscribe", {} if since is None else {"since": since})
    assert r.keys() == {"subscribed", "seq"} and r["subscribed"] is True, r
    assert isinstance(r["seq"], int) and r["seq"] >= 0, r
    return r["seq"]


def check_frame(ev: dict) -> None:
    """docs/wire.md: ``{seq, event, data}``; turn data ``{added, ended}``."""
    assert ev.keys() == {"seq", "event", "data"}, ev
    assert isinstance(ev["seq"], int) and ev["seq"] > 0, ev
    assert ev["event"] in ("turn", "opportunity", "outcome"), ev
    if ev["event"] == "outcome":  # WIRE.md 1.1 "Outcomes"
        assert {"ref", "state", "at"} <= ev["data"].keys() <= {"ref", "state", "at", "by", "content"}, ev
    if ev["event"] == "turn":
        assert ev["data"].keys() == {"added", "ended"}, ev
        for item in ev["data"]["added"]:
            assert item["obligation"] in ("respond", "deliver", "judge") and item["next"] == item["obligation"], ev
        for e in ev["data"]["ended"]:
            assert e.keys() == {"obligation_id", "why"} and e["why"] in WHYS, ev


def seqs(evs: list[dict]) -> list[int]:
    return [e["seq"] for e in evs]


def strictly_increasing(xs: list[int]) -> bool:
    return all(a < b for a, b in zip(xs, xs[1:]))


async def turn_items(c: Client) -> list[dict]:
    items, cursor = [], None
    while True:
        page = await c.read("turn", {"cursor": cursor, "limit": 100})
        items += page["items"]
        cursor = page["cursor"]
        if cursor is None:
            return items


async def close(*cs: Client | Agent) -> None:
    for c in cs:
        await (c.c if isinstance(c, Agent) else c).close()


# --- subscribe, turn and opportunity events -------------------------------------------


@pytest.mark.rules("R8-20", "R8-22", "R8-25", "R8-15", "R8-3")
async def test_R8_20_subscribe_reports_newest_seq_and_events_mirror_turn_and_opportunities(daemon):
    url = daemon.url
    a, x, y = await agent(url, "alice"), await agent(url, "xavier"), await agent(url, "yuki")
    t = await thread_of(a, x, y)
    await ask(a, t, x)  # before subscribing: only a `since` replay shows it
    # the newest seq at the moment of subscribing is the seq of the newest fact,
    # here the entry that produced x's last event
    other = await x.conn(url)
    newest = await subscribe(other, since=0)
    [replayed] = await events(other, 1)
    assert replayed["event"] == "turn" and replayed["seq"] == newest, (replayed, newest)
    assert await subscribe(x.c) == newest and await subscribe(y.c) == newest

    # a new obligation: `added` holds exactly the turn item
    e2 = await ask(a, t, x)
    ev = await next_event(x.c)
    check_frame(ev)
    [item] = [i for i in await turn_items(x.c) if i["ref"]["entry"] == e2]
    assert ev["event"] == "turn" and ev["data"] == {"added": [item], "ended": []}, ev
    # the first event x.c receives is a later one: a replay (seq <= newest) would have come first
    assert ev["seq"] > newest, "subscribe without since replays nothing"
    # handling it: `ended` with why "handled", and the turn no longer has it
    r = await x.act("thread.handle", {"thread": t, "entry": e2})
    ev2 = await next_event(x.c)
    check_frame(ev2)
    assert ev2["data"] == {"added": [], "ended": [{"obligation_id": item["obligation_id"], "why": "handled"}]}, ev2
    assert r["ended"] == [item["obligation_id"]]
    # an assignment addressed to x: an opportunity event, not a turn event (R8-3)
    asg = await assign(a, t, x)
    ev3 = await next_event(x.c)
    check_frame(ev3)
    [opp] = (await x.read("opportunities"))["items"]
    assert ev3["event"] == "opportunity", ev3
    assert ev3["data"]["opportunity"] == "assignment" and ev3["data"]["ref"] == {"thread": t, "assignment": asg}, ev3
    assert ev3["data"]["created_at"] == opp["created_at"] and opp["ref"] == ev3["data"]["ref"]
    # a restricted Task naming x: an opportunity event too
    task = (await a.act("task.create", {"audience": {"agents": [x.id]}, "contract": {"content": {"output": "o", "criteria": "c"}}}))["task"]
    ev4 = await next_event(x.c)
    check_frame(ev4)
    assert ev4["event"] == "opportunity" and ev4["data"]["opportunity"] == "task" and ev4["data"]["ref"] == {"task": task}, ev4
    assert strictly_increasing(seqs([ev, ev2, ev3, ev4]))
    # y, in the same thread, got none of it: its first event is its own
    e5 = await ask(a, t, y)
    ev5 = await next_event(y.c)
    assert ev5["data"]["added"][0]["ref"] == {"thread": t, "entry": e5} and ev5["seq"] > ev4["seq"], ev5
    await fence(a, t, [x, y], x.c, y.c)
    await close(a, x, y, other)


@pytest.mark.rules("R8-20", "R8-3", "R8-4")
async def test_R8_20_an_opportunity_event_carries_the_opportunity_item(daemon):
    """WIRE.md: ``{"event": "opportunity", "data": {…opportunity item…}}``: the
    same item ``opportunities`` lists (docs/wire.md gives its fields)."""
    url = daemon.url
    a, x = await agent(url, "alice"), await agent(url, "xavier")
    try:
        t = await thread_of(a, x)
        await subscribe(x.c)
        asg = await assign(a, t, x, deliver_within_s=600, judge_within_s=700)
        ev_asg = await next_event(x.c)
        task = (await a.act("task.create", {"audience": {"agents": [x.id]}, "contract": {"content": {"output": "o", "criteria": "c"}}}))["task"]
        ev_task = await next_event(x.c)
        items = (await x.read("opportunities"))["items"]
        [item_asg] = [o for o in items if o["ref"].get("assignment") == asg]
        [item_task] = [o for o in items if o["ref"].get("task") == task]
        assert ev_asg["event"] == "opportunity" and ev_asg["data"] == item_asg, (ev_asg["data"], item_asg)
        assert ev_task["event"] == "opportunity" and ev_task["data"] == item_task, (ev_task["data"], item_task)
    finally:
        await close(a, x)


@pytest.mark.rules("R8-20", "R8-24", "R8-25", "R8-26", "R8-27", "R8-28", "R8-31", "R8-32", "R8-33", "R8-34", "R8-37", "T2")
async def test_R8_20_each_ended_item_names_the_exit_that_ended_it(daemon):
    url = daemon.url
    a, x, y = await agent(url, "alice"), await agent(url, "xavier"), await agent(url, "yuki")
    admin = await Client.connect(url, daemon.admin_key)
    t = await thread_of(a, x, y)
    await subscribe(x.c)
    await subscribe(a.c)

    async def added(c: Client, kind: str) -> str:
        ev = await next_event(c)
        check_frame(ev)
        assert ev["event"] == "turn" and [i["obligation"] for i in ev["data"]["added"]] == [kind], ev
        return ev["data"]["added"][0]["obligation_id"]

    async def ended_with(c: Client, ob: str, why: str, also_added: list[str] | None = None) -> None:
        ev = await next_event(c, timeout=8.0)
        check_frame(ev)
        assert ev["event"] == "turn" and ev["data"]["ended"] == [{"obligation_id": ob, "why": why}], (why, ev)
        assert [i["obligation"] for i in ev["data"]["added"]] == (also_added or []), ev

    async def opportunity(c: Client) -> None:
        ev = await next_event(c)
        assert ev["event"] == "opportunity", ev

    async def outcome(c: Client, state: str) -> None:
        """WIRE.md 1.1: the other party learns how the work ended, after the turn event."""
        ev = await next_event(c, timeout=8.0)
        check_frame(ev)
        assert ev["event"] == "outcome" and ev["data"]["state"] == state, ev

    e = await ask(a, t, x)
    ob = await added(x.c, "respond")
    await x.act("thread.post", {"thread": t, "content": {"re": 1}, "reply_to": e, "ask": []})
    await ended_with(x.c, ob, "replied")

    e = await ask(a, t, x)
    ob = await added(x.c, "respond")
    await x.act("thread.handle", {"thread": t, "entry": e, "content": {"note": "seen"}})
    await ended_with(x.c, ob, "handled")

    e = await ask(a, t, x)
    ob = await added(x.c, "respond")
    await a.act("thread.retract", {"thread": t, "entry": e})
    await ended_with(x.c, ob, "retracted")

    # an entry that both asks x and assigns to x: taking the assignment answers it
    r = await a.act("thread.post", {"thread": t, "content": {"q": "do it"}, "ask": [x.id], "assign": {"to": x.id, "content": {"criteria": "c"}}})
    ob = await added(x.c, "respond")
    await opportunity(x.c)
    await x.act("assignment.take", {"assignment": r["assignment"]})
    await ended_with(x.c, ob, "taken", also_added=["deliver"])
    deliver = (await turn_items(x.c))[0]["obligation_id"]
    await x.act("assignment.deliver", {"assignment": r["assignment"], "content": {"v": 1}})
    await ended_with(x.c, deliver, "delivered")
    judge = await added(a.c, "judge")
    await a.act("assignment.judge", {"assignment": r["assignment"], "verdict": "adopt"})
    await ended_with(a.c, judge, "judged")
    await outcome(x.c, "adopted")

    for how, who, why in (("assignment.drop", x, "dropped"), ("assignment.void", a, "voided")):
        asg = await assign(a, t, x)
        await opportunity(x.c)
        await x.act("assignment.take", {"assignment": asg})
        ob = await added(x.c, "deliver")
        await who.act(how, {"assignment": asg})
        await ended_with(x.c, ob, why)
        await outcome(a.c if who is x else x.c, why)  # the party that did not act

    asg = await assign(a, t, x, deliver_within_s=1)
    await opportunity(x.c)
    await x.act("assignment.take", {"assignment": asg})
    ob = await added(x.c, "deliver")
    await ended_with(x.c, ob, "expired")  # no one acts: the deadline does
    await outcome(x.c, "timed_out")
    await outcome(a.c, "timed_out")

    e = await ask(a, t, x)
    ob = await added(x.c, "respond")
    await a.act("thread.set_role", {"thread": t, "agent": x.id, "role": "observer"})
    await ended_with(x.c, ob, "demoted")

    for end, why in (("leave", "left"), ("remove", "removed"), ("close", "closed")):
        t2 = await thread_of(a, x, y)
        await ask(a, t2, x)
        ob = await added(x.c, "respond")
        if end == "leave":
            await x.act("thread.leave", {"thread": t2})
        elif end == "remove":
            await a.act("thread.remove", {"thread": t2, "agent": x.id})
        else:
            await a.act("thread.close", {"thread": t2})
        await ended_with(x.c, ob, why)

    t3 = await thread_of(a, x, y)
    await ask(a, t3, x)
    ob = await added(x.c, "respond")
    await admin.act("admin.agent.set_status", {"agent": x.id, "status": "deactivated"})
    await ended_with(x.c, ob, "deactivated")
    await fence(y, t3, [a], a.c)
    await read_fence(x.c)  # x, deactivated, can be asked no more
    assert pending(x.c) == []
    await close(a, x, y, admin)


# --- who receives events ----------------------------------------------------------


@pytest.mark.rules("R8-20", "R8-23", "R8-30", "R8-36", "R12-8")
async def test_R8_20_events_reach_every_subscribed_connection_of_the_agent_and_no_one_else(daemon):
    url = daemon.url
    a, x, y = await agent(url, "alice"), await agent(url, "xavier"), await agent(url, "yuki")
    t = await thread_of(a, x, y)
    x2, x_quiet = await x.conn(url), await x.conn(url)  # x_quiet never subscribes
    for c in (x.c, x2, y.c, a.c):
        await subscribe(c)
    # x-only changes: asks of x, x's handles, an assignment offered to and taken by x
    e1 = await ask(a, t, x)
    e2 = await ask(a, t, x)
    await x.act("thread.handle", {"thread": t, "entry": e1})
    asg = await assign(a, t, x)
    await x2.act("assignment.take", {"assignment": asg})
    await x.act("thread.post", {"thread": t, "content": {"re": e2}, "reply_to": e2, "ask": []})
    got = await events(x.c, 6)
    got2 = await events(x2, 6)
    assert got == got2, "both subscribed connections of x get the same events"
    for ev in got:
        check_frame(ev)
    assert strictly_increasing(seqs(got))
    assert [ev["event"] for ev in got] == ["turn", "turn", "turn", "opportunity", "turn", "turn"]
    # nothing of x's reached y or alice: their first events are their own
    e3 = await ask(x, t, y)
    ev_y = await next_event(y.c)
    assert ev_y["data"]["added"][0]["ref"] == {"thread": t, "entry": e3}, ev_y
    await x.act("assignment.deliver", {"assignment": asg, "content": {"v": 1}})
    ev_a = await next_event(a.c)
    assert ev_a["data"]["added"][0]["obligation"] == "judge" and ev_a["data"]["added"][0]["ref"]["assignment"] == asg, ev_a
    assert ev_y["seq"] > got[-1]["seq"] and ev_a["seq"] > ev_y["seq"]
    # x's own delivery ended x's deliver obligation: both x connections see it
    for c in (x.c, x2):
        ev = await next_event(c)
        # the same fact as a's event, but an event of its own: its own seq (WIRE.md 1.2)
        assert ev["data"]["ended"][0]["why"] == "delivered" and abs(ev["seq"] - ev_a["seq"]) == 1, ev
    await fence(y, t, [x, a], x.c, x2, a.c)
    await fence(a, t, [y], y.c)
    await read_fence(x_quiet)  # after the fence reached x's subscribed connections
    assert pending(x_quiet) == [], "a connection that did not subscribe gets no events"
    await close(a, x, y, x2, x_quiet)


@pytest.mark.rules("R8-20")
async def test_R8_20_subscribing_again_on_a_connection_replaces_the_subscription(daemon):
    url = daemon.url
    a, x = await agent(url, "alice"), await agent(url, "xavier")
    t = await thread_of(a, x)
    await subscribe(x.c)
    await ask(a, t, x)
    first = await next_event(x.c)
    await subscribe(x.c)
    await subscribe(x.c, since=first["seq"])  # nothing after it yet: replays nothing
    await ask(a, t, x)
    second = await next_event(x.c)
    await fence(a, t, [x], x.c)  # "one connection, one subscription": no duplicate of `second` before it
    assert second["seq"] > first["seq"]
    await close(a, x)


async def subscriber_gauge(url: str) -> tuple[int, int]:
    """(``kungfud_connections``, ``kungfud_subscribers``) from GET /metrics."""
    u = urlparse(url)
    reader, writer = await asyncio.open_connection(u.hostname, u.port)
    writer.write(f"GET /metrics HTTP/1.1\r\nHost: {u.hostname}\r\nConnection: close\r\n\r\n".encode())
    body = (await reader.read()).decode()
    writer.close()
    values = dict(line.split() for line in body.splitlines() if line.startswith(("kungfud_connections ", "kungfud_subscribers ")))
    return int(values["kungfud_connections"]), int(values["kungfud_subscribers"])


@pytest.mark.rules("R8-20", "R12-8")
async def test_R12_8_hello_as_another_agent_ends_the_previous_agents_subscription(daemon):
    """Review L3. A connection subscribed as xavier re-authenticates with
    yuki's key: xavier's events must no longer reach it (they are not yuki's
    to read); xavier's other subscribed connection still gets them."""
    url = daemon.url
    a, x, y = await agent(url, "alice"), await agent(url, "xavier"), await agent(url, "yuki")
    t = await thread_of(a, x, y)
    x2 = await x.conn(url)
    await subscribe(x.c)
    await subscribe(x2)
    assert (await x.read("hello", {"key": y.key}))["agent"] == y.id
    await ask(a, t, x)
    assert (await next_event(x2))["data"]["added"][0]["obligation"] == "respond"  # the event was published
    # A reply on the re-authenticated connection comes after any event queued before it.
    assert (await x.read("agent.whoami"))["agent"] == y.id
    assert pending(x.c) == [], "the connection, now yuki, still receives xavier's events"
    await close(a, x, y, x2)


@pytest.mark.rules("R8-20", "R12-11")
async def test_R8_20_a_closed_subscriber_leaves_no_subscription_behind(make_daemon):
    """Review L3. Every subscription ends with its connection, whoever the
    connection was authenticated as when it closed: ``kungfud_subscribers``
    returns to 0."""
    daemon = make_daemon()  # a daemon of its own: its gauge counts every subscriber of the daemon
    url = daemon.url
    x, y = await agent(url, "xavier"), await agent(url, "yuki")
    plain = await x.conn(url)
    await subscribe(plain)
    await subscribe(x.c)
    await x.read("hello", {"key": y.key})  # subscribed as xavier, now yuki
    await subscribe(y.c)
    await close(x, y, plain)
    deadline = time.monotonic() + 10
    while (gauge := await subscriber_gauge(url))[0] != 0:
        assert time.monotonic() < deadline, f"connections still open: {gauge}"
        # A poll for a condition, not a wait for absence: the daemon ends a
        # connection after the client's close returns, and no frame of a closed
        # connection can mark that moment.
        await asyncio.sleep(0.05)
    assert gauge == (0, 0), f"subscriptions left behind after every connection closed: {gauge}"


# --- since: replay without gap or duplicate -------------------------------------------


@pytest.mark.rules("R8-20", "R8-19")
async def test_R8_20_subscribe_since_replays_exactly_the_missed_events_then_continues_live(daemon):
    url = daemon.url
    a, x, y = await agent(url, "alice"), await agent(url, "xavier"), await agent(url, "yuki")
    t = await thread_of(a, x, y)
    await subscribe(x.c)  # the live witness: subscribed throughout
    entries = [await ask(a, t, x) for _ in range(3)]
    await x.act("thread.handle", {"thread": t, "entry": entries[0]})
    await assign(a, t, x)
    await ask(a, t, x)
    live = await events(x.c, 6)
    assert strictly_increasing(seqs(live))

    # a fresh connection that saw the second event catches up from its seq
    fresh = await x.conn(url)
    newest = await subscribe(fresh, since=live[1]["seq"])
    assert newest == live[-1]["seq"]
    assert await events(fresh, 4) == live[2:]
    # then continues live: the next event once, on both connections
    await ask(a, t, x)
    ev = await next_event(fresh)
    assert ev == await next_event(x.c) and ev["seq"] > newest
    # since the newest seq replays nothing; since 0 replays the whole feed
    nothing = await x.conn(url)
    await subscribe(nothing, since=ev["seq"])
    everything = await x.conn(url)
    await subscribe(everything, since=0)
    assert await events(everything, 7) == live + [ev]
    marker = await fence(a, t, [x], fresh, nothing, everything, x.c)

    # replay racing live: subscribe with since while asks keep arriving
    asking = asyncio.Event()

    async def producer() -> None:
        for i in range(60):
            await ask(a, t, x)
            if i == 4:
                asking.set()

    prod = asyncio.create_task(producer())
    await asking.wait()  # subscribe only once the asks are under way
    racer = await x.conn(url)
    await subscribe(racer, since=live[3]["seq"])
    await prod
    witness = await events(x.c, 60)
    expected = live[4:] + [ev, marker] + witness
    got = await events(racer, len(expected), timeout=15.0)
    assert seqs(got) == seqs(expected), "replay then live: no gap, no duplicate, in order"
    assert got == expected
    await fence(a, t, [x], racer, x.c)
    await close(a, x, y, fresh, nothing, everything, racer)


@pytest.mark.rules("R8-20", "R8-19", "L1-4", "R8-21")
async def test_R8_20_events_missed_across_a_daemon_kill_are_replayed_with_since(make_daemon):
    daemon = make_daemon()  # a daemon of its own: it is killed and started again
    a_id, a_key = await register(daemon.url, "alice")
    x_id, x_key = await register(daemon.url, "xavier")
    a = Agent("alice", a_id, a_key, await Client.connect(daemon.url, a_key))
    x = Agent("xavier", x_id, x_key, await Client.connect(daemon.url, x_key))
    y = await agent(daemon.url, "yuki")
    t = await thread_of(a, x, y)
    await subscribe(x.c)
    e1 = await ask(a, t, x)
    first = await next_event(x.c)
    last_seen = first["seq"]
    # notified of e1; then, acknowledged but maybe never notified, e2 and the handle of e1
    e2 = await ask(a, t, x)
    await x.act("thread.handle", {"thread": t, "entry": e1})
    daemon.restart()  # SIGKILL, then start on the same data directory
    url = daemon.url
    for c in (a.c, x.c, y.c):
        await c.close()  # returns once the connection's reader has taken every frame that arrived
    before_kill = pending(x.c)  # whatever arrived before the kill

    a.c, x.c = await Client.connect(url, a_key), await Client.connect(url, x_key)
    watcher = await x.conn(url)
    newest = await subscribe(watcher)
    assert newest > last_seen
    e3 = await ask(a, t, x)
    after = await next_event(watcher)
    assert after["seq"] > newest

    await subscribe(x.c, since=last_seen)
    replay = await events(x.c, 3)
    for ev in replay:
        check_frame(ev)
    assert strictly_increasing(seqs(replay))
    assert replay[0]["data"]["added"][0]["ref"] == {"thread": t, "entry": e2}
    assert replay[1]["data"] == {"added": [], "ended": [{"obligation_id": first["data"]["added"][0]["obligation_id"], "why": "handled"}]}
    assert replay[2] == after and after["data"]["added"][0]["ref"] == {"thread": t, "entry": e3}
    assert before_kill == replay[: len(before_kill)], "what was sent live is what is replayed"
    # the turn agrees (R8-21: recovery never depends on the events)
    assert [i["ref"]["entry"] for i in await turn_items(x.c)] == [e2, e3]
    # and nothing more: the feed after e3's event is empty
    await fence(a, t, [x], x.c, watcher)
    await close(a, x, watcher)


# --- a slow subscriber ------------------------------------------------------------------


async def _slow_subscribers_dropped(url: str) -> int:
    """``kungfud_slow_subscribers_dropped_total`` of the node at ``url`` (GET /metrics)."""
    u = urlparse(url)
    reader, writer = await asyncio.open_connection(u.hostname, u.port)
    writer.write(f"GET /metrics HTTP/1.1\r\nHost: {u.hostname}\r\nConnection: close\r\n\r\n".encode())
    body = (await reader.read()).decode()
    writer.close()
    for line in body.splitlines():
        if line.startswith("kungfud_slow_subscribers_dropped_total "):
            return int(float(line.split()[1]))
    raise AssertionError("/metrics has no kungfud_slow_subscribers_dropped_total")


async def _stalled_subscriber(url: str, key: str) -> Any:
    """A websocket of the agent that subscribes and then reads nothing. Its socket
    advertises a small segment size and receive buffer, so the daemon's kernel
    send buffer for it stays small and the daemon's own queue fills quickly;
    ``max_queue=1`` stops the client library from reading ahead."""
    u = urlparse(url)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    if hasattr(socket, "TCP_MAXSEG"):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, 536)
    sock.connect((u.hostname, u.port))
    sock.setblocking(False)
    # ping_interval=None: a client that reads nothing cannot read pongs either;
    # its own keepalive must not end the connection before the daemon does.
    ws = await connect(
        url, sock=sock, additional_headers={"Authorization": f"Bearer {key}"}, max_queue=1, compression=None,
        max_size=None, ping_interval=None,
    )
    await ws.send(json.dumps({"id": "sub", "op": "subscribe", "args": {}}))
    reply = json.loads(await asyncio.wait_for(ws.recv(), 5))
    assert reply["id"] == "sub" and reply["ok"] is True, reply
    return ws


@pytest.mark.timeout_s(360)  # 3,000 posts: on two PostgreSQL nodes of a busy shared machine, minutes
@pytest.mark.rules("R8-20", "R8-21")
@pytest.mark.parametrize("event_loop", ["auto", "asyncio"])  # uvloop where installed, and asyncio's own
async def test_R8_20_a_subscriber_that_stops_reading_is_closed_with_1008_and_no_one_else_waits(make_daemon, event_loop):
    d = make_daemon(f'[server]\nevent_loop = "{event_loop}"\n[limits]\nactions_per_minute = 1000000\n')
    url = d.url
    a = await agent(url, "alice")
    x = await agent(url, "xavier")
    y = await agent(url, "yuki")
    z = await agent(url, "zoe")  # a bystander with ordinary requests
    t = await thread_of(a, x, y)
    stalled = await _stalled_subscriber(url, x.key)
    await subscribe(x.c)  # another subscribed connection of the same agent, reading
    await subscribe(y.c)

    latencies: list[float] = []
    total = 3000  # > 1,000 waiting frames plus what socket buffers can hold

    async def timed(coro: Any) -> Any:
        t0 = time.monotonic()
        r = await coro
        latencies.append(time.monotonic() - t0)
        return r

    received: list[dict] = []

    async def reader() -> None:
        while len(received) < total:
            received.append(await next_event(x.c, timeout=30.0))

    stop = asyncio.Event()

    by_calls = 0

    async def bystander() -> None:
        nonlocal by_calls
        while not stop.is_set():
            by_calls += 1
            await timed(z.read("agent.whoami"))
            await timed(y.read("turn", {"limit": 5}))
            await asyncio.sleep(0.02)  # real time is the subject: a bystander's steady requests, timed under load

    async def read_stalled() -> tuple[int, int]:
        """The stalled connection reads: what was already on its way, then the close."""
        frames = last = 0
        try:
            async with asyncio.timeout(25):  # the daemon closes it within send_timeout_s (30 s) of its drop
                while True:
                    msg = json.loads(await stalled.recv())
                    assert "event" in msg, msg
                    frames += 1
                    last = msg["seq"]
            raise AssertionError("the stalled subscriber was never closed")  # pragma: no cover
        except ConnectionClosed as e:
            assert e.rcvd is not None, f"closed without a close frame after {frames} frames: {e!r}"
            assert e.rcvd.code == 1008, e.rcvd
            assert e.rcvd.reason.strip(), e.rcvd
        return frames, last

    posted, dropped = asyncio.Event(), asyncio.Event()

    async def read_stalled_once_dropped() -> tuple[int, int]:
        # The daemon gives a dropped subscriber send_timeout_s (30 s) to take its
        # close frame, then aborts it; on a slower store (two PostgreSQL nodes
        # on a busy machine) the rest of the posting, or even one batch of it,
        # can outlast that, so the stalled client starts reading as soon as its
        # node has dropped it (watched beside the posting), or at the end.
        while not posted.is_set() and await _slow_subscribers_dropped(url) == 0:
            await asyncio.sleep(0.25)
        dropped.set()
        return await read_stalled()

    posters = [a.c] + [await Client.connect(url, a.key) for _ in range(3)]
    read_task = asyncio.create_task(reader())
    by_task = asyncio.create_task(bystander())
    stalled_task = asyncio.create_task(read_stalled_once_dropped())
    for start in range(0, total, 100):
        await asyncio.gather(
            *(
                timed(posters[i % len(posters)].act("thread.post", {"thread": t, "content": {"n": i}, "ask": [x.id]}))
                for i in range(start, min(total, start + 100))
            )
        )
        if dropped.is_set() and not stalled_task.done():
            # This process reads the stalled client too: on a busy machine it
            # read 210 frames in the 30 s while posting went on, and the daemon
            # aborted it. Posting waits while it reads its close.
            await asyncio.wait({stalled_task})
    posted.set()
    frames, last_seq = await stalled_task
    assert frames < total, "it was closed before the feed was complete"

    # everyone else kept being served
    await asyncio.wait_for(read_task, 60)
    stop.set()
    await by_task
    assert len(received) == total and strictly_increasing(seqs(received))
    # No one waits on the stalled subscriber: a reply held up by it would wait
    # out the daemon's send_timeout_s (30 s); on the shared 2-core machine at
    # load 20 a reply took 19 s for reasons of its own, so the bound is 25 s.
    assert max(latencies) < 25.0, f"a reply took {max(latencies):.1f} s"
    assert by_calls >= 3, "the bystander kept working throughout"
    assert pending(y.c) == [], "yuki got none of xavier's events"
    # the dropped subscriber catches up with since: exactly what it missed
    back = await x.conn(url)
    await subscribe(back, since=last_seq)
    missed = [ev for ev in received if ev["seq"] > last_seq]
    assert await events(back, len(missed), timeout=15.0) == missed
    # and live events still flow to the connection that kept reading
    await ask(a, t, x)
    ev = await next_event(x.c)
    assert ev == await next_event(back) and ev["seq"] > received[-1]["seq"]
    await close(a, x, y, z, back, *posters[1:])
