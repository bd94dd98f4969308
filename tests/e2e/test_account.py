"""§4 Agent and WIRE.md "Account": registration, authentication, and account
state set by an admin (R4-1, R4-2, R4-4, L2-7)."""

from __future__ import annotations

import asyncio
import json
import urllib.request

import pytest

from kungfud.client import Client, new_key
from tests.e2e.helpers import Raw, agent_client, call, check_failure, fake_id, register, rejected


@pytest.fixture
def daemon(shared_daemon):
    """One daemon for the module (tests/conftest.py ``shared_daemon``): each test
    registers agents of its own and reads only what they wrote."""
    return shared_daemon


async def _admin(daemon) -> Client:
    c = await Client.connect(daemon.url, daemon.admin_key)
    c.agent = (await c.read("agent.whoami"))["agent"]
    return c


# --- registration and authentication ---------------------------------------------


async def test_wire_agent_register_returns_agent_and_key(daemon):
    async with await Raw.connect(daemon.url) as r:
        resp = await r.req("agent.register", {"content": {"name": "alice"}})
    assert resp["ok"] is True and resp["replayed"] is False, resp
    result = resp["result"]
    assert set(result) == {"agent", "key"}, result
    assert result["agent"].startswith("ag_")
    assert isinstance(result["key"], str) and result["key"]
    # two registrations are two agents with two keys
    agent2, key2 = await register(daemon.url, "alice")
    assert agent2 != result["agent"] and key2 != result["key"]


async def test_wire_registered_key_authenticates_by_header_and_by_hello(daemon):
    agent, key = await register(daemon.url, "alice")
    async with await Client.connect(daemon.url, key) as c:
        me = await c.read("agent.whoami")
        assert me == {"agent": agent, "status": "active", "content": {"name": "alice"}}
    async with await Raw.connect(daemon.url) as r:
        resp = await r.req("hello", {"key": key})
        assert resp["ok"] is True and resp["result"] == {"agent": agent, "status": "active"}, resp
        me = await r.req("agent.whoami")
        assert me["result"]["agent"] == agent, me


async def test_wire_agent_whoami_returns_agent_status_and_name(daemon):
    agent, key = await register(daemon.url, "Zoë the \"tester\"")
    async with await Client.connect(daemon.url, key) as c:
        me = await c.read("agent.whoami")
    assert me["agent"] == agent and me["status"] == "active"
    assert me["content"] == {"name": "Zoë the \"tester\""}
    async with await _admin(daemon) as admin:
        me = await admin.read("agent.whoami")
        assert me["status"] == "active" and me["agent"].startswith("ag_")


async def test_wire_agent_register_requires_a_name(daemon):
    async with await Raw.connect(daemon.url) as r:
        for content in [{}, {"name": ""}, {"name": 7}, {"nick": "x"}]:
            resp = await r.req("agent.register", {"content": content})
            check_failure(resp, "bad_request")


@pytest.mark.rules("L2-3")
async def test_wire_agent_register_content_over_max_content_bytes_is_too_large(make_daemon):
    """WIRE.md "Conventions": a `content` object is at most the configured size;
    agent.register takes `{content:{name}}` like any other content."""
    d = make_daemon("[limits]\nmax_content_bytes = 64\n")
    async with await Raw.connect(d.url) as r:
        ok = await r.req("agent.register", {"content": {"name": "small"}})
        assert ok["ok"] is True, ok
        resp = await r.req("agent.register", {"content": {"name": "big", "bio": "y" * 500}})
        check_failure(resp, "too_large")


async def test_wire_closed_registration_is_forbidden(make_daemon):
    d = make_daemon("[server]\nopen_registration = false\n")
    async with await Raw.connect(d.url) as r:
        resp = await r.req("agent.register", {"content": {"name": "mallory"}}, key="reg-1")
        check_failure(resp, "forbidden")
        # a rejection writes no receipt: the same key is decided again, and again refused
        resp = await r.req("agent.register", {"content": {"name": "mallory"}}, key="reg-1")
        check_failure(resp, "forbidden")
    # the admin still works
    async with await Client.connect(d.url, d.admin_key) as admin:
        assert (await admin.read("agent.whoami"))["status"] == "active"
        err = await rejected(admin, "agent.register", {"content": {"name": "via-admin-conn"}}, "forbidden")
        assert err["next"] in ("stop", "revise")


# --- account state (admin.agent.set_status) ---------------------------------------


@pytest.mark.rules("R4-1", "R4-2", "R4-4", "R5-1", "R9-8")
async def test_R4_1_deactivated_agent_cannot_act_but_reads_and_keeps_its_facts(daemon):
    alice, alice_id = await agent_client(daemon.url, "alice")
    bob, _ = await agent_client(daemon.url, "bob")
    admin = await _admin(daemon)
    async with alice, bob, admin:
        private = await alice.act("memory.create", {"content": {"secret": 1}})
        public = await alice.act("memory.create", {"content": {"open": 1}})
        await alice.act("memory.update", {"memory": public["memory"], "content": {"open": 2}})
        await alice.act("memory.publish", {"memory": public["memory"]})

        res = await admin.act("admin.agent.set_status", {"agent": alice_id, "status": "deactivated"})
        assert res["agent"] == alice_id and res["status"] == "deactivated"
        assert isinstance(res["seq"], int) and not isinstance(res["seq"], bool) and res["seq"] > 0
        assert isinstance(res["ended"], list)

        # R4-1: every action is rejected, with no effect (L2-3)
        for op, args in [
            ("memory.create", {"content": {"x": 1}}),
            ("memory.update", {"memory": private["memory"], "content": {"x": 2}}),
            ("memory.publish", {"memory": private["memory"]}),
            ("memory.unpublish", {"memory": public["memory"]}),
            ("memory.withdraw", {"memory": public["memory"]}),
            ("admin.agent.set_status", {"agent": alice_id, "status": "active"}),
        ]:
            await rejected(alice, op, args, "forbidden")

        # R4-2: reads still work; R4-4: its Memories are all still there, unchanged
        me = await alice.read("agent.whoami")
        assert me["status"] == "deactivated" and me["agent"] == alice_id
        got = await alice.read("memory.get", {"memory": private["memory"]})
        assert got["content"] == {"secret": 1} and got["visibility"] == "private" and got["latest"] == 1
        got = await alice.read("memory.get", {"memory": public["memory"], "version": 1})
        assert got["content"] == {"open": 1}
        got = await alice.read("memory.get", {"memory": public["memory"]})
        assert got["version"] == 2 and got["status"] == "valid" and got["visibility"] == "public"
        listed = await alice.read("memory.list", {})
        assert sorted(m["memory"] for m in listed["items"]) == sorted([private["memory"], public["memory"]])
        # others still read what §9 lets them: its public Memory
        got = await bob.read("memory.get", {"memory": public["memory"]})
        assert got["content"] == {"open": 2} and got["author"] == alice_id

    # a new connection of the deactivated agent authenticates (header and hello) and reads
    async with await Client.connect(daemon.url, alice.key) as again:
        assert (await again.read("agent.whoami"))["status"] == "deactivated"
    async with await Client.connect(daemon.url, alice.key, auth="hello") as again:
        assert again.agent == alice_id


@pytest.mark.rules("R4-1", "R4-4")
async def test_R4_reactivation_lets_the_agent_act_again_with_its_facts_intact(daemon):
    alice, alice_id = await agent_client(daemon.url, "alice")
    admin = await _admin(daemon)
    async with alice, admin:
        mem = await alice.act("memory.create", {"content": {"v": 1}})
        d = await admin.act("admin.agent.set_status", {"agent": alice_id, "status": "deactivated"})
        await rejected(alice, "memory.update", {"memory": mem["memory"], "content": {"v": 2}}, "forbidden")
        a = await admin.act("admin.agent.set_status", {"agent": alice_id, "status": "active"})
        assert a["agent"] == alice_id and a["status"] == "active" and isinstance(a["ended"], list)
        assert a["seq"] > d["seq"]
        assert (await alice.read("agent.whoami"))["status"] == "active"
        up = await alice.act("memory.update", {"memory": mem["memory"], "content": {"v": 2}})
        assert up["version"] == 2  # the rejected update left no version behind
        assert (await alice.read("memory.get", {"memory": mem["memory"], "version": 1}))["content"] == {"v": 1}


@pytest.mark.rules("L2-7")
async def test_L2_7_setting_the_status_an_agent_already_has_is_conflict(daemon):
    alice_id, _ = await register(daemon.url, "alice")
    async with await _admin(daemon) as admin:
        await rejected(admin, "admin.agent.set_status", {"agent": alice_id, "status": "active"}, "conflict")
        await admin.act("admin.agent.set_status", {"agent": alice_id, "status": "deactivated"})
        await rejected(admin, "admin.agent.set_status", {"agent": alice_id, "status": "deactivated"}, "conflict")
        await admin.act("admin.agent.set_status", {"agent": alice_id, "status": "active"})
        await rejected(admin, "admin.agent.set_status", {"agent": alice_id, "status": "active"}, "conflict")


@pytest.mark.rules("R4-3")
async def test_R4_3_non_admin_setting_status_is_forbidden_and_changes_nothing(daemon):
    alice, alice_id = await agent_client(daemon.url, "alice")
    bob, bob_id = await agent_client(daemon.url, "bob")
    async with alice, bob:
        await rejected(bob, "admin.agent.set_status", {"agent": alice_id, "status": "deactivated"}, "forbidden")
        await rejected(bob, "admin.agent.set_status", {"agent": bob_id, "status": "deactivated"}, "forbidden")
        assert (await alice.read("agent.whoami"))["status"] == "active"
        await alice.act("memory.create", {"content": {"still": "active"}})


async def test_wire_set_status_of_unknown_agent_is_not_found(daemon):
    ghost = fake_id("ag_")
    async with await _admin(daemon) as admin:
        err = await rejected(admin, "admin.agent.set_status", {"agent": ghost, "status": "deactivated"}, "not_found")
        assert ghost in err["reason"]
        await rejected(admin, "admin.agent.set_status", {"agent": ghost, "status": "active"}, "not_found")


@pytest.mark.rules("L3-2")
async def test_L3_2_set_status_replay_returns_the_original_seq(daemon):
    alice_id, _ = await register(daemon.url, "alice")
    async with await _admin(daemon) as admin:
        key = new_key()
        args = {"agent": alice_id, "status": "deactivated"}
        first = await call(admin, "admin.agent.set_status", args, key=key)
        await admin.act("admin.agent.set_status", {"agent": alice_id, "status": "active"})
        again = await call(admin, "admin.agent.set_status", args, key=key)
        assert first["ok"] and again["ok"] and again["replayed"] is True
        assert again["result"] == first["result"]
        # the replay did not deactivate anyone
        await rejected(admin, "admin.agent.set_status", {"agent": alice_id, "status": "active"}, "conflict")


# --- the registration limit (review M3) ----------------------------------------------------


async def _register_burst(url: str, n: int, source: str = "127.0.0.1", tag: str = "") -> dict[str, int]:
    """``n`` registrations pipelined on one new connection from ``source``:
    counts of the outcomes (``ok`` or the rejection code); every
    ``rate_limited`` must say ``next: wait``."""
    async with await Raw.connect(url, local_addr=(source, 0)) as raw:
        frames = [
            {"id": i, "op": "agent.register", "key": f"reg-{tag}-{source}-{i}-{new_key()}", "args": {"content": {"name": f"r{i}"}}}
            for i in range(n)
        ]
        for f in frames:
            await raw.send(f)
        out: dict[str, int] = {}
        for f in frames:
            r = json.loads(await raw.reply_text(f["id"], 30))
            code = "ok" if r["ok"] else check_failure(r)["code"]
            if code == "rate_limited":
                assert r["error"]["next"] == "wait", r
            out[code] = out.get(code, 0) + 1
        return out


@pytest.mark.rules("L4-5", "R12-11", "L4-6")
async def test_L4_5_registrations_from_one_address_share_one_budget_whatever_the_connections(make_daemon):
    """Review M3. With ``actions_per_minute = 10``, four connections from
    127.0.0.1 held open together each pipeline 6 registrations: together at
    most 10 agents are made (the budget is the address's, not the
    connection's); a later fresh connection from the same address is refused
    too; a connection from another address (127.0.0.2) has its own budget."""
    d = make_daemon("[limits]\nactions_per_minute = 10\n", name="reglimit")
    url = d.url  # budgets are per node (D143): every connection to one node
    bursts = await asyncio.gather(*(_register_burst(url, 6, tag=f"c{i}") for i in range(4)))
    ok = sum(b.get("ok", 0) for b in bursts)
    limited = sum(b.get("rate_limited", 0) for b in bursts)
    assert ok == 10 and limited == 14, bursts
    assert await _register_burst(url, 2, tag="late") == {"rate_limited": 2}
    assert await _register_burst(url, 3, source="127.0.0.2") == {"ok": 3}


@pytest.mark.rules("L4-5", "R12-11", "L4-6")
async def test_L4_5_the_daemon_wide_registration_budget_holds_across_addresses(make_daemon):
    """Review M3. ``registrations_per_minute = 6`` bounds agent.register by
    everyone together: three addresses with room of their own make 6 agents
    in all; the others wait, and no agent was made for them."""
    d = make_daemon("[limits]\nactions_per_minute = 100\nregistrations_per_minute = 6\n", name="regall")
    url = d.url  # budgets are per node (D143): every connection to one node
    bursts = await asyncio.gather(*(_register_burst(url, 4, source=f"127.0.0.{i}") for i in (1, 2, 3)))
    ok = sum(b.get("ok", 0) for b in bursts)
    assert ok == 6 and sum(b.get("rate_limited", 0) for b in bursts) == 6, bursts
    assert _registered(url) == 6  # a refused registration made no agent (L4-6)


def _registered(url: str) -> int:
    """``kungfud_actions_total{op="agent.register"}`` from GET /metrics."""
    base = url.replace("ws://", "http://").rsplit("/", 1)[0]
    with urllib.request.urlopen(base + "/metrics", timeout=10) as r:  # noqa: S310 (loopback only)
        for line in r.read().decode().splitlines():
            if line.startswith('kungfud_actions_total{op="agent.register"} '):
                return int(line.split()[1])
    return 0
