"""Review L7: reads are bounded (docs/wire.md "Reads"). One read returns at most
about `READ_PAGE_BYTES` (1 MiB) of content — a page of `thread.entries
{full:true}` stops early with a cursor and paging skips nothing (WIRE.md
Lists); reads have their own per-agent rate limit (`reads_per_minute`,
`rate_limited` with `next: wait`); a `subscribe {since}` replay is sent a page
at a time, so the requests behind it on the same connection are not held up
by the whole replay."""

from __future__ import annotations

import asyncio
import json

import pytest

from kungfud.client import new_key
from tests.e2e.helpers import Raw, check_failure
from tests.e2e.thread_kit import agents, close_all, new_thread
from tests.reliability.conftest import OP_TEXT, RawWS


@pytest.fixture
def daemon(shared_daemon):
    """One daemon for the module (tests/conftest.py ``shared_daemon``): each test
    registers agents of its own and reads only what they wrote."""
    return shared_daemon


MIB = 1024 * 1024
PAGE_BYTES = MIB  # docs/wire.md: the content one read returns, before the item that crosses it
BIG = 250_000  # a content object close to max_content_bytes (262,144)


@pytest.mark.rules("R8-12", "L4-5", "R12-11")
async def test_L4_5_a_full_entries_page_stops_at_the_byte_budget_and_paging_skips_nothing(daemon):
    a, b = await agents(daemon.url, "alice", "bob")
    t = await new_thread(a, (b, "speaker"))
    for i in range(1, 13):  # 12 entries of ~250 KB: ~3 MB of content
        await a.act("thread.post", {"thread": t, "content": {"n": i, "blob": "x" * BIG}, "ask": []})
    seen: list[int] = []
    pages = 0
    cursor = None
    async with await Raw.connect(daemon.url, b.key) as raw:
        while True:
            frame = {"id": raw.next_id(), "op": "thread.entries", "args": {"thread": t, "cursor": cursor, "limit": 100, "full": True}}
            text = await raw.call_text(frame, 30)
            # The budget is crossed by at most one item of at most max_content_bytes.
            assert len(text) <= PAGE_BYTES + 300_000, f"one read returned {len(text)} bytes"
            page = json.loads(text)["result"]
            pages += 1
            assert page["items"], page["cursor"]  # every page makes progress
            for e in page["items"]:
                assert e["content"]["n"] == e["entry"] and len(e["content"]["blob"]) == BIG
            seen += [e["entry"] for e in page["items"]]
            cursor = page["cursor"]
            if cursor is None:
                break
    assert seen == list(range(1, 13)), seen  # in order, none skipped, none twice
    assert pages >= 3, pages
    # Digests (no content) still page by count alone.
    page = await b.read("thread.entries", {"thread": t, "limit": 100})
    assert [e["entry"] for e in page["items"]] == list(range(1, 13)) and page["cursor"] is None
    await close_all(a, b)


@pytest.mark.rules("L4-5", "R12-11", "L4-6")
async def test_L4_5_reads_have_their_own_per_agent_rate_limit(make_daemon):
    d = make_daemon("[limits]\nreads_per_minute = 20\n", name="reads")
    url = d.url  # budgets are per node (D132, D143): every client on one node
    a, b = await agents(url, "alice", "bob")
    async with await Raw.connect(url, a.key) as raw:
        frames = [{"id": i, "op": "agent.whoami", "args": {}} for i in range(30)]
        for f in frames:
            await raw.send(f)
        replies = [json.loads(await raw.reply_text(f["id"], 30)) for f in frames]
    ok = [r for r in replies if r["ok"]]
    limited = [check_failure(r, "rate_limited") for r in replies if not r["ok"]]
    assert len(ok) <= 20 and len(ok) + len(limited) == 30, (len(ok), len(limited))
    assert all(e["next"] == "wait" for e in limited)
    # A subscribe is a read too.
    err = check_failure(await a.c.request("subscribe", {}), "rate_limited")
    assert err["next"] == "wait"
    # The limit is the agent's: another agent reads, and alice's actions are not reads.
    assert (await b.read("agent.whoami"))["agent"] == b.id
    r = await a.c.request("memory.create", {"content": {"still": "acting"}}, key=new_key())
    assert r["ok"] is True, r
    await close_all(a, b)


@pytest.mark.rules("R8-20", "R8-19", "R12-11")
async def test_R8_20_a_long_replay_is_paged_without_gap_or_duplicate_and_does_not_hold_the_connection(daemon):
    """`subscribe {since: 0}` over 500 missed events, with a read pipelined right
    behind it: the read is answered before the replay ends (the replay is sent a
    page at a time), every missed event arrives exactly once in seq order, and
    live events continue after it with no gap."""
    a, x = await agents(daemon.url, "alice", "xavier")
    t = await new_thread(a, (x, "speaker"))
    for start in range(0, 500, 50):
        await asyncio.gather(*(a.act("thread.post", {"thread": t, "content": {"q": i}, "ask": [x.id]}) for i in range(start, start + 50)))
    raw = await RawWS.connect(daemon.url, x.key)
    try:
        # Both frames in one TCP write: the daemon has the read in hand while it replays.
        raw.write(
            RawWS.frame(OP_TEXT, json.dumps({"id": "sub", "op": "subscribe", "args": {"since": 0}}).encode())
            + RawWS.frame(OP_TEXT, json.dumps({"id": "who", "op": "agent.whoami", "args": {}}).encode())
        )
        await raw.writer.drain()
        events: list[dict] = []
        who_after = None
        newest = None
        live_sent = False
        while True:
            msg = json.loads(await raw.recv_text(30))
            if msg.get("id") == "sub":
                newest = msg["result"]["seq"]
            elif msg.get("id") == "who":
                assert msg["ok"] is True, msg
                who_after = len(events)
            elif "seq" in msg and "event" in msg:
                events.append(msg)
                if len(events) == 500 and not live_sent:
                    live_sent = True
                    await a.act("thread.post", {"thread": t, "content": {"q": "live"}, "ask": [x.id]})
                if len(events) == 501:
                    break
    finally:
        raw.close()
    assert newest is not None and who_after is not None
    assert who_after < 500, "the read behind the subscribe waited for the whole replay"
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(set(seqs)), "events out of order or duplicated"
    assert all(s <= newest for s in seqs[:500]) and seqs[500] > newest
    assert all(e["event"] == "turn" and len(e["data"]["added"]) == 1 for e in events)
    await close_all(a, x)


@pytest.mark.rules("R8-12", "L4-5", "R12-11", "R9-15", "R9-17")
async def test_L4_5_working_sets_embedding_content_page_it_by_size(daemon):
    """Review L7, the working sets: `task.get` `adopted` and `engagement.get`
    `inputs` embed content (up to 100 × 256 KiB each). Each stops at about 1 MiB
    of content with a cursor (`adopted_cursor` → `adopted_after`; `inputs_cursor`
    → `inputs_after`), and following the cursors gives every item exactly once."""
    a, b = await agents(daemon.url, "alice", "bob")
    inputs = []
    for i in range(6):  # ~1.5 MB of bound inputs
        m = await a.act("memory.create", {"content": {"n": i, "blob": "i" * BIG}})
        inputs.append({"memory": m["memory"], "version": 1})
    tk = (await a.act("task.create", {"audience": "open", "contract": {
        "inputs": inputs, "content": {"output": "o", "criteria": "c"}}}))["task"]
    engagements = []
    for i in range(6):  # six adoptions of ~250 KB each
        en = (await b.act("task.take", {"task": tk, "deliver": {"content": {"n": i, "blob": "d" * BIG}}}))["engagement"]
        await a.act("task.judge", {"engagement": en, "verdict": "adopt"})
        engagements.append(en)

    async with await Raw.connect(daemon.url, a.key) as raw:
        async def read(op: str, args: dict) -> dict:
            text = await raw.call_text({"id": raw.next_id(), "op": op, "args": args}, 30)
            assert len(text) <= PAGE_BYTES + 400_000, f"one {op} returned {len(text)} bytes"
            return json.loads(text)["result"]

        seen, after, pages = [], None, 0
        while True:
            ws = await read("task.get", {"task": tk} if after is None else {"task": tk, "adopted_after": after})
            pages += 1
            assert ws["adopted"], ws.get("adopted_cursor")
            assert all(len(x["content"]["blob"]) == BIG for x in ws["adopted"])
            seen += [x["engagement"] for x in ws["adopted"]]
            after = ws.get("adopted_cursor")
            if after is None:
                break
        assert sorted(seen) == sorted(engagements) and len(seen) == len(set(seen)) and pages >= 2

        given, after, pages = {}, 0, 0
        while True:
            ws = await read("engagement.get", {"engagement": engagements[0], "inputs_after": after})
            pages += 1
            assert [(x["memory"], x["version"]) for x in ws["inputs"]] == [(x["memory"], x["version"]) for x in inputs]
            for n, x in enumerate(ws["inputs"], 1):
                if "content" in x:
                    assert n > after and n not in given and x["content"]["n"] == n - 1
                    given[n] = True
            after = ws.get("inputs_cursor")
            if after is None:
                break
        assert sorted(given) == list(range(1, 7)) and pages >= 2
    await close_all(a, b)
