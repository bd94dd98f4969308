"""Issue 12 over the real daemon: malformed values are ``bad_request`` naming the
field, never ``internal`` (L1); a refused ``subscribe`` leaves the connection's
subscription in place; a handle note is one line also for Unicode's line and
paragraph separators (B10); no key or token reaches the log, even at DEBUG
where websockets logs every header and frame (L5)."""

from __future__ import annotations

import re

import pytest

from kungfud.client import Client
from tests.e2e.helpers import Raw, check_failure
from tests.e2e.test_events import agent, ask, next_event, subscribe, thread_of
from tests.e2e.thread_kit import agents, entry, fails, new_thread, response_of


@pytest.mark.rules("L2-4")
async def test_L2_4_thread_entries_cursor_of_non_ascii_digits_is_bad_request_naming_it(daemon):
    a, b = await agents(daemon.url, "alice", "bob")
    t = await new_thread(a, (b, "speaker"))
    for i in range(3):
        await a.act("thread.post", {"thread": t, "content": {"n": i}})
    page = await a.read("thread.entries", {"thread": t, "limit": 1})
    assert page["cursor"] == "1"
    # "²" and "①" made int() fail (internal); "١" (Arabic-Indic one) was read as 1.
    async with await Raw.connect(daemon.url, a.key) as r:
        for cursor in ("²", "①", "١", "1\n", "-1", "0x1"):
            resp = await r.req("thread.entries", {"thread": t, "cursor": cursor})
            err = check_failure(resp, "bad_request")
            assert "`cursor` is not a cursor" in err["reason"], (cursor, err)
    await a.close()
    await b.close()


@pytest.mark.rules("L2-4", "R8-20")
async def test_L2_4_subscribe_since_beyond_range_is_bad_request_and_keeps_the_subscription(daemon):
    alice = await agent(daemon.url, "alice")
    bob = await agent(daemon.url, "bob")
    t = await thread_of(alice, bob)
    await subscribe(bob.c)
    for since in (2**64 - 1, 2**64, 2**53 + 1):
        resp = await bob.c.request("subscribe", {"since": since})
        err = check_failure(resp, "bad_request")
        assert "`since` must be at most" in err["reason"], err
    # The refused subscribe changed nothing: bob's connection still gets his events.
    await ask(alice, t, bob)
    ev = await next_event(bob.c)
    assert ev["event"] == "turn" and ev["data"]["added"][0]["ref"]["thread"] == t, ev
    await alice.c.close()
    await bob.c.close()


@pytest.mark.rules("R6.3-16")
async def test_R6_3_16_handle_note_with_a_unicode_line_or_paragraph_separator_is_bad_request(daemon):
    a, b = await agents(daemon.url, "alice", "bob")
    t = await new_thread(a, (b, "speaker"))
    await a.act("thread.post", {"thread": t, "content": {"q": 1}, "ask": [b.id]})
    for sep in ("\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\r", "\n", "\x1e"):
        await fails(b, "thread.handle", {"thread": t, "entry": 1, "content": {"note": f"one{sep}two"}}, "bad_request")
    assert response_of(await entry(a, t, 1), b.id)["state"] == "pending"
    r = await b.act("thread.handle", {"thread": t, "entry": 1, "content": {"note": "one line, with\ttab"}})
    assert response_of(await entry(a, t, 1), b.id)["state"] != "pending", r
    await a.close()
    await b.close()


def _fragments(secret: str, n: int = 12) -> set[str]:
    """Every ``n``-character piece of a secret (a logged tail is one of them)."""
    return {secret[i : i + n] for i in range(len(secret) - n + 1)}


@pytest.mark.rules("R12-3")
async def test_R12_3_debug_log_shows_no_key_or_token_not_even_a_tail(make_daemon):
    d = make_daemon(None, extra=["--log-level", "DEBUG"])
    try:
        async with await Client.connect(d.url) as anon:
            reg = await anon.act("agent.register", {"content": {"name": "alice"}})
            reg2 = await anon.act("agent.register", {"content": {"name": "bob"}})
        alice = await Client.connect(d.url, reg["key"])  # Authorization header
        bob = await Client.connect(d.url)
        await bob.read("hello", {"key": reg2["key"]})  # key in a frame
        t = (await alice.act("thread.create", {"content": {"title": "t"}}))["thread"]
        grant = await alice.act("thread.admit", {"thread": t})  # token in a reply
        await bob.act("thread.join", {"token": grant["token"]})  # token in a frame
        await alice.close()
        await bob.close()
    finally:
        d.stop()
    log = "".join(path.read_text() for path in d.log_paths)  # every node's
    # The log is the DEBUG one: headers and frames are in it.
    assert re.search(r"websockets\.server < Authorization: ", log), log[-2000:]
    assert "thread.join" in log and "hello" in log, log[-2000:]
    for secret in (reg["key"], reg2["key"], grant["token"]):
        leaked = [f for f in _fragments(secret) if f in log]
        assert not leaked, (secret[:3], leaked[:3])
