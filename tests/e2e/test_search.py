"""``search`` over a running daemon (WIRE.md 1.3 "Search"), in every node shape
(lmdb, lmdb2, pg2): an acknowledged action is found by the next search on any
node; a ``kill -9`` between the commit and the index loses nothing; ``kungfud
check`` verifies the index and ``--rebuild`` remakes it; the CLI verb."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kungfud.client import Client
from tests.e2e.helpers import agent_client, call, check_failure, register

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def daemon(shared_daemon):
    """One daemon for the module (tests/conftest.py ``shared_daemon``): each test
    registers agents of its own and reads only what they wrote; the kill -9 test
    makes its own."""
    return shared_daemon


async def _member(url: str, governor: Client, thread: str, name: str) -> Client:
    c, _ = await agent_client(url, name)
    token = (await governor.act("thread.admit", {"thread": thread}))["token"]
    await c.act("thread.join", {"token": token})
    return c


@pytest.mark.rules("R9-9", "R9-7", "R12-9", "L1-4")
async def test_an_acknowledged_action_is_found_by_the_next_search_on_every_node(daemon):
    urls = daemon.urls
    alice, _ = await agent_client(urls[0], "alice")
    async with alice:
        th = (await alice.act("thread.create", {}))["thread"]
        readers = [await _member(u, alice, th, f"bob{i}") for i, u in enumerate(urls)]
        writers = [alice] + [await _member(u, alice, th, f"carol{i}") for i, u in enumerate(urls[1:], 1)]
        try:
            for n, writer in enumerate(writers):
                await writer.act("thread.post", {"thread": th, "content": {"text": f"Déjà vu number{n} wombat"}})
                for reader in readers:  # every node, at once: no waiting for an index to catch up
                    page = await reader.read("search", {"q": f"DEJA number{n}", "in": ["entry"]})
                    assert [(i["thread"], i["entry"]) for i in page["items"]] == [(th, n + 1)], reader
                    item = page["items"][0]
                    assert set(item) == {"kind", "thread", "entry", "at", "snippet", "score"}
                    assert "wombat" in item["snippet"] and page["cursor"] is None
            m = (await alice.act("memory.create", {"content": {"title": "wombat facts"}}))["memory"]
            await alice.act("memory.publish", {"memory": m})
            for reader in readers:
                got = await reader.read("search", {"q": "wombat fact*", "in": ["memory"]})
                assert [(i["memory"], i["version"]) for i in got["items"]] == [(m, 1)]
            outsider, _ = await agent_client(urls[-1], "eve")
            async with outsider:
                # Only the public Memory: no entry of a Thread eve is not in.
                assert (await outsider.read("search", {"q": "wombat fact*"}))["items"] == got["items"]
                assert [i["kind"] for i in (await outsider.read("search", {"q": "wombat"}))["items"]] == ["memory"]
                check_failure(await call(outsider, "search", {"q": "wombat", "thread": th}), "not_found")
                check_failure(await call(outsider, "search", {"q": "  * "}), "bad_request")
                check_failure(await call(outsider, "search", {"q": "wombat", "cursor": "~AAAA"}), "bad_request")
        finally:
            for c in readers + writers[1:]:
                await c.close()


def _kungfud(daemon, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kungfud", *args, *daemon.store_args],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )


@pytest.mark.rules("L1-1", "L1-4")
async def test_kill_9_loses_nothing_and_check_verifies_and_rebuild_remakes_the_index(make_daemon):
    daemon = make_daemon()
    agent, key = await register(daemon.url, "alice")

    async def found(q: str) -> list[int]:
        async with await Client.connect(daemon.url, key) as c:
            return sorted(i["entry"] for i in (await c.read("search", {"q": q, "in": ["entry"]}))["items"])

    async with await Client.connect(daemon.url, key) as alice:
        th = (await alice.act("thread.create", {}))["thread"]
        await alice.act("thread.post", {"thread": th, "content": {"text": "first platypus"}})
        assert await found("platypus") == [1]  # the index holds entry 1
        for n in range(5):  # acknowledged; then killed before any search indexes them
            await alice.act("thread.post", {"thread": th, "content": {"text": f"platypus {n}"}})
    daemon.kill()
    daemon.start()
    assert await found("platypus") == [1, 2, 3, 4, 5, 6]  # caught up from the log by fact seq
    r = _kungfud(daemon, "check")  # beside the running daemon
    assert r.returncode == 0, r.stdout + r.stderr
    daemon.stop()
    r = _kungfud(daemon, "check", "--rebuild")
    assert r.returncode == 0, r.stdout + r.stderr
    r = _kungfud(daemon, "check")
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout + r.stderr
    daemon.start()
    assert await found("platypus 3") == [5]


@pytest.mark.rules("R10.3-1")
async def test_the_cli_searches(daemon):
    agent, key = await register(daemon.url, "alice")
    async with await Client.connect(daemon.url, key) as alice:
        await alice.act("memory.create", {"content": {"note": "the echidna decision"}})
    env = {**os.environ, "KUNGFU_URL": daemon.url, "KUNGFU_KEY": key}
    r = subprocess.run(
        [sys.executable, "-m", "kungfud.agent_cli", "--json", "search", "echidna", "--in", "memory"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, env=env,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    page = json.loads(r.stdout)
    assert [i["kind"] for i in page["items"]] == ["memory"] and "echidna" in page["items"][0]["snippet"]


@pytest.mark.rules("R12-9")
async def test_what_another_may_not_read_changes_nothing_in_a_callers_pages(daemon):
    alice, _ = await agent_client(daemon.url, "alice")
    eve, _ = await agent_client(daemon.url, "eve")
    async with alice, eve:
        th = (await alice.act("thread.create", {}))["thread"]
        for n in range(5):
            await alice.act("thread.post", {"thread": th, "content": {"text": f"pangolin {'pangolin ' * (n % 3)}{n}"}})

        async def pages() -> list[tuple[list[dict], int]]:
            out, cursor = [], None
            while True:
                page = await alice.read("search", {"q": "pangolin", "limit": 2, **({"cursor": cursor} if cursor else {})})
                out.append((page["items"], len(page["cursor"] or "")))
                if not page["cursor"]:
                    return out
                cursor = page["cursor"]

        before = await pages()
        assert sum(len(items) for items, _ in before) == 10  # 5 entries, the 5 Memories their content made
        other = (await eve.act("thread.create", {}))["thread"]
        for n in range(6):  # better and worse matches, newer, none alice may read
            await eve.act("thread.post", {"thread": other, "content": {"text": "pangolin " * n + "x"}})
            m = (await eve.act("memory.create", {"content": {"text": "pangolin pangolin"}}))["memory"]
            if n % 2:
                await eve.act("memory.publish", {"memory": m})
                await eve.act("memory.withdraw", {"memory": m})  # public once, withdrawn now
        assert await pages() == before
