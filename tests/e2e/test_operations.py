"""Operations surface (issue 8.5): health check and Prometheus metrics on the
daemon's port, backup and restore."""

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
    assert lines["kungfud_action_latency_ms_count"] == 2  # register + create; replays answer from the receipt
    assert lines['kungfud_action_latency_ms_bucket{le="+Inf"}'] == 2
    assert 0 < lines["kungfud_lmdb_map_used_bytes"] < lines["kungfud_lmdb_map_size_bytes"]
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
