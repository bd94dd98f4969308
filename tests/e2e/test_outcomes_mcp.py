"""The MCP bridge's ``outcomes`` and ``thread_entry`` tools (WIRE.md 1.1, one tool
per op), driven by the MCP SDK's own stdio client against a real daemon: a
worker learns through MCP that its delivery was rejected, and why."""

from __future__ import annotations

import pytest

from kungfud.client import Client
from tests.e2e.helpers import register
from tests.e2e.test_mcp import bridge, result


@pytest.mark.rules("R8-20", "R6.4-26", "R8-17")
async def test_R6_4_26_a_worker_reads_the_rejection_and_its_instruction_over_mcp(daemon):
    lead, lead_key = await register(daemon.url, "lead")
    w, w_key = await register(daemon.url, "w")
    async with await Client.connect(daemon.url, lead_key) as c:
        t = (await c.act("thread.create", {}))["thread"]
        token = (await c.act("thread.admit", {"thread": t}))["token"]
        async with await Client.connect(daemon.url, w_key) as wc:
            await wc.act("thread.join", {"token": token})
            r = await c.act("thread.post", {"thread": t, "content": {"text": "add the index"}, "assign": {"to": w, "content": {"criteria": "fast"}}})
            await wc.act("assignment.take", {"assignment": r["assignment"], "deliver": {"content": {"sql": "…"}}})
        await c.act("assignment.judge", {"assignment": r["assignment"], "verdict": "reject", "content": {"reason": "wrong column"}})
    async with bridge(daemon.url, w_key) as b:
        page = result(await b.call("outcomes", {}))
        assert [(i["ref"], i["state"], i["by"], i["content"]) for i in page["items"]] == [
            ({"thread": t, "assignment": r["assignment"]}, "rejected", lead, {"reason": "wrong column"}),
        ]
        entry = result(await b.call("thread_entry", {"thread": t, "entry": r["entry"]}))
        assert entry["content"] == {"text": "add the index"}
        work = result(await b.call("assignment_get", {"assignment": r["assignment"]}))
        assert work["instruction"] == entry
