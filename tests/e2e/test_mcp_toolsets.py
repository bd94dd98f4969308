"""``kungfud mcp --tools worker|lead|operator|all`` (issue 26 item 5): a named
subset of the tools, so an agent's every turn carries only the tools of its part
— on stdio and over HTTP, where a request may also choose its set with
``/mcp?tools=NAME``. Driven by the MCP SDK's own clients against a real daemon;
also what a model reads when its arguments are wrong: the tool and its
argument, the accepted shape, never the wire op or a ``$.args`` path (WIRE.md
1.1 "Wording of rejections")."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from contextlib import asynccontextmanager
from typing import AsyncIterator

import pytest

pytest.importorskip("mcp")

from mcp import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

from kungfud.client import Client  # noqa: E402
from kungfud.mcp.schemas import EXCLUDED_OPS  # noqa: E402
from kungfud.wire import OPS  # noqa: E402
from tests.e2e.helpers import register  # noqa: E402
from tests.e2e.test_mcp import ROOT, Bridge, _props, _tool_names_in, rejected, result  # noqa: E402

WORKER = {
    "turn", "opportunities", "outcomes", "thread_entry", "assignment_get", "engagement_get", "task_list",
    "thread_post", "thread_handle", "assignment_take", "task_take", "assignment_deliver", "task_deliver",
    "assignment_drop", "task_drop",
}


@asynccontextmanager
async def stdio(url: str, key: str, *extra: str) -> AsyncIterator[Bridge]:
    args = ["-m", "kungfud", "mcp", "--url", url, "--key", key, *extra]
    params = StdioServerParameters(command=sys.executable, args=args, cwd=str(ROOT), env={"PYTHONPATH": str(ROOT)})
    async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
        init = await s.initialize()
        b = Bridge(s, init.instructions)
        await b.list_tools()
        yield b


@asynccontextmanager
async def http_server(url: str, *extra: str) -> AsyncIterator[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "kungfud", "mcp", "--http", "--url", url, "--listen", "127.0.0.1:0", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, text=True,
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.to_thread(proc.stdout.readline)
        assert line.startswith("kungfud mcp listening on http://127.0.0.1:"), (line, proc.stderr and proc.stderr.read())
        yield line.split()[-1]
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
async def http_session(url: str, key: str) -> AsyncIterator[Bridge]:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as s,
    ):
        init = await s.initialize()
        b = Bridge(s, init.instructions)
        await b.list_tools()
        yield b


def check_worker_set(b: Bridge) -> None:
    """At most 15 tools, the worker's ones, tools/list at most 10,000 characters
    (compact JSON, as the client received it), and no text naming a tool that is
    not offered."""
    assert set(b.tools) == WORKER and len(b.tools) <= 15, set(b.tools) ^ WORKER
    size = len(json.dumps(b.raw_tools, separators=(",", ":"), ensure_ascii=False))
    assert size <= 10_000, size
    offered = set(b.tools)
    texts = [t["description"] for t in b.tools.values()]
    texts += [p.get("description", "") for t in b.tools.values() for _, p in _props(t["inputSchema"])]
    for text in texts:
        assert _tool_names_in(text) <= offered, (text, _tool_names_in(text) - offered)


async def assigned(url: str, worker: str) -> tuple[Client, str, str]:
    """A lead (a websocket client) that assigns work to ``worker`` in a new Thread."""
    lead_id, lead_key = await register(url, "lead")
    lead = await Client.connect(url, lead_key)
    t = (await lead.act("thread.create", {"content": {"title": "t"}}))["thread"]
    token = (await lead.act("thread.admit", {"thread": t}))["token"]
    async with await Client.connect(url, worker) as w:
        await w.act("thread.join", {"token": token})
    asg = (await lead.act("thread.post", {
        "thread": t, "content": {"text": "summarise"}, "ask": [],
        "assign": {"to": (await who(url, worker)), "content": {"criteria": "short"}, "deliver_within_s": 600},
    }))["assignment"]
    return lead, t, asg


async def who(url: str, key: str) -> str:
    async with await Client.connect(url, key) as c:
        return (await c.read("agent.whoami"))["agent"]


@pytest.mark.rules("R0-3", "R8-22", "R6.4-3", "L2-4")
async def test_R0_3_stdio_worker_tools_are_15_under_10000_characters_and_do_the_work(daemon):
    _, key = await register(daemon.url, "worker")
    lead, t, asg = await assigned(daemon.url, key)
    try:
        async with stdio(daemon.url, key, "--tools", "worker") as b:
            check_worker_set(b)
            assert "thread_get" not in (b.instructions or "") and "task_list" in (b.instructions or "")
            assert _tool_names_in(b.instructions or "") <= set(b.tools) | {"agent_register"}  # offered while keyless
            (offer,) = result(await b.call("opportunities", {}))["items"]
            assert offer["ref"]["assignment"] == asg
            result(await b.call("assignment_take", {"assignment": asg}))
            got = result(await b.call("assignment_get", {"assignment": asg}))
            assert got["instruction"]["content"] == {"text": "summarise"}
            result(await b.call("assignment_deliver", {"assignment": asg, "content": {"text": "done"}}))
            await lead.act("assignment.judge", {"assignment": asg, "verdict": "adopt"})
            (outcome,) = result(await b.call("outcomes", {}))["items"]
            assert outcome["state"] == "adopted"
            # a tool outside the set is refused by name, never called
            err = rejected(await b.call("thread_create", {}, check_schema=False), "bad_request")
            assert "`thread_create`" in err["reason"] and "`worker`" in err["reason"], err
    finally:
        await lead.close()


@pytest.mark.rules("R0-3", "L2-4")
async def test_R0_3_http_worker_tools_by_flag_and_per_request_by_query(daemon):
    _, key = await register(daemon.url, "worker")
    async with http_server(daemon.url, "--tools", "worker") as url:
        async with http_session(url, key) as b:
            check_worker_set(b)
    async with http_server(daemon.url) as url:  # --tools all, the default
        async with http_session(url, key) as every, http_session(url + "?tools=worker", key) as worker:
            assert len(every.tools) == len(OPS) - len(EXCLUDED_OPS)  # every op but those that are no tool
            check_worker_set(worker)
            assert "thread_get" in (every.instructions or "") and "thread_get" not in (worker.instructions or "")
            # the same agent, its set chosen by each request
            assert set((await every.list_tools())) > set(await worker.list_tools())
            err = rejected(await worker.call("agent_whoami", {}, check_schema=False), "bad_request")
            assert "`agent_whoami`" in err["reason"] and "`worker`" in err["reason"], err
            assert result(await every.call("agent_whoami", {}))["content"] == {"name": "worker"}
        async with http_session(url + "?tools=operator", key) as op:
            # the instructions of the set the request chose: an operator has no turn loop
            assert "`turn`" not in (op.instructions or "") and "idempotency_key" in (op.instructions or "")
            assert set(op.tools) == {"agent_whoami", "agent_rotate_key", "admin_agent_create", "admin_agent_list",
                                     "admin_agent_set_status", "admin_agent_reset_key"}
        import httpx2

        async with httpx2.AsyncClient(timeout=30) as http:
            r = await http.post(url + "?tools=boss", headers={"Authorization": f"Bearer {key}",
                                "Content-Type": "application/json", "Accept": "application/json, text/event-stream"},
                                content=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}))
            assert r.status_code == 400, r.text
            err = r.json()["error"]
            assert err["code"] == "bad_request" and "worker" in err["reason"] and err["next"] == "revise", err


@pytest.mark.rules("L2-4", "R6.4-26")
async def test_L2_4_mcp_argument_errors_name_the_tool_and_the_accepted_shape(daemon):
    """The first wrong guesses a model makes, answered with what is accepted:
    a reason beside ``content``, ``text`` beside ``content``, a name where an
    agent id belongs, a deadline by another name, an audience as a list."""
    _, key = await register(daemon.url, "worker")
    lead, t, asg = await assigned(daemon.url, key)
    try:
        async with stdio(daemon.url, key, "--tools", "worker") as w:
            result(await w.call("assignment_take", {"assignment": asg}))
            err = rejected(await w.call("assignment_deliver", {"assignment": asg, "text": "done"}, check_schema=False),
                           "bad_request")
            # One of the two is required (issue 37): not "optionally `memory`, `content`".
            assert "exactly one of `memory` or `content`" in err["reason"] and "optionally" not in err["reason"], err
            result(await w.call("assignment_deliver", {"assignment": asg, "content": {"text": "done"}}))
            err = rejected(await w.call("thread_post", {"thread": t, "text": "hi"}, check_schema=False), "bad_request")
            assert '"content": {"text": …}' in err["reason"] and "`thread_post`" in err["reason"], err
            err = rejected(await w.call("thread_post", {"thread": t, "content": {"text": "x"}, "ask": ["lead"]},
                                        check_schema=False), "bad_request")
            assert "`ask[0]` must be an agent id" in err["reason"] and "not a name" in err["reason"], err
            assert _tool_names_in(err["reason"]) <= set(w.tools), err  # a worker is not sent to thread_get
        async with stdio(daemon.url, lead.key) as b:
            err = rejected(await b.call("assignment_judge", {"assignment": asg, "verdict": "reject", "reason": "no"},
                                        check_schema=False), "bad_request")
            assert '"content": {"reason": …}' in err["reason"] and "`assignment_judge`" in err["reason"], err
            err = rejected(await b.call("thread_post", {"thread": t, "content": {"text": "x"}, "ask": ["worker"]},
                                        check_schema=False), "bad_request")
            assert "`agent_whoami`" in err["reason"] and "`thread_get`" in err["reason"], err
            err = rejected(await b.call("thread_post", {
                "thread": t, "content": {"text": "x"}, "assign": {"to": "ag_x", "content": {"criteria": "c"}, "deadline": 60},
            }, check_schema=False), "bad_request")
            assert "`deliver_within_s`" in err["reason"], err
            err = rejected(await b.call("task_create", {
                "audience": ["ag_x"], "contract": {"content": {"output": "o", "criteria": "c"}},
            }, check_schema=False), "bad_request")
            assert '{"agents": [' in err["reason"], err
            assert "$" not in err["reason"] and "task.create" not in err["reason"] and "regex" not in err["reason"]
    finally:
        await lead.close()


@pytest.mark.rules("R0-3", "R7.3-1")
async def test_R0_3_the_worker_set_finds_takes_reads_and_delivers_an_open_task(daemon):
    """Open Tasks are not in `opportunities` but in `task_list`, both in the worker
    set; the contract is read after the take with `engagement_get` (no `task_get`)."""
    _, key = await register(daemon.url, "worker")
    _, lead_key = await register(daemon.url, "lead")
    async with await Client.connect(daemon.url, lead_key) as lead:
        tk = (await lead.act("task.create", {"audience": "open", "contract": {
            "content": {"output": "a haiku", "criteria": "5-7-5"}, "deliver_within_s": 600}}))["task"]
        async with stdio(daemon.url, key, "--tools", "worker") as w:
            assert "task_list" in w.tools["opportunities"]["description"]
            assert result(await w.call("opportunities", {}))["items"] == []
            assert [t["task"] for t in result(await w.call("task_list", {}))["items"]] == [tk]
            en = result(await w.call("task_take", {"task": tk}))["engagement"]
            got = result(await w.call("engagement_get", {"engagement": en}))
            assert got["contract"]["content"] == {"output": "a haiku", "criteria": "5-7-5"}
            result(await w.call("task_deliver", {"engagement": en, "content": {"text": "old pond / frog / splash"}}))
            await lead.act("task.judge", {"engagement": en, "verdict": "adopt"})
            (outcome,) = result(await w.call("outcomes", {}))["items"]
            assert outcome["ref"] == {"task": tk, "engagement": en} and outcome["state"] == "adopted"


async def _scoped(url: str, main: str, scope: str) -> str:
    async with await Client.connect(url, main) as c:
        return (await c.act("agent.key.create", {"scope": scope, "label": f"mcp {scope}"}))["key"]


@pytest.mark.rules("R0-3", "R4-3", "L2-4")
async def test_R0_3_a_scoped_keys_tools_follow_its_scope_stdio_and_http(daemon):
    """WIRE.md 1.3 "Scoped keys": the bridge of a read key lists only reads, a
    worker key's only reads and the work tools, an a2a key's no /v1 tool but
    agent_whoami; the main key of the same agent lists every tool. A tool
    called outside the scope is the daemon's forbidden, naming the scope."""
    _, main = await register(daemon.url, "scoped")
    read_key, worker_key, a2a_key = [await _scoped(daemon.url, main, s) for s in ("read", "worker", "a2a")]
    reads = {op.replace(".", "_") for op, spec in OPS.items() if spec.kind == "R" and op not in EXCLUDED_OPS}
    async with stdio(daemon.url, read_key) as b:
        assert set(b.tools) == reads, set(b.tools) ^ reads
        err = rejected(await b.call("memory_create", {"content": {"text": "x"}}, check_schema=False), "forbidden")
        assert "'read' scope" in err["reason"], err
    async with stdio(daemon.url, worker_key, "--tools", "worker") as b:
        check_worker_set(b)  # the worker set is within the worker scope
    async with http_server(daemon.url) as url:
        async with http_session(url, worker_key) as w, http_session(url, a2a_key) as a, http_session(url, main) as m:
            assert set(w.tools) == reads | (WORKER - reads), set(w.tools) ^ (reads | WORKER)
            assert set(a.tools) == {"agent_whoami"} | {t for t in m.tools if t.startswith("a2a_")}
            assert len(m.tools) == len(OPS) - len(EXCLUDED_OPS)
