"""The daemon on PostgreSQL, end to end (issue 16 item 3; docs/storage.md
"PostgreSQL"): ``kungfud serve --store URL`` serves, an acknowledged action
survives kill -9 (L1-4), ``check --store`` passes, nodes starting together
create one admin, a PostgreSQL restart under a serving daemon is answered
``unavailable`` and recovered from, ``migrate --to`` moves an LMDB directory
written by the daemon, and ``backup`` on PostgreSQL points to ``pg_dump``."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from kungfud.client import Client
from tests.conftest import Daemon
from tests.e2e.helpers import agent_client, call, check_failure
from tests.pg import pg_server  # noqa: F401 — the session fixture

ROOT = Path(__file__).resolve().parents[2]


def kungfud(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kungfud", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture
def nodes():
    made: list[Daemon] = []
    yield made
    for d in made:
        d.stop()


def node(nodes: list[Daemon], data_dir: Path, url: str) -> Daemon:
    d = Daemon(data_dir, extra=["--store", url])
    nodes.append(d)
    return d


@pytest.mark.rules("L1-4")
async def test_the_daemon_serves_on_postgresql_and_an_acknowledged_action_survives_kill_9(pg_server, tmp_path, nodes):
    url = pg_server.new_database()
    d = node(nodes, tmp_path / "node", url).start()
    alice, _ = await agent_client(d.url, "alice")
    async with alice:
        created = await alice.act("memory.create", {"content": {"title": "plan", "n": [1, 2.5, None, True]}})
        await alice.act("memory.update", {"memory": created["memory"], "content": {"title": "plan", "n": 2}})
        key = alice.key
    d.kill()  # nothing acknowledged may be lost
    d.start()
    async with await Client.connect(d.url, key) as again:
        got = await again.read("memory.get", {"memory": created["memory"]})
        first = await again.read("memory.get", {"memory": created["memory"], "version": 1})
    assert got["content"] == {"title": "plan", "n": 2} and got["version"] == 2
    assert first["content"] == {"title": "plan", "n": [1, 2.5, None, True]}
    # The node's directory holds its own files only: no LMDB store.
    assert (tmp_path / "node" / "admin.key").is_file()
    assert not (tmp_path / "node" / "lmdb").exists()
    d.stop()
    out = kungfud("check", "--store", url, "--data-dir", str(tmp_path / "node"))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "OK" in out.stdout


async def test_nodes_starting_together_on_one_database_create_one_admin(pg_server, tmp_path, nodes):
    url = pg_server.new_database()
    ds = [node(nodes, tmp_path / f"n{i}", url) for i in range(3)]
    await asyncio.gather(*(asyncio.to_thread(d.start) for d in ds))
    keys = [d for d in ds if (d.data_dir / "admin.key").exists()]
    assert len(keys) == 1
    admin = keys[0].admin_key
    # Every node serves the same store: the admin authenticates on each.
    for d in ds:
        async with await Client.connect(d.url, admin) as c:
            listed = await c.read("admin.agent.list", {})
            assert [a["admin"] for a in listed["items"]] == [True]  # one admin, no other agent yet


async def test_a_postgresql_restart_under_a_serving_daemon_is_unavailable_then_recovered(pg_server, tmp_path, nodes):
    url = pg_server.new_database()
    d = node(nodes, tmp_path / "node", url).start()
    alice, _ = await agent_client(d.url, "alice")
    async with alice:
        created = await alice.act("memory.create", {"content": {"n": 1}})
        pg_server.stop()
        try:
            read = await call(alice, "memory.get", {"memory": created["memory"]})
            check_failure(read, "unavailable")
            act = await call(alice, "memory.create", {"content": {"n": 2}})
            check_failure(act, "unavailable")
        finally:
            pg_server.start()
        # Recovered by itself: reads and actions succeed again (a few tries while it reconnects).
        deadline = time.monotonic() + 20
        while True:
            r = await call(alice, "memory.create", {"content": {"n": 3}})
            if r.get("ok") or time.monotonic() > deadline:
                break
            check_failure(r, "unavailable")
            await asyncio.sleep(0.2)  # bounded poll for the daemon's own reconnect
        assert r.get("ok"), r
        got = await alice.read("memory.get", {"memory": r["result"]["memory"]})
        assert got["content"] == {"n": 3}
    audit = [line for line in d.stderr_path.read_text().splitlines() if "kungfud.audit" in line]
    assert audit and not [line for line in audit if '"code":"internal"' in line]


async def test_an_lmdb_directory_written_by_the_daemon_migrates_to_postgresql_and_serves_equal(pg_server, tmp_path, nodes):
    data = tmp_path / "data"
    lmdb = Daemon(data).start()
    nodes.append(lmdb)
    alice, _ = await agent_client(lmdb.url, "alice")
    async with alice:
        mems = []
        for i in range(5):
            m = await alice.act("memory.create", {"content": {"i": i}})
            await alice.act("memory.update", {"memory": m["memory"], "content": {"i": i, "v": 2}})
            mems.append(m["memory"])
        before = {m: await alice.read("memory.get", {"memory": m}) for m in mems}
        listed = await alice.read("memory.list", {})
        key = alice.key
    url = pg_server.new_database()
    running = kungfud("migrate", "--data-dir", str(data), "--to", url)
    assert running.returncode == 2 and "in use" in running.stderr  # the daemon must be stopped
    lmdb.stop()
    out = kungfud("migrate", "--data-dir", str(data), "--to", url)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "checked OK" in out.stdout
    again = kungfud("migrate", "--data-dir", str(data), "--to", url)
    assert again.returncode == 2 and "not empty" in again.stderr
    pg = node(nodes, data, url).start()
    async with await Client.connect(pg.url, key) as c:
        assert {m: await c.read("memory.get", {"memory": m}) for m in mems} == before
        assert await c.read("memory.list", {}) == listed
        assert (await c.read("memory.get", {"memory": mems[0], "version": 1}))["content"] == {"i": 0}
    async with await Client.connect(pg.url, lmdb.admin_key) as admin:  # the admin key stayed in the directory
        await admin.read("admin.agent.list", {})


def test_migrate_refuses_what_is_not_an_lmdb_store_or_a_postgresql_url(pg_server, tmp_path):
    out = kungfud("migrate", "--data-dir", str(tmp_path / "nothing"), "--to", pg_server.new_database())
    assert out.returncode == 2 and "no kungfud LMDB store" in out.stderr
    out = kungfud("migrate", "--data-dir", str(tmp_path / "nothing"), "--to", "lmdb")
    assert out.returncode == 2 and "PostgreSQL URL" in out.stderr


async def test_check_on_postgresql_finds_a_damaged_index_and_rebuild_repairs_it(pg_server, tmp_path, nodes):
    url = pg_server.new_database()
    d = node(nodes, tmp_path / "node", url).start()
    alice, _ = await agent_client(d.url, "alice")
    async with alice:
        await alice.act("memory.create", {"content": {"n": 1}})
    d.stop()
    with psycopg.connect(url) as conn:
        conn.execute("DELETE FROM kf_memories")
    out = kungfud("check", "--store", url, "--data-dir", str(tmp_path / "node"))
    assert out.returncode == 1 and "memories: missing" in out.stdout
    out = kungfud("check", "--store", url, "--data-dir", str(tmp_path / "node"), "--rebuild")
    assert out.returncode == 0 and "rebuilt" in out.stdout
    out = kungfud("check", "--store", url, "--data-dir", str(tmp_path / "node"))
    assert out.returncode == 0 and "OK" in out.stdout


def test_backup_of_a_postgresql_store_says_to_use_pg_dump(pg_server, tmp_path):
    out = kungfud("backup", str(tmp_path / "b"), "--store", "postgresql://kf:secret@db/x", "--data-dir", str(tmp_path / "n"))
    assert out.returncode == 2
    assert "pg_dump -Fc" in out.stderr and "pg_restore" in out.stderr
    assert "secret" not in out.stderr
    assert not (tmp_path / "b").exists()
