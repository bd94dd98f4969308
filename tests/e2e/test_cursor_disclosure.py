"""Cursors over the wire (security review M1): a page's cursor never names an
object the caller may not read (R12-8, R12-9, D44), and paging never skips."""

from __future__ import annotations

import asyncio

import pytest

from .helpers import agent_client


@pytest.mark.rules("R12-9", "R12-8", "R8-13")
async def test_R12_9_memory_list_of_another_author_never_returns_a_private_id_as_cursor(daemon):
    """The review's reproduction: 1,001 private Memories and one public one;
    another agent lists the author's Memories."""
    alice, a = await agent_client(daemon.url, "alice")
    bob, _ = await agent_client(daemon.url, "bob")
    private: list[str] = []
    for start in range(0, 1001, 50):  # at most 64 requests in flight per connection
        batch = await asyncio.gather(*(alice.act("memory.create", {"content": {"secret": n}}) for n in range(start, min(start + 50, 1001))))
        private += [r["memory"] for r in batch]
    public = (await alice.act("memory.create", {"content": {"hello": "world"}}))["memory"]
    await alice.act("memory.publish", {"memory": public})

    listed, cursors, cursor = [], [], None
    while True:
        page = await bob.read("memory.list", {"author": a, "limit": 100, **({"cursor": cursor} if cursor else {})})
        listed += [i["memory"] for i in page["items"]]
        cursor = page["cursor"]
        if cursor is None:
            break
        cursors.append(cursor)
        assert len(cursors) < 10, "paging did not end"
    assert listed == [public]  # nothing skipped, nothing private listed
    assert cursors, "the scan budget must run out on private rows for this test to mean anything"
    for c in cursors:
        assert not any(m in c for m in private), c
        # Nothing about a cursor is an id: asking for it as a Memory is not even well-formed.
        resp = await bob.request("memory.get", {"memory": c})
        assert resp["ok"] is False and resp["error"]["code"] == "bad_request", resp
    # The author pages through all of its own, every cursor one of its own ids.
    mine, cursor = [], None
    while True:
        page = await alice.read("memory.list", {"limit": 100, **({"cursor": cursor} if cursor else {})})
        mine += [i["memory"] for i in page["items"]]
        cursor = page["cursor"]
        if cursor is None:
            break
        assert cursor in private
    assert sorted(mine) == sorted(private + [public])
    for c in (alice, bob):
        await c.close()
