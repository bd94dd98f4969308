"""The Python client (``kungfud.client``) end to end against a real daemon: its
typed helpers through a whole session, the page iterator, retries with the same
idempotency key after a lost or late reply (``replayed`` visible), timeouts, a
subscription that resumes with ``since`` after the connection drops, and the
``async with Client.connect(...)`` forms (docs/agents.md "The Python client").

Lost replies are made by a websocket proxy between the client and the daemon
that drops (closing the connection) or swallows the reply to a chosen op."""

from __future__ import annotations

import asyncio
import json
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

import pytest
from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from kungfud.client import Client, Rejected, Result, Subscription
from tests.e2e.helpers import register


@pytest.fixture
def daemon(shared_daemon):
    """One daemon for the module (tests/conftest.py ``shared_daemon``): each test
    registers agents of its own and reads only what they wrote."""
    return shared_daemon


class Proxy:
    """Forwards websocket frames between clients and the daemon, with the
    client's Authorization header. ``lose[op] = "close"`` drops the next reply to
    ``op`` and closes that client connection; ``"swallow"`` drops it and keeps
    the connection open (the client sees a timeout)."""

    def __init__(self, upstream: str):
        self.upstream = upstream
        self.lose: dict[str, str] = {}
        self.connections = 0
        self.live: set[ServerConnection] = set()
        self.url = ""

    async def handler(self, ws: ServerConnection) -> None:
        self.connections += 1
        self.live.add(ws)
        auth = ws.request.headers.get("Authorization") if ws.request else None
        ops: dict[Any, str] = {}
        try:
            async with connect(self.upstream, additional_headers={"Authorization": auth} if auth else None) as up:

                async def forward() -> None:
                    async for frame in ws:
                        msg = json.loads(frame)
                        ops[msg.get("id")] = msg.get("op")
                        await up.send(frame)

                async def back() -> None:
                    async for frame in up:
                        msg = json.loads(frame)
                        op = ops.pop(msg.get("id"), None) if "event" not in msg else None
                        how = self.lose.pop(op, None) if op is not None else None
                        if how == "close":
                            await ws.close(1011, "reply lost on purpose")
                            return
                        if how == "swallow":
                            continue
                        await ws.send(frame)

                tasks = [asyncio.create_task(forward()), asyncio.create_task(back())]
                await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
        except ConnectionClosed:
            pass
        finally:
            self.live.discard(ws)

    async def drop_all(self) -> None:
        for ws in list(self.live):
            await ws.close(1011, "dropped on purpose")


@asynccontextmanager
async def proxy(daemon_url: str) -> AsyncIterator[Proxy]:
    p = Proxy(daemon_url)
    async with serve(p.handler, "127.0.0.1", 0) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        p.url = f"ws://127.0.0.1:{port}/v1"
        yield p


async def _thread_of_two(url: str) -> tuple[Client, Client, str, str, str, str]:
    """alice governs a Thread bob speaks in; returns both clients, ids and bob's key."""
    alice, a_key = await register(url, "alice")
    bob, b_key = await register(url, "bob")
    a = await Client.connect(url, a_key)
    b = await Client.connect(url, b_key)
    t = (await a.create_thread("review"))["thread"]
    await b.join((await a.admit(t))["token"])
    return a, b, t, alice, bob, b_key


@pytest.mark.rules("L3-2", "R0-2")
async def test_L3_2_a_call_whose_reply_is_lost_is_sent_again_with_the_same_key_and_reports_replayed(daemon):
    """After a lost connection or a timeout the client sends the action again with
    the same idempotency key: the daemon did it once, and the result says it is
    the replayed first receipt. ``async with Client.connect(...)`` needs no await."""
    _, key = await register(daemon.url, "alice")
    async with Client.connect(daemon.url, key) as direct:
        t = (await direct.create_thread())["thread"]
        async with proxy(daemon.url) as p:
            # the reply is lost with the connection: reconnect, same key, replayed
            p.lose["thread.post"] = "close"
            async with Client.connect(p.url, key) as c:
                posted = await c.post(t, "once", ask=[])
                assert isinstance(posted, Result) and posted.replayed is True and posted["entry"] == 1
                assert p.connections == 2
                fresh = await c.post(t, "twice", ask=[])
                assert fresh.replayed is False and fresh["entry"] == 2
            # the reply never comes: after the timeout, same key on the same connection
            p.lose["memory.create"] = "swallow"
            c = await Client.connect(p.url, key, timeout=1.0)
            try:
                made = await c.act("memory.create", {"content": {"title": "once"}})
                assert made.replayed is True
                # a read that gets no answer and may not retry raises TimeoutError
                p.lose["turn"] = "swallow"
                with pytest.raises(TimeoutError):
                    await c.read("turn", retries=0)
            finally:
                await c.close()
            # without retries a lost reply is the caller's to handle (the old behaviour)
            p.lose["thread.post"] = "close"
            async with await Client.connect(p.url, key, retries=0) as c:
                with pytest.raises(ConnectionError):
                    await c.post(t, "maybe", ask=[], key="maybe-1")
            async with await Client.connect(p.url, key) as c:
                again = await c.post(t, "maybe", ask=[], key="maybe-1")
                assert again.replayed is True and again["entry"] == 3
        entries = [e["entry"] async for e in direct.items("thread.entries", {"thread": t})]
        assert entries == [1, 2, 3]
        mine = [m async for m in direct.items("memory.list", {})]
        assert sum(1 for m in mine if m["memory"] == made["memory"]) == 1
        assert len([m for m in mine]) == 4  # three entries' Memories and the one created once


@pytest.mark.rules("R8-20", "R8-19", "R8-22")
async def test_R8_20_a_subscription_resumes_with_since_after_the_connection_drops(daemon):
    """Events that happen while the subscriber's connection is down are replayed
    after it reconnects (``since`` = the last seq it yielded), in order, none
    repeated, none missing."""
    a, b, t, alice, bob, b_key = await _thread_of_two(daemon.url)
    try:
        async with proxy(daemon.url) as p, Client.connect(p.url, b_key) as c:
            sub = await c.subscribe()
            assert isinstance(sub, Subscription)
            first = await a.post(t, "one", ask=[bob])
            ev = await asyncio.wait_for(anext(sub), 10)
            assert ev["event"] == "turn" and ev["data"]["added"][0]["ref"]["entry"] == first["entry"]
            await p.drop_all()
            missed = [(await a.post(t, f"while away {i}", ask=[bob]))["entry"] for i in range(3)]
            got = [await asyncio.wait_for(anext(sub), 20) for _ in range(3)]
            assert [e["data"]["added"][0]["ref"]["entry"] for e in got] == missed
            seqs = [ev["seq"]] + [e["seq"] for e in got]
            assert seqs == sorted(set(seqs)) and sub.seq == seqs[-1]
            assert sub.resumed == 1 and p.connections == 2
            # and live events keep coming on the resumed subscription
            live = await a.post(t, "live", ask=[bob])
            ev = await asyncio.wait_for(anext(sub), 10)
            assert ev["data"]["added"][0]["ref"]["entry"] == live["entry"] and ev["seq"] > seqs[-1]
    finally:
        await a.close()
        await b.close()


@pytest.mark.rules("R8-10", "R8-13")
async def test_R8_10_items_walks_every_page_of_a_paged_read(daemon):
    """``items`` follows ``cursor`` until it is null: every turn item and every
    entry, in order, across pages of a bounded size."""
    a, b, t, alice, bob, _ = await _thread_of_two(daemon.url)
    try:
        asked = [(await a.post(t, f"question {i}", ask=[bob]))["entry"] for i in range(5)]
        pages = [page async for page in b.pages("turn", {"limit": 2})]
        assert [len(p["items"]) for p in pages] == [2, 2, 1] and pages[-1]["cursor"] is None
        items = [i async for i in b.items("turn", {"limit": 2})]
        assert [i["ref"]["entry"] for i in items] == asked
        entries = [e["entry"] async for e in a.items("thread.entries", {"thread": t, "limit": 2})]
        assert entries == asked
    finally:
        await a.close()
        await b.close()


@pytest.mark.rules("R8-17", "R6.3-7", "R6.4-19", "R6.4-11", "R7.3-1")
async def test_R8_17_typed_helpers_run_a_whole_session(daemon):
    """register, thread, ask and a reply that ends the exchange (both turns
    empty), an assignment taken, delivered and adopted, a Task taken, delivered
    and rejected with a reason; bad helper input is refused before anything is
    sent."""
    async with Client.connect(daemon.url) as anon:
        alice = await anon.register("alice")
        bob = await anon.register("bob")
    async with Client.connect(daemon.url, alice["key"]) as a, Client.connect(daemon.url, bob["key"]) as b:
        assert (await a.whoami())["agent"] == alice["agent"]
        t = (await a.create_thread("review"))["thread"]
        await b.join((await a.admit(t))["token"])
        ask = await a.post(t, "ready?", ask=[bob["agent"]])
        (item,) = (await b.turn())["items"]
        assert item["ref"] == {"thread": t, "entry": ask["entry"]}
        reply = await b.post(t, "yes", reply_to=ask["entry"], ask=[])
        assert reply["responders"] == []
        assert (await a.turn())["items"] == [] and (await b.turn())["items"] == []

        post = await a.post(t, "write it", ask=[], assign={"to": bob["agent"], "content": {"criteria": "short", "output": "text"}})
        asg = post["assignment"]
        assert (await b.take(asg))["state"] == "taken"
        assert (await b.deliver(asg, "Done."))["state"] == "delivered"
        assert (await a.judge(asg, "adopt"))["state"] == "adopted"
        assert (await b.get(asg))["state"] == "adopted"

        task = (await a.act("task.create", {"audience": "open", "contract": {"content": {"output": "a haiku", "criteria": "5-7-5"}}}))["task"]
        eng = (await b.take(task))["engagement"]
        await b.deliver(eng, content={"text": "an old silent pond"})
        judged = await a.judge(eng, "reject", "not 5-7-5")
        assert judged["state"] == "rejected"
        got = await b.get(eng)
        assert got["state"] == "rejected"
        assert (await a.turn())["items"] == [] and (await b.turn())["items"] == []

        before = (await a.get(t))["entries"]
        for bad in (
            a.post(t),                                  # nothing to post
            a.post(t, "x", content={"text": "y"}),      # two things to post
            b.deliver(t, "x"),                          # not an assignment or engagement
            b.take("en_" + "0" * 26),                   # not an assignment or Task
            a.judge(asg, "reject"),                     # a rejection without a reason
            a.judge(asg, "maybe"),
        ):
            with pytest.raises(ValueError):
                await bad
        assert (await a.get(t))["entries"] == before
        with pytest.raises(Rejected) as e:
            await b.deliver(asg, "again")
        assert e.value.code == "conflict" and e.value.next == "stop"
