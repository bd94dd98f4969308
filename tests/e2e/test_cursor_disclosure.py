"""Cursors over the wire (security review M1): a page's cursor never names an
object the caller may not read (R12-8, R12-9, D44), and paging never skips."""

from __future__ import annotations

import asyncio

import pytest

from .helpers import agent_client


async def _pages(reader, author: str, limit: int) -> list[tuple[list[str], bool]]:
    """Every page ``reader`` gets listing ``author``'s Memories: (ids, has a cursor)."""
    pages, cursor = [], None
    while True:
        page = await reader.read("memory.list", {"author": author, "limit": limit, **({"cursor": cursor} if cursor else {})})
        pages.append(([i["memory"] for i in page["items"]], page["cursor"] is not None))
        cursor = page["cursor"]
        if cursor is None:
            return pages
        assert len(pages) < 10, "paging did not end"


@pytest.mark.rules("R12-9", "R12-8", "R8-13")
async def test_R12_9_memory_list_of_another_author_does_not_depend_on_its_private_memories(daemon):
    """The review's reproduction (first review's M1, third review "Also"):
    1,001 private Memories and one public one; another agent lists the author's
    Memories. Before D233 it got an empty page with a (sealed) cursor, then the
    public one — unlike over an author with only the public one, so the pages
    told that private ones exist. Now the pages are the same as over an author
    with no private Memory: one page, the public one, no cursor."""
    url = daemon.url  # one node: the writes and the reads see one store either way
    alice, a = await agent_client(url, "alice")
    bob, _ = await agent_client(url, "bob")
    carol, c_id = await agent_client(url, "carol")
    private: list[str] = []
    for start in range(0, 1001, 50):  # at most 64 requests in flight per connection
        batch = await asyncio.gather(*(alice.act("memory.create", {"content": {"secret": n}}) for n in range(start, min(start + 50, 1001))))
        private += [r["memory"] for r in batch]
    public = (await alice.act("memory.create", {"content": {"hello": "world"}}))["memory"]
    await alice.act("memory.publish", {"memory": public})
    only = (await carol.act("memory.create", {"content": {"hello": "world"}}))["memory"]
    await carol.act("memory.publish", {"memory": only})

    for limit in (1, 100):
        assert await _pages(bob, a, limit) == [([public], False)]
        assert await _pages(bob, c_id, limit) == [([only], False)]
    # Another public one: two pages of one for limit 1 over either author, the
    # same cursor-or-not sequence whatever lies between them.
    later = (await alice.act("memory.create", {"content": {"n": 2}}))["memory"]
    await alice.act("memory.publish", {"memory": later})
    assert await _pages(bob, a, 1) == [([public], True), ([later], False)]
    # The author pages through all of its own, every cursor one of its own ids.
    mine, cursor = [], None
    while True:
        page = await alice.read("memory.list", {"limit": 100, **({"cursor": cursor} if cursor else {})})
        mine += [i["memory"] for i in page["items"]]
        cursor = page["cursor"]
        if cursor is None:
            break
        assert cursor in private + [public, later]
    assert sorted(mine) == sorted(private + [public, later])
    for c in (alice, bob, carol):
        await c.close()
