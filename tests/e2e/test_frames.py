"""WIRE.md "Transport" and "Frames": what a client may send, and what comes back
when it sends something else. Driven through raw websockets so every byte of
the frame is the test's choice."""

from __future__ import annotations

import asyncio
import json

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from kungfud.client import Client, new_key
from tests.e2e.helpers import Raw, agent_client, call, check_failure, fake_id, register


@pytest.fixture
def daemon(shared_daemon):
    """One daemon for the module (tests/conftest.py ``shared_daemon``): each test
    registers agents of its own and reads only what they wrote; the tests whose
    daemon needs a config of its own start it with ``make_daemon``."""
    return shared_daemon


async def _still_serves(url: str) -> None:
    """The daemon answers a fresh connection (nothing a client sent broke it)."""
    async with await Raw.connect(url) as r:
        resp = await r.req("agent.register", {"content": {"name": "probe"}})
        assert resp["ok"] is True, resp


# --- Transport: invalid text frames keep the connection ---------------------


async def test_wire_non_json_text_frame_is_bad_request_with_null_id_and_connection_stays(daemon):
    _, key = await register(daemon.url)
    async with await Raw.connect(daemon.url, key) as r:
        for junk in ["this is not json", "{", '{"id": 1, "op": ', "", "[1, 2]", '"hello"', "null", "42"]:
            await r.send(junk)
            resp = await r.recv()
            check_failure(resp, "bad_request", req_id=None)
        # the same connection still works
        resp = await r.req("agent.whoami")
        assert resp["ok"] is True and resp["result"]["status"] == "active", resp


async def test_wire_extra_top_level_field_is_bad_request(daemon):
    _, key = await register(daemon.url)
    async with await Raw.connect(daemon.url, key) as r:
        resp = await r.call({"id": "x1", "op": "agent.whoami", "args": {}, "extra": True})
        check_failure(resp, "bad_request", req_id="x1")
        # An action with an extra field is refused before it can have any effect.
        resp = await r.call(
            {"id": "x2", "op": "memory.create", "key": new_key(), "args": {"content": {"a": 1}}, "extras": {}}  # (`meta` is a field since WIRE.md 1.3)
        )
        check_failure(resp, "bad_request", req_id="x2")
        listed = await r.req("memory.list")
        assert listed["result"]["items"] == [], listed


async def test_wire_unknown_op_is_bad_request_naming_it(daemon):
    _, key = await register(daemon.url)
    async with await Raw.connect(daemon.url, key) as r:
        resp = await r.call({"id": 1, "op": "memory.destroy", "args": {}})
        err = check_failure(resp, "bad_request", req_id=1)
        assert "memory.destroy" in err["reason"], err
        resp = await r.call({"id": 2, "op": "memory.destroy", "key": "k", "args": {}})
        err = check_failure(resp, "bad_request", req_id=2)
        assert "memory.destroy" in err["reason"], err


async def test_wire_unknown_field_in_args_is_bad_request_naming_it(daemon):
    _, key = await register(daemon.url)
    async with await Raw.connect(daemon.url, key) as r:
        resp = await r.req("memory.create", {"content": {"a": 1}, "visibilty": "public"})
        err = check_failure(resp, "bad_request")
        assert "visibilty" in err["reason"], err
        resp = await r.req("memory.list", {"authr": fake_id("ag_")})
        err = check_failure(resp, "bad_request")
        assert "authr" in err["reason"], err
        resp = await r.req("agent.whoami", {"verbose": True})
        err = check_failure(resp, "bad_request")
        assert "verbose" in err["reason"], err
        # the typo had no effect
        listed = await r.req("memory.list")
        assert listed["result"]["items"] == [], listed


@pytest.mark.parametrize(
    "op, args, field",
    [
        ("memory.get", {"memory": 5}, "memory"),
        ("memory.get", {"memory": "me_x", "version": "2"}, "version"),
        ("memory.list", {"limit": "10"}, "limit"),
        ("memory.list", {"limit": 0}, "limit"),
        ("memory.list", {"limit": 101}, "limit"),
        ("memory.create", {"content": "plain text"}, "content"),
        ("memory.create", {"content": ["a"]}, "content"),
        ("memory.update", {"memory": "me_x", "content": 1}, "content"),
        ("admin.agent.set_status", {"agent": "ag_x", "status": "sleeping"}, "status"),
        ("hello", {"key": 17}, "key"),
    ],
)
async def test_wire_wrongly_typed_value_is_bad_request_naming_the_field(daemon, op, args, field):
    _, key = await register(daemon.url)
    async with await Raw.connect(daemon.url, key) as r:
        resp = await r.req(op, args)
        err = check_failure(resp, "bad_request")
        assert field in err["reason"], err


async def test_wire_wrongly_typed_envelope_fields_are_bad_request_naming_them(daemon):
    _, key = await register(daemon.url)
    async with await Raw.connect(daemon.url, key) as r:
        for i, (frame, field) in enumerate(
            [
                ({"op": "agent.whoami", "args": []}, "args"),
                ({"op": "agent.whoami", "args": "{}"}, "args"),
                ({"op": "agent.whoami", "args": None}, "args"),
                ({"op": 5, "args": {}}, "op"),
                ({"op": "memory.create", "key": 12345, "args": {"content": {}}}, "key"),
            ]
        ):
            resp = await r.call({"id": i, **frame})
            err = check_failure(resp, "bad_request", req_id=i)
            assert field in err["reason"], err
        assert (await r.req("memory.list"))["result"]["items"] == []


async def test_wire_action_without_key_is_bad_request(daemon):
    _, key = await register(daemon.url)
    async with await Raw.connect(daemon.url, key) as r:
        resp = await r.call({"id": 1, "op": "memory.create", "args": {"content": {"a": 1}}})
        err = check_failure(resp, "bad_request", req_id=1)
        assert "key" in err["reason"], err
        resp = await r.call({"id": 2, "op": "memory.create", "key": None, "args": {"content": {"a": 1}}})
        check_failure(resp, "bad_request", req_id=2)
        listed = await r.req("memory.list")
        assert listed["result"]["items"] == [], listed


async def test_wire_read_with_key_is_bad_request(daemon):
    _, key = await register(daemon.url)
    async with await Raw.connect(daemon.url, key) as r:
        for i, op in enumerate(["agent.whoami", "memory.list"]):
            resp = await r.call({"id": i, "op": op, "key": "k-1", "args": {}})
            err = check_failure(resp, "bad_request", req_id=i)
            assert "key" in err["reason"], err
        resp = await r.call({"id": 9, "op": "hello", "key": "k-2", "args": {"key": key}})
        check_failure(resp, "bad_request", req_id=9)


async def test_wire_read_frame_carrying_a_null_key_field_is_bad_request(daemon):
    """WIRE.md: a request has exactly id, op, args and, for actions only, key."""
    _, key = await register(daemon.url)
    async with await Raw.connect(daemon.url, key) as r:
        resp = await r.call({"id": 1, "op": "agent.whoami", "key": None, "args": {}})
        check_failure(resp, "bad_request", req_id=1)


@pytest.mark.parametrize(
    "bad_key",
    ["k" * 129, "", "tab\there", "new\nline", "nul\x00", "del\x7f", "caf\u00e9", "\u2603"],
    ids=["129-chars", "empty", "tab", "newline", "nul", "del", "non-ascii", "snowman"],
)
async def test_wire_idempotency_key_must_be_1_to_128_printable_ascii(daemon, bad_key):
    _, key = await register(daemon.url)
    async with await Raw.connect(daemon.url, key) as r:
        resp = await r.call({"id": 7, "op": "memory.create", "key": bad_key, "args": {"content": {"a": 1}}})
        check_failure(resp, "bad_request", req_id=7)
        listed = await r.req("memory.list")
        assert listed["result"]["items"] == [], listed


async def test_wire_idempotency_key_boundaries_128_chars_and_space_are_accepted(daemon):
    _, key = await register(daemon.url)
    async with await Raw.connect(daemon.url, key) as r:
        for k in ["k" * 128, "a", " ~!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}"]:
            resp = await r.req("memory.create", {"content": {"k": k}}, key=k)
            assert resp["ok"] is True, resp


async def test_wire_id_longer_than_64_chars_is_bad_request_with_null_id(daemon):
    _, key = await register(daemon.url)
    async with await Raw.connect(daemon.url, key) as r:
        resp = await r.call({"id": "i" * 64, "op": "agent.whoami", "args": {}})
        assert resp["ok"] is True and resp["id"] == "i" * 64, resp
        await r.send({"id": "i" * 65, "op": "agent.whoami", "args": {}})
        check_failure(await r.recv(), "bad_request", req_id=None)
        # other unreadable ids: bool, float, object, missing
        for bad in [True, 1.5, {"n": 1}, [1]]:
            await r.send({"id": bad, "op": "agent.whoami", "args": {}})
            check_failure(await r.recv(), "bad_request", req_id=None)
        await r.send({"op": "agent.whoami", "args": {}})
        check_failure(await r.recv(), "bad_request", req_id=None)
        resp = await r.req("agent.whoami")
        assert resp["ok"] is True, resp


async def test_wire_ids_are_echoed_with_their_type(daemon):
    _, key = await register(daemon.url)
    async with await Raw.connect(daemon.url, key) as r:
        for rid in [0, -5, 2**62, "0", "c-17", ""]:
            resp = await r.call({"id": rid, "op": "agent.whoami", "args": {}})
            assert resp["ok"] is True and resp["id"] == rid and type(resp["id"]) is type(rid), resp


async def test_wire_binary_frame_closes_1003(daemon):
    _, key = await register(daemon.url)
    async with await Raw.connect(daemon.url, key) as r:
        await r.send(json.dumps({"id": 1, "op": "agent.whoami", "args": {}}).encode())
        assert await r.closed_with() == 1003
    await _still_serves(daemon.url)


async def test_wire_frame_over_max_frame_bytes_closes_1009(make_daemon):
    d = make_daemon("[server]\nmax_frame_bytes = 4096\n")
    _, key = await register(d.url)
    async with await Raw.connect(d.url, key) as r:
        # a frame just under the limit is served
        filler = "x" * (4096 - 200)
        resp = await r.req("memory.create", {"content": {"f": filler}})
        assert resp["ok"] is True, resp
        await r.send(json.dumps({"id": 2, "op": "memory.create", "key": "big", "args": {"content": {"f": "x" * 5000}}}))
        assert await r.closed_with() == 1009
    async with await Client.connect(d.url, key) as c:
        listed = await c.read("memory.list", {})
        assert len(listed["items"]) == 1, listed  # the oversized frame wrote nothing
    await _still_serves(d.url)


async def test_wire_deeply_nested_json_is_bad_request_and_daemon_still_serves(daemon):
    _, key = await register(daemon.url)
    deep = "[" * 100_000 + "]" * 100_000
    async with await Raw.connect(daemon.url, key) as r:
        frames = [
            deep,
            '{"id": 1, "op": "memory.create", "key": "deep", "args": {"content": {"x": ' + deep + "}}}",
            '{"id": 2, "op": "agent.whoami", "args": ' + deep + "}",
            '{"id": 3, "op": "agent.whoami", "args": {}, "x": ' + deep + "}",
            '{"id": ' + deep + ', "op": "agent.whoami", "args": {}}',
            '{"a":' * 50_000 + "1" + "}" * 50_000,
        ]
        for frame in frames:
            await r.send(frame)
            resp = await r.recv()
            check_failure(resp, "bad_request")
            assert resp["id"] in (None, 1, 2, 3), resp
        resp = await r.req("memory.list")
        assert resp["ok"] is True and resp["result"]["items"] == [], resp
    await _still_serves(daemon.url)


async def test_wire_deeply_nested_args_error_echoes_the_readable_id(daemon):
    """WIRE.md: `"id": null` only when no valid id can be read; here the id is the
    first field of a well-formed JSON object, so the error must carry it."""
    _, key = await register(daemon.url)
    deep = "[" * 100_000 + "]" * 100_000
    async with await Raw.connect(daemon.url, key) as r:
        await r.send('{"id": "deep-1", "op": "memory.create", "key": "deep", "args": {"content": {"x": ' + deep + "}}}")
        check_failure(await r.recv(), "bad_request", req_id="deep-1")


# --- Transport: pipelining and the in-flight limit -------------------------------


async def test_wire_pipelined_requests_are_all_answered_by_id(daemon):
    _, key = await register(daemon.url)
    async with await Raw.connect(daemon.url, key) as r:
        frames = []
        for i in range(30):
            if i % 3 == 0:
                frames.append({"id": f"s{i}", "op": "memory.create", "key": f"k{i}", "args": {"content": {"i": i}}})
            elif i % 3 == 1:
                frames.append({"id": i, "op": "agent.whoami", "args": {}})
            else:
                frames.append({"id": f"s{i}", "op": "memory.get", "args": {"memory": fake_id("me_")}})
        for f in frames:
            await r.send(f)
        replies = {}
        for _ in frames:
            resp = await r.recv()
            replies[json.dumps(resp["id"])] = resp
        assert set(replies) == {json.dumps(f["id"]) for f in frames}
        for f in frames:
            resp = replies[json.dumps(f["id"])]
            if f["op"] == "memory.get":
                check_failure(resp, "not_found", req_id=f["id"])
            else:
                assert resp["ok"] is True, resp
        created = {replies[json.dumps(f["id"])]["result"]["memory"] for f in frames if f["op"] == "memory.create"}
        assert len(created) == 10
        listed = await r.req("memory.list", {"limit": 100})
        assert {m["memory"] for m in listed["result"]["items"]} == created


@pytest.mark.rules("L4-5", "L4-6")
async def test_wire_in_flight_limit_answers_excess_with_rate_limited_wait(make_daemon):
    d = make_daemon("[server]\nmax_in_flight = 2\n")
    _, key = await register(d.url)
    async with await Raw.connect(d.url, key) as r:
        frames = [
            {"id": i, "op": "memory.create", "key": f"burst-{i}", "args": {"content": {"i": i}}} for i in range(50)
        ]
        await asyncio.gather(*(r.send(f) for f in frames))
        replies = [await r.recv() for _ in frames]
        assert sorted(resp["id"] for resp in replies) == list(range(50))
        ok = [resp for resp in replies if resp["ok"]]
        limited = [resp for resp in replies if not resp["ok"]]
        assert len(ok) >= 2, replies
        assert limited, "50 pipelined actions with max_in_flight = 2 were never rate_limited"
        for resp in limited:
            err = check_failure(resp, "rate_limited")
            assert err["next"] == "wait", err
        # L4-6: a rate-limited request wrote nothing; the accepted ones all did.
        listed = await r.req("memory.list", {"limit": 100})
        assert {m["memory"] for m in listed["result"]["items"]} == {resp["result"]["memory"] for resp in ok}
        # the rejection wrote no receipt: the same key now succeeds as a first request
        first_limited = limited[0]["id"]
        resp = await r.req("memory.create", {"content": {"i": first_limited}}, key=f"burst-{first_limited}")
        assert resp["ok"] is True and resp["replayed"] is False, resp


# --- Transport: authentication ------------------------------------------------------


async def test_wire_before_authentication_only_hello_and_register_are_accepted(daemon):
    _, key = await register(daemon.url)
    async with await Raw.connect(daemon.url) as r:
        for op, args in [
            ("agent.whoami", {}),
            ("memory.list", {}),
            ("memory.get", {"memory": fake_id("me_")}),
            ("memory.create", {"content": {"a": 1}}),
            ("admin.agent.set_status", {"agent": fake_id("ag_"), "status": "deactivated"}),
        ]:
            resp = await r.req(op, args)
            check_failure(resp, "unauthenticated")
        resp = await r.req("agent.register", {"content": {"name": "fresh"}})
        assert resp["ok"] is True, resp
        resp = await r.req("hello", {"key": key})
        assert resp["ok"] is True, resp
        resp = await r.req("agent.whoami")
        assert resp["ok"] is True, resp


async def test_wire_authorization_header_with_unknown_key_is_http_401(daemon):
    for header in ["Bearer kf_not-a-key", "Bearer ", "Basic dXNlcjpwYXNz"]:
        with pytest.raises(InvalidStatus) as e:
            async with connect(daemon.url, additional_headers={"Authorization": header}):
                pass
        assert e.value.response.status_code == 401, header


async def test_wire_hello_with_bad_key_is_unauthenticated(daemon):
    _, key = await register(daemon.url)
    async with await Raw.connect(daemon.url) as r:
        for bad in ["kf_nope", key + "x", key[:-1]]:
            resp = await r.req("hello", {"key": bad})
            check_failure(resp, "unauthenticated")
            resp = await r.req("agent.whoami")
            check_failure(resp, "unauthenticated")
        resp = await r.req("hello", {"key": key})
        assert resp["ok"] is True, resp


# --- Failure: the shape of every error ------------------------------------------------


@pytest.mark.rules("L2-4")
async def test_wire_every_error_object_has_exactly_code_reason_next_and_optional_hint(daemon):
    alice, _ = await agent_client(daemon.url, "alice")
    bob, _ = await agent_client(daemon.url, "bob")
    async with alice, bob, await Raw.connect(daemon.url) as anon:
        mem = await alice.act("memory.create", {"content": {"a": 1}})
        await alice.act("memory.publish", {"memory": mem["memory"]})
        errors = []
        # frame-level failures
        for junk in ["nope", "[]", '{"id": 1}', '{"id": 1, "op": "x.y", "args": {}}']:
            await anon.send(junk)
            errors.append(check_failure(await anon.recv())["code"])
        errors.append(check_failure(await anon.req("agent.whoami"), "unauthenticated")["code"])
        errors.append(check_failure(await anon.req("hello", {"key": "kf_x"}), "unauthenticated")["code"])
        # protocol failures through the client library
        key = new_key()
        await alice.act("memory.update", {"memory": mem["memory"], "content": {"a": 2}}, key=key)
        for op, args, who, k, code in [
            ("memory.get", {"memory": fake_id("me_")}, bob, None, "not_found"),
            ("memory.update", {"memory": mem["memory"], "content": {}}, bob, None, "forbidden"),
            ("memory.publish", {"memory": mem["memory"]}, alice, None, "conflict"),
            ("memory.update", {"memory": mem["memory"], "content": {"a": 3}}, alice, key, "idempotency_mismatch"),
            ("memory.create", {"content": {"x": "y" * 300_000}}, alice, None, "too_large"),
            ("admin.agent.set_status", {"agent": alice.agent, "status": "deactivated"}, bob, None, "forbidden"),
            ("memory.list", {"cursor": "garbage!"}, alice, None, "bad_request"),
        ]:
            resp = await call(who, op, args, key=k)
            errors.append(check_failure(resp, code)["code"])
        assert len(errors) == 13
