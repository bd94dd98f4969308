"""``kungfud mcp --http`` end to end (WIRE.md "MCP over HTTP"): the MCP SDK's own
Streamable HTTP client drives one ``python -m kungfud mcp --http`` subprocess
against a real daemon, for several agents at once, each HTTP request acting as the
agent whose key it sends (``Authorization: Bearer``). Covers the keyless catalogue
(only ``agent_register``), HTTP 401 for a refused key, and a whole exchange and
assignment between two agents over one server (§6.3, §6.4, §8)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import AsyncIterator

import pytest

pytest.importorskip("mcp")

import httpx2  # noqa: E402  (comes with the mcp SDK 2.x)
from mcp import ClientSession  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

from kungfud.mcp import EXCLUDED_OPS  # noqa: E402
from kungfud.wire import OPS  # noqa: E402
from tests.e2e.helpers import CODES, NEXT_STEPS, register  # noqa: E402
from tests.e2e.test_mcp import Bridge, ok, rejected, result  # noqa: E402


@pytest.fixture
def daemon(shared_daemon):
    """One daemon for the module (tests/conftest.py ``shared_daemon``): each test
    registers agents of its own and reads only what they wrote."""
    return shared_daemon


ROOT = Path(__file__).resolve().parents[2]


@asynccontextmanager
async def mcp_http(daemon_url: str) -> AsyncIterator[str]:
    """A ``kungfud mcp --http`` process on a free port; yields its ``/mcp`` URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "kungfud", "mcp", "--http", "--url", daemon_url, "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, text=True,
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.to_thread(proc.stdout.readline)
        assert line.startswith("kungfud mcp listening on http://127.0.0.1:"), (line, proc.stderr and proc.stderr.read())
        url = line.split()[-1]
        assert url.endswith("/mcp")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        for f in (proc.stdout, proc.stderr):
            if f is not None:
                f.close()


@asynccontextmanager
async def session(url: str, key: str | None = None) -> AsyncIterator[Bridge]:
    """An MCP session over Streamable HTTP with the SDK's client, as one agent."""
    headers = {"Authorization": f"Bearer {key}"} if key is not None else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as s,
    ):
        init = await s.initialize()
        b = Bridge(s, init.instructions)
        await b.list_tools()
        yield b


@pytest.mark.rules("L2-4", "R8-22", "R8-24", "R6.3-7", "R6.4-1", "R6.4-3", "R8-1", "R8-17")
async def test_R8_22_two_agents_at_once_over_one_http_server_exchange_and_assign(daemon):
    """Without a key only agent_register is listed; two agents registered there
    then work at the same time through the same server, each request acting as
    the key it sends: an ask, a reply that ends the exchange (``ask: []``, both
    turns empty), and an assignment taken, delivered and adopted, whose outcome
    the worker then reads."""
    async with mcp_http(daemon.url) as url:
        async with session(url) as anon:
            assert set(anon.tools) == {"agent_register"}
            assert "Authorization: Bearer" in (anon.instructions or "")
            err = rejected(await anon.call("turn", {}, check_schema=False), "unauthenticated")
            assert err["hint"]["tool"] == "agent_register" and "Bearer" in err["reason"]
            alice = result(await anon.call("agent_register", {"content": {"name": "alice"}}))
            bob = result(await anon.call("agent_register", {"content": {"name": "bob"}}))
            # no key: the anonymous session stays anonymous (HTTP takes the key from each request)
            assert set(await anon.list_tools()) == {"agent_register"}

        async with session(url, alice["key"]) as a, session(url, bob["key"]) as b:
            assert len(a.tools) == len(b.tools) == len(OPS) - len(EXCLUDED_OPS)
            who = await asyncio.gather(*(a.call("agent_whoami", {}) for _ in range(3)), *(b.call("agent_whoami", {}) for _ in range(3)))
            assert [result(w)["agent"] for w in who] == [alice["agent"]] * 3 + [bob["agent"]] * 3

            t = result(await a.call("thread_create", {"content": {"title": "review"}}))["thread"]
            grant = result(await a.call("thread_admit", {"thread": t}))
            result(await b.call("thread_join", {"token": grant["token"]}))
            ask = result(await a.call("thread_post", {"thread": t, "content": {"text": "ready?"}, "ask": [bob["agent"]]}))
            (item,) = result(await b.call("turn", {}))["items"]
            assert item["obligation"] == "respond" and item["ref"] == {"thread": t, "entry": ask["entry"]}
            # the reply ends the exchange: nobody is asked to answer it
            reply = result(await b.call("thread_post", {
                "thread": t, "content": {"text": "yes"}, "reply_to": ask["entry"], "ask": [],
            }))
            assert reply["responders"] == [] and item["obligation_id"] in reply["ended"]
            a_turn, b_turn = await asyncio.gather(a.call("turn", {}), b.call("turn", {}))
            assert result(a_turn)["items"] == [] and result(b_turn)["items"] == []

            # an assignment, taken and delivered by bob, adopted by alice
            key = "assign-1"
            post, replayed = ok(await a.call("thread_post", {
                "thread": t, "content": {"text": "write the summary"},
                "assign": {"to": bob["agent"], "content": {"criteria": "one paragraph", "output": "text"}},
                "idempotency_key": key,
            }))
            assert not replayed
            again, replayed = ok(await a.call("thread_post", {
                "thread": t, "content": {"text": "write the summary"},
                "assign": {"to": bob["agent"], "content": {"criteria": "one paragraph", "output": "text"}},
                "idempotency_key": key,
            }))
            assert replayed and again == post  # a retry over HTTP is done once
            asg = post["assignment"]
            result(await b.call("assignment_take", {"assignment": asg}))
            result(await b.call("assignment_deliver", {"assignment": asg, "content": {"text": "Done."}}))
            (judge,) = result(await a.call("turn", {}))["items"]
            assert judge["obligation"] == "judge"
            result(await a.call("assignment_judge", {"assignment": asg, "verdict": "adopt"}))
            state = result(await b.call("assignment_get", {"assignment": asg}))
            assert state["state"] == "adopted"
            assert state["instruction"]["content"] == {"text": "write the summary"}  # what was asked
            a_turn, b_turn = await asyncio.gather(a.call("turn", {}), b.call("turn", {}))
            assert result(a_turn)["items"] == [] and result(b_turn)["items"] == []
            # the worker learns how its work ended; the judge, who ended it, reads it as by itself
            (outcome,) = result(await b.call("outcomes", {}))["items"]
            assert outcome["ref"] == {"thread": t, "assignment": asg}
            assert outcome["state"] == "adopted" and outcome["by"] == alice["agent"]


@pytest.mark.rules("L2-4")
async def test_L2_4_a_refused_key_is_http_401_with_an_error_object(daemon):
    """A key the daemon refuses, or an Authorization header that is not
    ``Bearer <key>``, is HTTP 401 with ``WWW-Authenticate: Bearer`` and a WIRE.md
    error object, before any MCP message is handled; the SDK client fails too."""
    init = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    accept = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    async with mcp_http(daemon.url) as url:
        async with httpx2.AsyncClient(timeout=30) as http:
            for auth in ("Bearer kf_not_a_key", "Basic a2V5OnZhbHVl", "Bearer"):
                r = await http.post(url, headers={**accept, "Authorization": auth}, content=json.dumps(init))
                assert r.status_code == 401, (auth, r.status_code, r.text)
                assert r.headers["www-authenticate"].startswith("Bearer")
                error = r.json()["error"]
                assert error["code"] == "unauthenticated" and error["code"] in CODES and error["next"] in NEXT_STEPS
                assert error["reason"].strip()
            # two Authorization headers: which would count? 400, whatever they hold (security review 4, item 6)
            two = [*accept.items(), ("Authorization", "Bearer kf_a"), ("Authorization", "Bearer kf_b")]
            r = await http.post(url, headers=two, content=json.dumps(init))
            assert r.status_code == 400 and r.json()["error"]["code"] == "bad_request", r.text
        with pytest.raises(BaseException) as failed:
            async with session(url, "kf_not_a_key"):
                pass

        def leaves(e: BaseException) -> list[BaseException]:
            return [x for sub in e.exceptions for x in leaves(sub)] if isinstance(e, BaseExceptionGroup) else [e]

        assert any(isinstance(e, MCPError) for e in leaves(failed.value)), failed.value


@pytest.mark.rules("L2-4", "R4-3")
async def test_L2_4_after_a_key_rotation_on_the_wire_the_next_http_request_with_the_old_key_is_401(daemon):
    """D237 (the third review's "MCP after a rotation on the wire", 1 in 3
    trials a 200 with a tool error): the agent rotates its key over its own
    websocket while ``kungfud mcp --http`` holds a daemon connection with the
    old key; the next HTTP request with the old key is 401 every time, even
    before the daemon's 4001 close reaches the bridge."""
    from kungfud.client import Client

    # Two nodes (lmdb2, pg2): the rotation on another node than the bridge's,
    # whose 4001 close comes later still (D156) — the window the review hit.
    url_ws, rotate_at = daemon.urls[0], daemon.urls[-1]
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "agent_whoami", "arguments": {}}}
    accept = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    async with mcp_http(url_ws) as url:
        for trial in range(10):
            _, key = await register(url_ws, f"alice{trial}")
            async with session(url, key) as s:  # the bridge's connection with this key is open
                result(await s.call("agent_whoami", {}))
            async with httpx2.AsyncClient(timeout=30) as http, await Client.connect(rotate_at, key) as c:
                await c.act("agent.rotate_key", {})
                # at once: before the rotation's 4001 close can reach the bridge
                r = await http.post(url, headers={**accept, "Authorization": f"Bearer {key}"}, content=json.dumps(call))
                assert r.status_code == 401, (trial, r.status_code, r.text)


@pytest.mark.rules("L2-4", "R0-1")
async def test_L2_4_after_a_key_rotation_over_http_the_old_key_is_401_at_once(daemon):
    """``agent_rotate_key`` over HTTP: the next request with the old key is HTTP
    401 (the server does not keep serving it from an open daemon connection), and
    the new key acts as the same agent."""
    _, key = await register(daemon.url, "alice")
    init = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    accept = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    async with mcp_http(daemon.url) as url:
        async with session(url, key) as s:
            me = result(await s.call("agent_whoami", {}))["agent"]
            rotated = result(await s.call("agent_rotate_key", {}))
            assert rotated["agent"] == me
        async with httpx2.AsyncClient(timeout=30) as http:
            r = await http.post(url, headers={**accept, "Authorization": f"Bearer {key}"}, content=json.dumps(init))
            assert r.status_code == 401, r.text
        async with session(url, rotated["key"]) as s:
            assert result(await s.call("agent_whoami", {}))["agent"] == me
