"""L3 replay on the wire: receipts, secrets, mismatches and scope (L3-1…L3-6,
DECISIONS.md B4, B6). Receipts are compared as the exact JSON text the daemon
sent, read from raw websocket frames."""

from __future__ import annotations

import asyncio
import json

import pytest

from kungfud.client import Client, new_key
from tests.e2e.helpers import Raw, agent_client, call, check_failure, raw_result, register, rejected


@pytest.fixture
def daemon(shared_daemon):
    """One daemon for the module (tests/conftest.py ``shared_daemon``): each test
    registers agents of its own and reads only what they wrote."""
    return shared_daemon


def _frame(op: str, args: dict, key: str, rid: object) -> dict:
    return {"id": rid, "op": op, "key": key, "args": args}


@pytest.mark.rules("L3-2", "L3-5", "R0-2")
async def test_L3_2_replay_returns_the_first_receipt_byte_identical(daemon):
    _, key = await register(daemon.url, "alice")
    async with await Raw.connect(daemon.url, key) as r, await Raw.connect(daemon.url, key) as other:
        k = new_key()
        first = await r.call_text(_frame("memory.create", {"content": {"a": 1}}, k, 1))
        assert json.loads(first)["replayed"] is False
        m = json.loads(first)["result"]["memory"]
        steps = [
            ("memory.update", {"memory": m, "content": {"a": 2}}),
            ("memory.publish", {"memory": m}),
            ("memory.unpublish", {"memory": m}),
            ("memory.withdraw", {"memory": m}),
        ]
        texts = [(("memory.create", {"content": {"a": 1}}), k, first)]
        for op, args in steps:
            kk = new_key()
            texts.append(((op, args), kk, await r.call_text(_frame(op, args, kk, f"first-{op}"))))
        for (op, args), kk, text in texts:
            assert json.loads(text)["ok"] is True, text
            for conn, rid in ((r, f"again-{op}"), (other, 77)):  # same connection, and another one
                again = await conn.call_text(_frame(op, args, kk, rid))
                parsed = json.loads(again)
                assert parsed["ok"] is True and parsed["replayed"] is True and parsed["id"] == rid, again
                assert raw_result(again) == raw_result(text), op
        # one Memory, and the replays changed nothing: still withdrawn, 2 versions
        got = await r.req("memory.get", {"memory": m})
        assert (got["result"]["status"], got["result"]["latest"]) == ("withdrawn", 2)
        assert (await r.req("memory.list"))["result"]["items"] == []


@pytest.mark.rules("L3-6", "L3-2", "B4")
async def test_L3_6_B4_agent_register_replay_returns_key_null_and_all_else_identical(daemon):
    k = new_key()
    args = {"content": {"name": "alice"}}
    async with await Raw.connect(daemon.url) as r1:
        first = await r1.call_text(_frame("agent.register", args, k, 1))
    result = json.loads(first)["result"]
    secret = result["key"]
    assert isinstance(secret, str) and secret and json.loads(first)["replayed"] is False
    # scope (no agent, op, key) across all connections, authenticated or not
    async with await Raw.connect(daemon.url) as r2, await Raw.connect(daemon.url, secret) as r3:
        for conn in (r2, r3):
            again = await conn.call_text(_frame("agent.register", args, k, 2))
            parsed = json.loads(again)
            assert parsed["ok"] is True and parsed["replayed"] is True, again
            assert parsed["result"] == {"agent": result["agent"], "key": None}
            assert raw_result(again) == raw_result(first).replace(json.dumps(secret).encode(), b"null")
            assert secret not in again
    # the key from the first result still authenticates that one agent
    async with await Client.connect(daemon.url, secret) as c:
        assert (await c.read("agent.whoami"))["agent"] == result["agent"]


@pytest.mark.rules("L3-3", "L2-3")
async def test_L3_3_same_key_with_different_args_is_idempotency_mismatch_without_effect(daemon):
    alice, _ = await agent_client(daemon.url, "alice")
    async with alice:
        k = new_key()
        m = (await alice.act("memory.create", {"content": {"a": 1}}, key=k))["memory"]
        err = await rejected(alice, "memory.create", {"content": {"a": 2}}, "idempotency_mismatch", key=k)
        assert err["next"] in ("revise", "stop")
        listed = await alice.read("memory.list", {})
        assert [x["memory"] for x in listed["items"]] == [m]
        assert (await alice.read("memory.get", {"memory": m}))["content"] == {"a": 1}

        k2 = new_key()
        assert (await alice.act("memory.update", {"memory": m, "content": {"b": 1}}, key=k2))["version"] == 2
        await rejected(alice, "memory.update", {"memory": m, "content": {"b": 2}}, "idempotency_mismatch", key=k2)
        other = (await alice.act("memory.create", {"content": {}}))["memory"]
        await rejected(alice, "memory.update", {"memory": other, "content": {"b": 1}}, "idempotency_mismatch", key=k2)
        got = await alice.read("memory.get", {"memory": m})
        assert (got["latest"], got["content"]) == (2, {"b": 1})
        assert (await alice.read("memory.get", {"memory": other}))["latest"] == 1
        # the original request is still a replay after the mismatches
        again = await call(alice, "memory.update", {"memory": m, "content": {"b": 1}}, key=k2)
        assert again["replayed"] is True and again["result"] == {"memory": m, "version": 2}

    async with await Raw.connect(daemon.url) as r:
        k3 = new_key()
        await r.call(_frame("agent.register", {"content": {"name": "x"}}, k3, 1))
        resp = await r.call(_frame("agent.register", {"content": {"name": "y"}}, k3, 2))
        check_failure(resp, "idempotency_mismatch", req_id=2)


@pytest.mark.rules("L3-1")
async def test_L3_1_same_key_for_another_op_or_another_agent_is_a_separate_request(daemon):
    alice, _ = await agent_client(daemon.url, "alice")
    bob, _ = await agent_client(daemon.url, "bob")
    async with alice, bob:
        k = "shared-key-1"
        a = await call(alice, "memory.create", {"content": {"same": True}}, key=k)
        assert a["ok"] and a["replayed"] is False
        m = a["result"]["memory"]
        for op, args in [
            ("memory.update", {"memory": m, "content": {"v": 2}}),
            ("memory.publish", {"memory": m}),
            ("memory.unpublish", {"memory": m}),
            ("memory.withdraw", {"memory": m}),
        ]:
            resp = await call(alice, op, args, key=k)
            assert resp["ok"] is True and resp["replayed"] is False, (op, resp)
        b = await call(bob, "memory.create", {"content": {"same": True}}, key=k)
        assert b["ok"] and b["replayed"] is False and b["result"]["memory"] != m
        assert [x["memory"] for x in (await bob.read("memory.list", {}))["items"]] == [b["result"]["memory"]]
        # agent.register's scope has no agent: the key used by alice does not collide
        async with await Raw.connect(daemon.url) as r:
            resp = await r.call(_frame("agent.register", {"content": {"name": "carol"}}, k, 1))
            assert resp["ok"] is True and resp["replayed"] is False, resp


@pytest.mark.rules("L3-1", "L3-2", "B6")
async def test_B6_args_differing_only_in_key_order_are_the_same_request(daemon):
    _, key = await register(daemon.url, "alice")
    async with await Raw.connect(daemon.url, key) as r:
        m = (await r.req("memory.create", {"content": {"v": 1}}))["result"]["memory"]
        k = new_key()
        content = '{"a": 1, "b": {"c": [1, {"x": 1, "y": 2}], "d": "e"}}'
        reordered = '{"b": {"d": "e", "c": [1, {"y": 2, "x": 1}]}, "a": 1}'
        await r.send(
            '{"id": 1, "op": "memory.update", "key": "%s", "args": {"memory": "%s", "content": %s}}' % (k, m, content)
        )
        first = await r.reply_text(1)
        assert json.loads(first)["replayed"] is False
        variants = [
            '{"args": {"content": %s, "memory": "%s"}, "key": "%s", "op": "memory.update", "id": 2}' % (reordered, m, k),
            '{"id":3,"op":"memory.update","key":"%s","args":{"memory":"%s","content":%s}}'
            % (k, m, reordered.replace(" ", "")),
        ]
        for i, v in enumerate(variants, start=2):
            await r.send(v)
            again = await r.reply_text(i)
            assert json.loads(again)["replayed"] is True, again
            assert raw_result(again) == raw_result(first)
        got = (await r.req("memory.get", {"memory": m}))["result"]
        assert got["latest"] == 2 and got["content"] == json.loads(content)


@pytest.mark.rules("L3-4", "L3-5", "R10.2-3")
async def test_L3_4_receipts_do_not_drift_after_the_object_changes(daemon):
    alice, _ = await agent_client(daemon.url, "alice")
    async with alice:
        kc, ku = new_key(), new_key()
        created = await alice.act("memory.create", {"content": {"v": 1}}, key=kc)
        m = created["memory"]
        updated = await alice.act("memory.update", {"memory": m, "content": {"v": 2}}, key=ku)
        assert updated == {"memory": m, "version": 2}
        for v in (3, 4):
            await alice.act("memory.update", {"memory": m, "content": {"v": v}})
        await alice.act("memory.publish", {"memory": m})
        await alice.act("memory.withdraw", {"memory": m})
        again = await call(alice, "memory.update", {"memory": m, "content": {"v": 2}}, key=ku)
        assert again["replayed"] is True and again["result"] == {"memory": m, "version": 2}
        again = await call(alice, "memory.create", {"content": {"v": 1}}, key=kc)
        assert again["replayed"] is True
        assert again["result"] == {"memory": m, "version": 1, "visibility": "private"}


@pytest.mark.rules("L3-2", "L5-1", "R10.2-4", "R0-2")
async def test_L3_2_L5_1_twenty_concurrent_identical_requests_make_one_memory(daemon):
    _, key = await register(daemon.url, "alice")
    conns = [await Raw.connect(daemon.url, key) for _ in range(4)]
    try:
        k = new_key()
        frames = [
            (conns[i % 4], {"id": f"c{i}", "op": "memory.create", "key": k, "args": {"content": {"once": True}}})
            for i in range(20)
        ]
        await asyncio.gather(*(c.send(f) for c, f in frames))

        async def drain(conn: Raw) -> list[str]:
            return [await conn.reply_text(f["id"]) for c, f in frames if c is conn]

        texts = [t for ts in await asyncio.gather(*(drain(c) for c in conns)) for t in ts]
        replies = [json.loads(t) for t in texts]
        assert all(r["ok"] for r in replies), replies
        assert len({raw_result(t) for t in texts}) == 1
        assert sum(1 for r in replies if r["replayed"] is False) == 1, [r["replayed"] for r in replies]
        m = replies[0]["result"]["memory"]
        listed = (await conns[0].req("memory.list"))["result"]
        assert [x["memory"] for x in listed["items"]] == [m]
    finally:
        for c in conns:
            await c.close()


@pytest.mark.rules("L2-3", "L3-2", "R4-1")
async def test_L2_3_a_rejected_action_writes_no_receipt_and_can_be_retried_with_its_key(daemon):
    alice, alice_id = await agent_client(daemon.url, "alice")
    admin = await Client.connect(daemon.url, daemon.admin_key)
    async with alice, admin:
        m = (await alice.act("memory.create", {"content": {}}))["memory"]
        await alice.act("memory.publish", {"memory": m})
        k = new_key()
        await rejected(alice, "memory.publish", {"memory": m}, "conflict", key=k)
        await rejected(alice, "memory.publish", {"memory": m}, "conflict", key=k)  # decided again, not replayed
        await alice.act("memory.unpublish", {"memory": m})
        resp = await call(alice, "memory.publish", {"memory": m}, key=k)
        assert resp["ok"] is True and resp["replayed"] is False, resp
        assert resp["result"] == {"memory": m, "visibility": "public"}
        # a deactivated agent's rejected create, retried after reactivation
        await admin.act("admin.agent.set_status", {"agent": alice_id, "status": "deactivated"})
        k2 = new_key()
        await rejected(alice, "memory.create", {"content": {"late": 1}}, "forbidden", key=k2)
        await admin.act("admin.agent.set_status", {"agent": alice_id, "status": "active"})
        resp = await call(alice, "memory.create", {"content": {"late": 1}}, key=k2)
        assert resp["ok"] is True and resp["replayed"] is False, resp
        again = await call(alice, "memory.create", {"content": {"late": 1}}, key=k2)
        assert again["replayed"] is True and again["result"] == resp["result"]
        assert len((await alice.read("memory.list", {}))["items"]) == 2


@pytest.mark.rules("L3-6", "L3-2", "B4", "L5-1")
async def test_L3_6_concurrent_registrations_under_one_key_make_one_agent_and_show_the_key_once(daemon):
    conns = [await Raw.connect(daemon.url) for _ in range(4)]
    try:
        k = new_key()
        frames = [
            (conns[i % 4], {"id": i, "op": "agent.register", "key": k, "args": {"content": {"name": "twin"}}})
            for i in range(12)
        ]
        await asyncio.gather(*(c.send(f) for c, f in frames))

        async def drain(conn: Raw) -> list[dict]:
            return [json.loads(await conn.reply_text(f["id"])) for c, f in frames if c is conn]

        replies = [r for rs in await asyncio.gather(*(drain(c) for c in conns)) for r in rs]
        assert all(r["ok"] for r in replies), replies
        assert len({r["result"]["agent"] for r in replies}) == 1
        with_key = [r for r in replies if r["result"]["key"] is not None]
        assert len(with_key) == 1 and with_key[0]["replayed"] is False
        assert all(r["replayed"] is True for r in replies if r is not with_key[0])
    finally:
        for c in conns:
            await c.close()


@pytest.mark.rules("L3-2", "R4-1", "R4-2")
async def test_L3_2_a_deactivated_agent_still_gets_its_earlier_receipts(daemon):
    alice, alice_id = await agent_client(daemon.url, "alice")
    admin = await Client.connect(daemon.url, daemon.admin_key)
    async with alice, admin:
        k = new_key()
        first = await call(alice, "memory.create", {"content": {"a": 1}}, key=k)
        await admin.act("admin.agent.set_status", {"agent": alice_id, "status": "deactivated"})
        again = await call(alice, "memory.create", {"content": {"a": 1}}, key=k)
        assert again["ok"] is True and again["replayed"] is True and again["result"] == first["result"]
        await rejected(alice, "memory.create", {"content": {"a": 1}}, "forbidden")
        assert len((await alice.read("memory.list", {}))["items"]) == 1


@pytest.mark.rules("L4-5", "L4-6", "R12-11")
async def test_L4_5_action_rate_limit_answers_wait_and_exempts_replays_and_reads(make_daemon):
    d = make_daemon("[limits]\nactions_per_minute = 5\n")
    alice, _ = await agent_client(d.url, "alice")
    bob, _ = await agent_client(d.url, "bob")
    async with alice, bob:
        keys = [new_key() for _ in range(5)]
        made = [(await alice.act("memory.create", {"content": {"i": i}}, key=k))["memory"] for i, k in enumerate(keys)]
        err = await rejected(alice, "memory.create", {"content": {"i": 5}}, "rate_limited")
        assert err["next"] == "wait"
        # L4-6: no effect; replays and reads are exempt; other agents are not affected
        assert sorted(x["memory"] for x in (await alice.read("memory.list", {}))["items"]) == sorted(made)
        again = await call(alice, "memory.create", {"content": {"i": 0}}, key=keys[0])
        assert again["ok"] is True and again["replayed"] is True and again["result"]["memory"] == made[0]
        assert (await alice.read("memory.get", {"memory": made[4]}))["content"] == {"i": 4}
        await bob.act("memory.create", {"content": {"bob": 1}})
        # replays below the limit do not use it up either: bob replays his first
        # action many times and still has his remaining four actions
        bob_key = new_key()
        first = await bob.act("memory.create", {"content": {"bob": 2}}, key=bob_key)
        for _ in range(10):
            r = await call(bob, "memory.create", {"content": {"bob": 2}}, key=bob_key)
            assert r["ok"] is True and r["replayed"] is True and r["result"]["memory"] == first["memory"]
        for i in range(3):
            await bob.act("memory.create", {"content": {"bob": 3 + i}})
        await rejected(bob, "memory.create", {"content": {"bob": 9}}, "rate_limited")
