"""Operations surface (issue 8.5): health check and Prometheus metrics on the
daemon's port, capacity limits, backup and restore, JSON logs."""

import sys
import urllib.request

import pytest

from tests.e2e.helpers import agent_client


def _http(daemon, path: str) -> tuple[int, str, str]:
    base = daemon.url.replace("ws://", "http://").rsplit("/", 1)[0]
    with urllib.request.urlopen(base + path, timeout=10) as r:  # noqa: S310 (loopback only)
        return r.status, r.headers.get("Content-Type", ""), r.read().decode()


def test_ops_healthz_answers_ok(daemon):
    status, _, body = _http(daemon, "/healthz")
    assert status == 200 and body == "ok\n"


@pytest.mark.rules("L4-6")
@pytest.mark.single_node("counts in one process's /metrics")
async def test_ops_metrics_count_actions_rejections_replays_and_gauges(daemon):
    c, _ = await agent_client(daemon.url, "metrics")
    await c.act("memory.create", {"content": {"a": 1}}, key="k1")
    await c.act("memory.create", {"content": {"a": 1}}, key="k1")  # replay
    r = await c.request("memory.get", {"memory": "me_0000000000000000000000000z"})
    assert r["ok"] is False and r["error"]["code"] == "not_found"
    status, ctype, text = _http(daemon, "/metrics")
    assert status == 200 and ctype.startswith("text/plain")
    lines = {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if not line.startswith("#")}
    assert lines['kungfud_actions_total{op="memory.create"}'] == 1
    assert lines['kungfud_actions_total{op="agent.register"}'] == 1
    assert lines["kungfud_replays_total"] == 1
    assert lines['kungfud_rejections_total{code="not_found"}'] == 1
    assert lines["kungfud_connections"] >= 1
    assert lines["kungfud_action_latency_ms_count"] == 2  # register + create; replays are not in the histogram
    assert lines['kungfud_action_latency_ms_bucket{le="+Inf"}'] == 2
    assert 0 < lines["kungfud_lmdb_map_used_bytes"] < lines["kungfud_lmdb_map_size_bytes"]
    if sys.platform == "linux":  # where the CPU goes, per thread group (docs/operations.md)
        groups = {k for k in lines if k.startswith("kungfud_thread_cpu_seconds{")}
        for group in ("event_loop", "writer", "actors"):
            assert f'kungfud_thread_cpu_seconds{{group="{group}",mode="user"}}' in groups, groups
        assert all(lines[k] >= 0 for k in groups)
    # admin bootstrap + register + memory.create: three facts.
    assert lines["kungfud_facts_total"] == 3
    await c.close()


@pytest.mark.rules("L4-5", "L4-6", "R12-11")
async def test_L4_5_capacity_limits_reject_with_wait_and_no_effect(make_daemon):
    d = make_daemon("[limits]\nmax_members_per_thread = 2\nmax_threads_per_agent = 2\n")
    a, _ = await agent_client(d.url, "a")
    b, _ = await agent_client(d.url, "b")
    c, _ = await agent_client(d.url, "c")
    t1 = (await a.act("thread.create", {}))["thread"]
    token = (await a.act("thread.admit", {"thread": t1}))["token"]
    await b.act("thread.join", {"token": token})
    r = await c.request("thread.join", {"token": token}, key="full")
    assert r["error"]["code"] == "rate_limited" and r["error"]["next"] == "wait"
    with_c = await c.request("thread.get", {"thread": t1})
    assert with_c["error"]["code"] == "not_found"  # nothing took effect (L4-6)
    assert len((await a.read("thread.get", {"thread": t1}))["members"]) == 2
    await a.act("thread.create", {})
    r = await a.request("thread.create", {}, key="third")
    assert r["error"]["code"] == "rate_limited" and r["error"]["next"] == "wait"
    assert len((await a.read("thread.list", {}))["items"]) == 2
    for x in (a, b, c):
        await x.close()


@pytest.mark.rules("L1-1", "L1-4")
@pytest.mark.lmdb_only("backs up the LMDB data directory (PostgreSQL: pg_dump, docs/operations.md)")
async def test_ops_backup_while_serving_restores_to_an_identical_checked_store(daemon, tmp_path):
    import subprocess
    import sys

    from tests.conftest import ROOT, Daemon

    c, _ = await agent_client(daemon.url, "backup")
    made = [await c.act("memory.create", {"content": {"n": i}}) for i in range(20)]

    async def writer() -> None:  # keep writing while the backup runs
        for i in range(50):
            await c.act("memory.create", {"content": {"later": i}})

    import asyncio

    task = asyncio.create_task(writer())
    r = subprocess.run(
        [sys.executable, "-m", "kungfud", "backup", str(tmp_path / "bk"), "--data-dir", str(daemon.data_dir)],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )
    await task
    assert r.returncode == 0, r.stderr
    again = subprocess.run(
        [sys.executable, "-m", "kungfud", "backup", str(tmp_path / "bk"), "--data-dir", str(daemon.data_dir)],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )
    assert again.returncode != 0 and "already holds a backup" in again.stderr
    await c.close()
    # Restore = a data directory whose lmdb is the backup's; it passes check and serves.
    check = subprocess.run(
        [sys.executable, "-m", "kungfud", "check", "--data-dir", str(tmp_path / "bk")],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    restored = Daemon(tmp_path / "bk").start()
    try:
        agent_key = c.key
        from kungfud.client import Client

        async with await Client.connect(restored.url, agent_key) as again_c:
            page = await again_c.read("memory.list", {"limit": 100})
            ids = {m["memory"] for m in page["items"]}
            assert {m["memory"] for m in made} <= ids  # everything acknowledged before the backup
            got = await again_c.read("memory.get", {"memory": made[7]["memory"]})
            assert got["content"] == {"n": 7}
    finally:
        restored.stop()


def test_ops_json_logs_are_one_object_per_line_and_never_hold_the_admin_key(make_daemon):
    import json as _json

    d = make_daemon(None, name="jl", extra=["--log-format", "json"])
    key = d.admin_key
    d.terminate()
    for path in d.log_paths:  # every node's log
        lines = [line for line in path.read_text().splitlines() if line.strip()]
        assert lines, f"{path}: the daemon logged nothing"
        for line in lines:
            record = _json.loads(line)
            assert {"ts", "level", "logger", "msg"} <= set(record)
        assert key not in path.read_text()


@pytest.mark.rules("R8-20")
@pytest.mark.single_node("counts in one process's /metrics")
async def test_ops_metrics_events_sent_counts_frames_replayed_by_subscribe_since(daemon):
    """docs/operations.md: `kungfud_events_sent_total` counts every event frame sent,
    the ones a `subscribe {since}` replays as well as live ones."""
    a, _ = await agent_client(daemon.url, "asker")
    b, b_id = await agent_client(daemon.url, "answerer")
    th = (await a.act("thread.create", {}))["thread"]
    token = (await a.act("thread.admit", {"thread": th, "role": "speaker"}))["token"]
    await b.act("thread.join", {"token": token})
    for i in range(3):
        await a.act("thread.post", {"thread": th, "ask": [b_id], "content": {"text": f"q{i}"}})
    newest = (await b.read("subscribe", {"since": 0}))["seq"]
    got = []
    async for ev in b.events():  # the replay, up to the newest seq the reply named
        got.append(ev)
        if ev["seq"] >= newest:
            break
    assert len(got) >= 3, got  # a turn event per question at least
    _, _, text = _http(daemon, "/metrics")
    lines = {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if not line.startswith("#")}
    assert lines["kungfud_events_sent_total"] == len(got), (lines["kungfud_events_sent_total"], got)
    await a.close()
    await b.close()


@pytest.mark.rules("L4-6")
def test_ops_metrics_names_are_exactly_the_documented_ones(daemon):
    """docs/operations.md lists every metric family /metrics exposes, and no other."""
    import re
    from pathlib import Path

    _, _, text = _http(daemon, "/metrics")
    exposed = set(re.findall(r"^# TYPE (kungfud_\w+) ", text, flags=re.M))
    doc = (Path(__file__).resolve().parent.parent.parent / "docs" / "operations.md").read_text()
    documented = set(re.findall(r"`(kungfud_\w+)", doc))
    documented.discard("kungfud_trace_spans_dropped_total")  # only while tracing is on (this daemon: off)
    if daemon.store_args[0] == "--store":  # PostgreSQL has no LMDB map to report
        documented = {name for name in documented if not name.startswith("kungfud_lmdb_")}
        # ... and, without [storage] capacity_mb, no size for the capacity limits (D241)
        documented -= {"kungfud_store_used_bytes", "kungfud_store_capacity_bytes", "kungfud_store_reserve_bytes"}
    assert exposed == documented, (exposed - documented, documented - exposed)
