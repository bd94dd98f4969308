"""The `kungfu` CLI for outcomes and the work itself (WIRE.md 1.1, docs/cli.md):
``kungfu outcomes`` lists how work ended, ``kungfu watch`` prints ``outcome``
events, ``kungfu thread entry`` reads one entry and ``thread entries
--newest-first`` pages back from the newest."""

from __future__ import annotations

import json

import pytest

from kungfud.client import Client
from tests.e2e.test_cli import Cli, cli  # noqa: F401  (the fixture)


async def _feed_length(url: str, key: str) -> int:
    """How many events the agent's durable feed holds (replayed from seq 0)."""
    c = await Client.connect(url, key)
    try:
        await c.read("subscribe", {"since": 0})
        await c.read("agent.whoami", {})  # the replay precedes this reply
        return c._events.qsize()
    finally:
        await c.close()


@pytest.mark.rules("R8-20", "R6.4-26")
def test_R8_20_cli_outcomes_and_watch_show_the_rejection_and_its_reason(cli: Cli, daemon):
    import asyncio

    lead, lead_key = cli.register("lead")
    w, w_key = cli.register("w")
    th = cli.json("thread", "create", key=lead_key)["thread"]
    cli.run("thread", "join", cli.json("thread", "admit", th, key=lead_key)["token"], key=w_key)
    asg = cli.json("post", th, "--text", "write it", "--assign-to", w, "--criteria", "tests pass", key=lead_key)["assignment"]
    cli.run("take", asg, "--text", "done", key=w_key)
    cli.run("judge", asg, "reject", "--reason", "no tests\nforged line", key=lead_key)

    out = cli.run("outcomes", key=w_key).stdout.splitlines()
    assert len(out) == 1, out  # the reason's newline stays inside the JSON
    assert out[0].startswith(f"{th}/{asg} rejected at=") and 'by="lead"' in out[0]  # by name (WIRE.md 1.2)
    assert f"by={lead}" in cli.run("outcomes", "--ids", key=w_key).stdout
    assert out[0].endswith('content={"reason":"no tests\\nforged line"}'), out
    items = cli.json("outcomes", key=w_key)["items"]
    assert [(i["state"], i["content"]) for i in items] == [("rejected", {"reason": "no tests\nforged line"})]

    n = asyncio.run(_feed_length(daemon.url, w_key))
    lines = cli.run("watch", "--since", "0", "--count", str(n), key=w_key).stdout.splitlines()
    outcome_lines = [line for line in lines if line.split(" ", 2)[1] == "outcome"]
    assert len(outcome_lines) == 1 and f"{th}/{asg} rejected" in outcome_lines[0], lines
    events = [json.loads(x) for x in cli.run("watch", "--since", "0", "--count", str(n), "--json", key=w_key).stdout.splitlines()]
    assert [e["data"] for e in events if e["event"] == "outcome"] == items


@pytest.mark.rules("R8-17", "R8-9")
def test_R8_17_cli_reads_one_entry_and_pages_newest_first(cli: Cli, daemon):
    lead, lead_key = cli.register("lead")
    th = cli.json("thread", "create", key=lead_key)["thread"]
    for n in range(3):
        cli.run("post", th, "--text", f"entry {n + 1}", key=lead_key)
    one = cli.json("thread", "entry", f"{th}#2", key=lead_key)
    assert one["entry"] == 2 and one["content"] == {"text": "entry 2"}
    assert cli.json("thread", "entry", th, "2", key=lead_key) == one
    page = cli.json("thread", "entries", th, "--newest-first", "--limit", "2", key=lead_key)
    assert [e["entry"] for e in page["items"]] == [3, 2] and page["cursor"] is not None
    human = cli.run("thread", "entries", th, "--newest-first", "--all", key=lead_key).stdout
    assert [line.split()[0] for line in human.splitlines() if line.startswith("#")] == ["#3", "#2", "#1"]
