"""Operating a deployment (WIRE.md "Additions in 1.1" → "Operating a
deployment", issue 15 item 1): ``admin.agent.create``, ``admin.agent.list``,
``agent.rotate_key``, ``admin.agent.reset_key``, and the 4001 close of every
connection that authenticated with a key that no longer works."""

from __future__ import annotations

import asyncio
import sys

import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus

from kungfud.client import Client, new_key
from tests.e2e.helpers import Raw, check_failure, fake_id, register

CLOSED = "[server]\nopen_registration = false\n"


async def _admin(daemon) -> Client:
    c = await Client.connect(daemon.url, daemon.admin_key)
    c.agent = (await c.read("agent.whoami"))["agent"]
    return c


async def _refused_upgrade(url: str, key: str) -> int:
    """The HTTP status of an upgrade with ``key`` on the Authorization header."""
    with pytest.raises(InvalidStatus) as e:
        await Raw.connect(url, key)
    return e.value.response.status_code


async def _hello(url: str, key: str) -> dict:
    async with await Raw.connect(url) as r:
        return await r.req("hello", {"key": key})


# --- admin.agent.create --------------------------------------------------------------


@pytest.mark.rules("R4-3", "L3-2", "L3-6")
async def test_wire_admin_agent_create_works_with_open_registration_off(make_daemon):
    """WIRE.md "Operating a deployment": an admin creates agents whether or not
    open registration is on; the key is shown once and a replay nulls it (B4)."""
    d = make_daemon(CLOSED)
    async with await Raw.connect(d.url) as r:
        check_failure(await r.req("agent.register", {"content": {"name": "x"}}), "forbidden")
    async with await _admin(d) as admin:
        k = new_key()
        first = await admin.request("admin.agent.create", {"content": {"name": "w1", "team": "ops"}}, key=k)
        assert first["ok"] is True and first["replayed"] is False, first
        assert set(first["result"]) == {"agent", "key"}
        agent, key = first["result"]["agent"], first["result"]["key"]
        assert agent.startswith("ag_") and key.startswith("kf_")
        again = await admin.request("admin.agent.create", {"content": {"name": "w1", "team": "ops"}}, key=k)
        assert again["ok"] is True and again["replayed"] is True, again
        assert again["result"] == {"agent": agent, "key": None}
        # same key, other args: a mismatch, and no second agent
        check_failure(await admin.request("admin.agent.create", {"content": {"name": "w2"}}, key=k), "idempotency_mismatch")
        listed = await admin.read("admin.agent.list", {})
        assert [it["agent"] for it in listed["items"]] == [admin.agent, agent]
    async with await Client.connect(d.url, key) as w1:
        me = await w1.read("agent.whoami")
        assert me == {"agent": agent, "status": "active", "content": {"name": "w1", "team": "ops"}}
        assert (await w1.act("memory.create", {"content": {"text": "hi"}}))["memory"].startswith("me_")


@pytest.mark.rules("R4-1", "L2-3", "L2-4")
async def test_wire_admin_agent_create_is_for_active_admins_only(make_daemon):
    """WIRE.md "Operating a deployment": admin only; a bad name is bad_request."""
    d = make_daemon("[server]\nopen_registration = true\n")
    alice, alice_key = await register(d.url, "alice")
    async with await Client.connect(d.url, alice_key) as c:
        err = check_failure(await c.request("admin.agent.create", {"content": {"name": "x"}}, key=new_key()), "forbidden")
        assert err["next"] == "stop" and "admin" in err["reason"]
    async with await _admin(d) as admin:
        for content in [{}, {"name": ""}, {"name": 7}]:
            err = check_failure(await admin.request("admin.agent.create", {"content": content}, key=new_key()), "bad_request")
            assert "content" in err["reason"], err
        check_failure(await admin.request("admin.agent.create", {"content": {"name": "x"}, "admin": True}, key=new_key()), "bad_request")
        listed = await admin.read("admin.agent.list", {})
        assert [it["agent"] for it in listed["items"]] == [admin.agent, alice]  # nothing was created


# --- admin.agent.list -----------------------------------------------------------------


@pytest.mark.rules("R4-2", "R4-4")
async def test_wire_admin_agent_list_pages_filters_and_shows_last_seen(make_daemon):
    """WIRE.md "Operating a deployment": a page of {agent, status, admin,
    content:{name}, created_at, last_seen_at?}, filtered by status, admin only."""
    d = make_daemon(CLOSED)
    async with await _admin(d) as admin:
        made = []
        for i in range(5):
            made.append((await admin.act("admin.agent.create", {"content": {"name": f"w{i}"}}))["agent"])
        await admin.act("admin.agent.set_status", {"agent": made[1], "status": "deactivated"})
        page = await admin.read("admin.agent.list", {"limit": 2})
        assert len(page["items"]) == 2 and page["cursor"] is not None
        seen, cursor = list(page["items"]), page["cursor"]
        while cursor is not None:
            page = await admin.read("admin.agent.list", {"limit": 2, "cursor": cursor})
            seen += page["items"]
            cursor = page["cursor"]
        assert [it["agent"] for it in seen] == [admin.agent, *made]  # creation order, each once
        first = seen[0]
        assert first["admin"] is True and first["status"] == "active" and first["content"] == {"name": "admin"}
        assert "last_seen_at" in first  # the admin is connected now
        for it, name in zip(seen[1:], [f"w{i}" for i in range(5)]):
            assert it["content"] == {"name": name} and it["admin"] is False
            assert set(it) == {"agent", "status", "admin", "content", "created_at"}  # never seen yet
            assert it["created_at"].endswith("Z")
        assert seen[2]["status"] == "deactivated"
        off = await admin.read("admin.agent.list", {"status": "deactivated"})
        assert [it["agent"] for it in off["items"]] == [made[1]] and off["cursor"] is None
        on = await admin.read("admin.agent.list", {"status": "active"})
        assert made[1] not in [it["agent"] for it in on["items"]] and len(on["items"]) == 5
        check_failure(await admin.request("admin.agent.list", {"cursor": "me_nope"}), "bad_request")
        check_failure(await admin.request("admin.agent.list", {"status": "sleeping"}), "bad_request")
        key = (await admin.act("admin.agent.create", {"content": {"name": "late"}}))["key"]
    url = d.url  # one node for both: read at once (another node shows it about a second later, D175)
    async with await Client.connect(url, key) as late:
        me = (await late.read("agent.whoami"))["agent"]
        err = check_failure(await late.request("admin.agent.list", {}), "forbidden")
        assert err["next"] == "stop"
    async with await Client.connect(url, d.admin_key) as admin:
        items = (await admin.read("admin.agent.list", {"status": "active"}))["items"]
        (row,) = [it for it in items if it["agent"] == me]
        assert row["last_seen_at"] >= row["created_at"]


# --- rotate and reset -------------------------------------------------------------------


@pytest.mark.rules("R4-3", "L3-2", "L3-6")
async def test_wire_agent_rotate_key_old_key_stops_at_once_and_its_connections_close_4001(daemon):
    """WIRE.md "Operating a deployment": the caller's new key; the old key gets
    HTTP 401 on upgrade and unauthenticated on hello; every connection that
    authenticated with it (header or hello, the rotating one too) closes 4001."""
    agent, old = await register(daemon.url, "alice")
    by_header = await Raw.connect(daemon.url, old)
    by_hello = await Raw.connect(daemon.url)
    assert (await by_hello.req("hello", {"key": old}))["ok"] is True
    sub = await by_header.req("subscribe", {})
    assert sub["ok"] is True
    async with await Raw.connect(daemon.url, old) as rotating:
        k = new_key()
        resp = await rotating.req("agent.rotate_key", {}, key=k)
        assert resp["ok"] is True and resp["replayed"] is False, resp
        assert resp["result"]["agent"] == agent and set(resp["result"]) == {"agent", "key"}
        new = resp["result"]["key"]
        assert new.startswith("kf_") and new != old
        assert await rotating.closed_with() == 4001  # after its reply was delivered
    assert await by_header.closed_with() == 4001
    assert await by_hello.closed_with() == 4001
    assert await _refused_upgrade(daemon.url, old) == 401
    err = check_failure(await _hello(daemon.url, old), "unauthenticated")
    assert err["next"] == "stop"
    async with await Raw.connect(daemon.url, new) as c:
        assert (await c.req("agent.whoami"))["result"]["agent"] == agent
        # a replay (same key, from the new key's connection) returns the receipt with the key nulled
        again = await c.req("agent.rotate_key", {}, key=k)
        assert again["ok"] is True and again["replayed"] is True and again["result"] == {"agent": agent, "key": None}
        # … and changes nothing: the connection stays open and the new key still works
        assert (await c.req("agent.whoami"))["ok"] is True
    async with await Client.connect(daemon.url, new) as c:
        assert (await c.read("agent.whoami"))["agent"] == agent


async def _refused_as_old_key(conn: Raw, op: str, args: dict, *, strict: bool = False) -> None:
    """``op`` sent with a key rotated or reset: refused ``unauthenticated`` and
    then closed 4001 — or closed 4001 already. ``strict``: the connection was
    not closed yet, so the refusal is the old-key check's own (D185)."""
    try:
        resp = await conn.req(op, args, key=new_key() if op == "memory.create" else None)
    except ConnectionClosed as e:
        assert not strict, "closed before the request was answered"
        assert e.rcvd is not None and e.rcvd.code == 4001, e.rcvd
        return
    err = check_failure(resp, "unauthenticated")
    if strict:
        assert err["next"] == "stop" and "rotated or reset" in err["reason"], err
    assert await conn.closed_with() == 4001


@pytest.mark.rules("R4-3")
async def test_wire_agent_rotate_key_old_key_refused_on_every_node_once_the_rotation_is_answered(daemon):
    """WIRE.md agent.rotate_key, "the old key stops working at once", D156/D185:
    connections of one agent on one node (A), the rotation sent on another (B,
    in the two-node modes): an action or read sent on A after B's reply is
    refused or closed 4001, whether or not that node has heard of it yet, and
    nothing is written with the old key."""
    agent, old = await register(daemon.url, "alice")
    here, there = daemon.urls[0], daemon.urls[-1]
    acting, reading, subscribing = [await Raw.connect(here, old) for _ in range(3)]
    assert (await acting.req("agent.whoami"))["ok"] is True
    async with await Raw.connect(there, old) as rotating:
        resp = await rotating.req("agent.rotate_key", {}, key=new_key())
        assert resp["ok"] is True, resp
        new = resp["result"]["key"]
        await asyncio.gather(
            _refused_as_old_key(acting, "memory.create", {"content": {"text": "late"}}),
            _refused_as_old_key(reading, "memory.list", {}),
            _refused_as_old_key(subscribing, "subscribe", {"since": 0}),
        )
    async with await Client.connect(here, new) as c:
        assert (await c.read("memory.list", {}))["items"] == []  # nothing by the old key


@pytest.mark.rules("R4-3")
async def test_wire_old_key_refused_with_no_announcement_at_all(make_daemon):
    """D185: with every node deaf to the others (KUNGFUD_TEST_DEAF: no
    announcement, no safety poll), a key reset on one node is refused on the
    other by the check itself — the window is closed, not narrowed — and the
    connection is then closed 4001 there too."""
    d = make_daemon(env={"KUNGFUD_TEST_DEAF": "1"})
    alice, alice_key = await register(d.url, "alice")
    bob, bob_key = await register(d.url, "bob")
    carol, carol_key = await register(d.url, "carol")
    here, there = d.urls[0], d.urls[-1]
    # One agent per connection: a refusal closes all of its agent's connections on the node.
    acting, reading = await Raw.connect(here, alice_key), await Raw.connect(here, bob_key)
    subscribing = await Raw.connect(here, carol_key)
    assert (await reading.req("agent.whoami"))["ok"] is True
    async with await Client.connect(there, d.admin_key) as admin:
        for agent in (alice, bob, carol):
            await admin.act("admin.agent.reset_key", {"agent": agent})
    strict = here != there  # one node: the reset's own node closes them at once
    if strict:
        await asyncio.sleep(1.5)  # past the safety poll (1 s): deaf, so nobody told this node
    await _refused_as_old_key(acting, "memory.create", {"content": {"text": "late"}}, strict=strict)
    await _refused_as_old_key(reading, "agent.whoami", {}, strict=strict)
    await _refused_as_old_key(subscribing, "subscribe", {"since": 0}, strict=strict)


@pytest.mark.rules("R4-1", "R4-2", "L2-4")
async def test_wire_admin_agent_reset_key_follows_set_status_conventions(daemon):
    """WIRE.md "Operating a deployment": admin only (a non-admin gets forbidden
    whether or not the target exists), unknown target not_found; a reset
    closes the target's connections (4001) and leaves the admin's open."""
    alice, alice_key = await register(daemon.url, "alice")
    bob, bob_key = await register(daemon.url, "bob")
    async with await Client.connect(daemon.url, bob_key) as b:
        e1 = check_failure(await b.request("admin.agent.reset_key", {"agent": alice}, key=new_key()), "forbidden")
        e2 = check_failure(await b.request("admin.agent.reset_key", {"agent": fake_id("ag_")}, key=new_key()), "forbidden")
        assert e1 == e2  # nothing about the target is revealed
    alice_conn = await Raw.connect(daemon.url, alice_key)
    async with await _admin(daemon) as admin:
        err = check_failure(await admin.request("admin.agent.reset_key", {"agent": fake_id("ag_")}, key=new_key()), "not_found")
        assert err["next"] == "stop"
        check_failure(await admin.request("admin.agent.reset_key", {"agent": "me_x"}, key=new_key()), "bad_request")
        # D236: not its own key (admin.key would go stale): agent.rotate_key is the way
        own = check_failure(await admin.request("admin.agent.reset_key", {"agent": admin.agent}, key=new_key()), "forbidden")
        assert own["next"] == "revise" and own["hint"]["op"] == "agent.rotate_key"
        assert (await admin.read("agent.whoami"))["agent"] == admin.agent  # its key still works
        res = await admin.act("admin.agent.reset_key", {"agent": alice})
        assert res["agent"] == alice and res["key"].startswith("kf_")
        assert await alice_conn.closed_with() == 4001
        assert await _refused_upgrade(daemon.url, alice_key) == 401
        assert (await admin.read("agent.whoami"))["agent"] == admin.agent  # the admin's connection stays
        # a deactivated agent's key is reset too (its old key could still read, R4-2); it stays deactivated
        await admin.act("admin.agent.set_status", {"agent": bob, "status": "deactivated"})
        reset = await admin.act("admin.agent.reset_key", {"agent": bob})
        check_failure(await _hello(daemon.url, bob_key), "unauthenticated")
    async with await Client.connect(daemon.url, res["key"]) as a:
        assert (await a.read("agent.whoami"))["agent"] == alice
    async with await Client.connect(daemon.url, reset["key"]) as b:
        assert (await b.read("agent.whoami"))["status"] == "deactivated"
        # R4-1: a deactivated agent may not rotate its own key
        check_failure(await b.request("agent.rotate_key", {}, key=new_key()), "forbidden")


@pytest.mark.rules("R4-3")
async def test_wire_key_change_survives_a_restart(daemon):
    """WIRE.md "Operating a deployment": only the new key authenticates, also
    after the daemon restarts (the key index is derived from the facts)."""
    agent, old = await register(daemon.url, "alice")
    async with await Client.connect(daemon.url, old) as c:
        new = (await c.act("agent.rotate_key", {}))["key"]
    daemon.restart()
    assert await _refused_upgrade(daemon.url, old) == 401
    async with await Client.connect(daemon.url, new) as c:
        assert (await c.read("agent.whoami"))["agent"] == agent
    check = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kungfud", "check", *daemon.store_args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await check.communicate()
    assert check.returncode == 0 and b"OK" in out, out
