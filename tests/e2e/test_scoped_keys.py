"""Scoped keys over a real daemon (WIRE.md 1.3 "Scoped keys"): create, list,
revoke; what each scope may send; expiry and revocation refusing the key at
the upgrade (401) and closing its connections (4001) on every node; rotation,
reset and deactivation revoking them all."""

from __future__ import annotations

import asyncio

import pytest
from websockets.exceptions import InvalidStatus

from kungfud.client import Client, new_key
from tests.e2e.helpers import Raw, check_failure, register


async def _refused_upgrade(url: str, key: str) -> int:
    with pytest.raises(InvalidStatus) as e:
        await Raw.connect(url, key)
    return e.value.response.status_code


async def _make(url: str, key: str, scope: str, **extra) -> dict:
    async with await Raw.connect(url, key) as r:
        resp = await r.req("agent.key.create", {"scope": scope, "label": f"{scope} key", **extra}, key=new_key())
        assert resp["ok"] is True, resp
        return resp["result"]


@pytest.mark.rules("R4-3", "L3-6")
async def test_create_shows_the_key_once_and_list_shows_live_keys_only(daemon):
    agent, main = await register(daemon.url, "alice")
    async with await Raw.connect(daemon.url, main) as r:
        k = new_key()
        first = await r.req("agent.key.create", {"scope": "worker", "label": "box 7", "expires_in_s": 3600}, key=k)
        assert first["ok"] is True, first
        made = first["result"]
        assert set(made) == {"key_id", "key", "scope", "expires_at"} and made["scope"] == "worker"
        assert made["key_id"].startswith("ky_") and made["key"] and made["key"] != main
        again = await r.req("agent.key.create", {"scope": "worker", "label": "box 7", "expires_in_s": 3600}, key=k)
        assert again["replayed"] is True and again["result"] == {**made, "key": None}  # B4
        listed = (await r.req("agent.key.list"))["result"]["items"]
        assert [(i["key_id"], i["scope"], i["label"], i["expires_at"]) for i in listed] == [
            (made["key_id"], "worker", "box 7", made["expires_at"])
        ]
        assert all("key" not in i for i in listed)
        check_failure(await r.req("agent.key.create", {"scope": "admin", "label": "x"}, key=new_key()), "bad_request")
    async with await Client.connect(daemon.url, made["key"]) as c:
        who = await c.read("agent.whoami")
        assert who["agent"] == agent and who["scope"] == "worker"
    assert "last_used_at" not in listed[0]  # not used until then
    # used: its last use is listed (in memory, shared between nodes within a second or so)
    async with await Raw.connect(daemon.url, main) as r:
        for _ in range(50):
            (item,) = (await r.req("agent.key.list"))["result"]["items"]
            if "last_used_at" in item:
                break
            await asyncio.sleep(0.2)
        assert item["last_used_at"] >= item["created_at"], item


@pytest.mark.rules("R4-3", "R12-9")
async def test_each_scope_sends_only_its_ops_and_reads_no_more_than_its_agent(daemon):
    """read: reads only; worker: reads and doing work; a2a: a2a.* and whoami;
    anything else forbidden naming the scope. A scoped key reads what its agent
    may, never more: another agent's private Memory is not_found to both."""
    alice, main = await register(daemon.url, "alice")
    bob, bob_key = await register(daemon.url, "bob")
    async with await Client.connect(daemon.url, bob_key) as b:
        private = (await b.act("memory.create", {"content": {"text": "bob's"}}))["memory"]
    async with await Client.connect(daemon.url, main) as c:
        mine = (await c.act("memory.create", {"content": {"text": "alice's"}}))["memory"]
    scoped = {s: (await _make(daemon.url, main, s))["key"] for s in ("read", "worker", "a2a")}
    for scope, key in scoped.items():
        async with await Raw.connect(daemon.url, key) as r:
            assert (await r.req("agent.whoami"))["result"]["agent"] == alice
            err = check_failure(await r.req("memory.create", {"content": {"text": "x"}}, key=new_key()), "forbidden")
            assert repr(scope) in err["reason"] and "memory.create" in err["reason"] and err["next"] == "stop"
            check_failure(await r.req("agent.key.create", {"scope": "read", "label": "x"}, key=new_key()), "forbidden")
            got = await r.req("memory.get", {"memory": mine})
            if scope == "a2a":
                check_failure(got, "forbidden")
                check_failure(await r.req("subscribe", {"since": 0}), "forbidden")
            else:
                assert got["ok"] is True, got
                assert check_failure(await r.req("memory.get", {"memory": private}), "not_found")
            thread = await r.req("thread.create", {"content": {"title": "t"}}, key=new_key())
            check_failure(thread, "forbidden")
            take = await r.req("task.take", {"task": "tk_0000000000000000000000000"}, key=new_key())
            # worker may send it (and learns only what its agent would); the others are forbidden first
            check_failure(take, "not_found" if scope == "worker" else "forbidden")
    async with await Client.connect(daemon.url, main) as c:  # nothing was written by the scoped keys
        assert [m["memory"] for m in (await c.read("memory.list", {}))["items"]] == [mine]


@pytest.mark.rules("R4-3")
async def test_revoke_refuses_the_key_and_closes_its_connections_on_every_node(daemon):
    """The revoke sent on one node; the key's connections on another are closed
    4001, its upgrade refused 401, and the main key and other scoped keys stay."""
    agent, main = await register(daemon.url, "alice")
    here, there = daemon.urls[0], daemon.urls[-1]
    doomed = await _make(here, main, "read")
    kept = await _make(here, main, "worker")
    watching = await Raw.connect(here, doomed["key"])
    assert (await watching.req("subscribe", {"since": 0}))["ok"] is True
    reading = await Raw.connect(here, doomed["key"])
    other = await Raw.connect(here, kept["key"])
    async with await Raw.connect(there, main) as r:
        resp = await r.req("agent.key.revoke", {"key_id": doomed["key_id"]}, key=new_key())
        assert resp["result"] == {"key_id": doomed["key_id"], "revoked": True}
        items = (await r.req("agent.key.list"))["result"]["items"]
        assert [i["key_id"] for i in items] == [kept["key_id"]]
        check_failure(await r.req("agent.key.revoke", {"key_id": doomed["key_id"]}, key=new_key()), "not_found")
    assert await watching.closed_with() == 4001
    try:
        resp = await reading.req("agent.whoami")
        check_failure(resp, "unauthenticated")
    except Exception:
        pass
    assert await reading.closed_with() == 4001
    assert await _refused_upgrade(here, doomed["key"]) == 401
    assert await _refused_upgrade(there, doomed["key"]) == 401
    async with await Raw.connect(there) as r:
        check_failure(await r.req("hello", {"key": doomed["key"]}), "unauthenticated")
    assert (await other.req("agent.whoami"))["ok"] is True
    await other.close()


@pytest.mark.rules("R4-3")
async def test_an_expired_key_is_refused_and_its_connections_closed(clocked_daemon):
    daemon = clocked_daemon
    agent, main = await register(daemon.url, "alice")
    made = await _make(daemon.url, main, "read", expires_in_s=30)
    conns = [await Raw.connect(url, made["key"]) for url in daemon.urls]
    for c in conns:
        assert (await c.req("subscribe", {"since": 0}))["ok"] is True
    daemon.advance_clock(31)
    for c in conns:  # each node's sweep closes its own, with no request sent
        assert await c.closed_with(15) == 4001
    assert await _refused_upgrade(daemon.url, made["key"]) == 401
    async with await Raw.connect(daemon.url, main) as r:
        assert (await r.req("agent.key.list"))["result"]["items"] == []


@pytest.mark.rules("R4-1", "R4-3")
@pytest.mark.parametrize("how", ["rotate", "reset", "deactivate"])
async def test_rotation_reset_and_deactivation_revoke_every_scoped_key(daemon, how):
    agent, main = await register(daemon.url, "alice")
    made = [await _make(daemon.url, main, s) for s in ("read", "worker", "a2a")]
    conns = [await Raw.connect(daemon.urls[-1], m["key"]) for m in made]
    if how == "rotate":
        async with await Client.connect(daemon.urls[0], main) as c:
            main = (await c.act("agent.rotate_key", {}))["key"]
    else:
        async with await Client.connect(daemon.urls[0], daemon.admin_key) as admin:
            if how == "reset":
                main = (await admin.act("admin.agent.reset_key", {"agent": agent}))["key"]
            else:
                await admin.act("admin.agent.set_status", {"agent": agent, "status": "deactivated"})
                await admin.act("admin.agent.set_status", {"agent": agent, "status": "active"})
    for c in conns:
        assert await c.closed_with() == 4001
    for m in made:
        assert await _refused_upgrade(daemon.url, m["key"]) == 401
    async with await Raw.connect(daemon.url, main) as r:
        assert (await r.req("agent.key.list"))["result"]["items"] == []


@pytest.mark.rules("R12-11")
async def test_the_twenty_first_live_key_is_a_conflict(daemon):
    agent, main = await register(daemon.url, "alice")
    async with await Raw.connect(daemon.url, main) as r:
        for i in range(20):
            assert (await r.req("agent.key.create", {"scope": "read", "label": f"k{i}"}, key=new_key()))["ok"]
        err = check_failure(await r.req("agent.key.create", {"scope": "read", "label": "k20"}, key=new_key()), "conflict")
        assert "20" in err["reason"]
        first = (await r.req("agent.key.list"))["result"]["items"][0]["key_id"]
        assert (await r.req("agent.key.revoke", {"key_id": first}, key=new_key()))["ok"]
        assert (await r.req("agent.key.create", {"scope": "read", "label": "k20"}, key=new_key()))["ok"]


@pytest.mark.rules("R4-3", "L1-1")
async def test_scoped_keys_survive_a_restart_and_check_rebuilds_their_index(daemon):
    """The keys and their index rows follow from the facts: after a restart a
    live key still works, a revoked one is still refused, and `kungfud check`
    (which rebuilds every index from the log) finds the store consistent."""
    import sys

    agent, main = await register(daemon.url, "alice")
    live = await _make(daemon.url, main, "worker", expires_in_s=3600)
    gone = await _make(daemon.url, main, "read")
    async with await Raw.connect(daemon.url, main) as r:
        assert (await r.req("agent.key.revoke", {"key_id": gone["key_id"]}, key=new_key()))["ok"]
    daemon.restart()
    async with await Client.connect(daemon.url, live["key"]) as c:
        assert (await c.read("agent.whoami"))["scope"] == "worker"
    assert await _refused_upgrade(daemon.url, gone["key"]) == 401
    check = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kungfud", "check", *daemon.store_args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await check.communicate()
    assert check.returncode == 0 and b"OK" in out, out
