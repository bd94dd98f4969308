"""Capacity limits per agent and the store's reserve (R12-11, L4-5, L4-6; issue #25
defect 4, reviews/security.md finding 4; docs/decisions.md D240–D242).

One ordinary agent writing 255 KiB Memory versions as fast as its rate limit
allows used to fill the store, after which every other agent's actions — and
the deadline facts — failed ``unavailable: storage is full``. Now its writes
are refused ``rate_limited`` at its limit, counted in the store so the limit
holds across every node on one store (``KUNGFUD_E2E_NODES=lmdb2|pg2``) and
across a kill -9, while other agents write on; and once the store is nearly
full only operator actions and deadline facts commit."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import urllib.request

import pytest

from kungfud.client import Client, new_key
from tests.conftest import ROOT
from tests.e2e.helpers import check_error, register

BLOB = "x" * (255 * 1024)  # just under the 256 KiB content limit, as in the review


def _urls(d) -> list[str]:
    return list(getattr(d, "urls", None) or [d.url])


def _metrics(url: str) -> dict[str, float]:
    base = url.replace("ws://", "http://").rsplit("/", 1)[0]
    with urllib.request.urlopen(base + "/metrics", timeout=10) as r:  # noqa: S310 (loopback only)
        text = r.read().decode()
    return {ln.rsplit(" ", 1)[0]: float(ln.rsplit(" ", 1)[1]) for ln in text.splitlines() if not ln.startswith("#")}


async def _clients(d, key: str) -> list[Client]:
    """One connection per node (lmdb2: per worker; pg2: per node)."""
    return [await Client.connect(u, key) for u in _urls(d)]


async def _fill(clients: list[Client], memory: str, limit: int = 400) -> tuple[int, dict]:
    """``memory.update`` with 255 KiB, over every node in turn, until refused:
    (versions written, the refusal)."""
    for i in range(limit):
        r = await clients[i % len(clients)].request(
            "memory.update", {"memory": memory, "content": {"t": BLOB, "i": i}}, key=new_key()
        )
        if not r["ok"]:
            return i, check_error(r["error"])
    raise AssertionError(f"{limit} versions of 255 KiB and no limit")


async def _close(*cs: Client) -> None:
    for c in cs:
        await c.close()


def _check(d) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kungfud", "check", *d.store_args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


@pytest.mark.rules("R12-11", "L4-5", "L4-6")
async def test_R12_11_an_agent_is_refused_at_its_bytes_on_every_node_and_after_a_kill_while_others_write(make_daemon):
    limit = 2 * 1024 * 1024
    d = make_daemon(f"[limits]\nmax_bytes_per_agent = {limit}\n")
    mallory, mkey = await register(d.url, "mallory")
    _, vkey = await register(d.url, "victim")
    ms, vs = await _clients(d, mkey), await _clients(d, vkey)
    first = await ms[0].request("memory.create", {"content": {"t": BLOB}}, key="first")
    assert first["ok"], first
    mem = first["result"]["memory"]
    n, err = await _fill(ms, mem)
    # 2 MiB of facts hold 8 versions of 255 KiB (the create and 7 updates), not 9.
    assert n == 7, n
    assert (err["code"], err["next"], err.get("rule")) == ("rate_limited", "wait", "R12-11"), err
    assert f"limit of {limit} bytes" in err["reason"] and "max_bytes_per_agent" in err["reason"], err
    assert "operator" in err["reason"] and mallory in err["reason"], err
    got = await ms[-1].read("memory.get", {"memory": mem})
    assert got["version"] == 8  # nothing of the refused update was written (L4-6)
    # Its earlier actions are still answered from their receipts (L3).
    again = await ms[-1].request("memory.create", {"content": {"t": BLOB}}, key="first")
    assert again["ok"] and again["replayed"] is True, again
    # Everyone else writes on, on every node.
    for v in vs:
        r = await v.request("memory.create", {"content": {"t": BLOB}}, key=new_key())
        assert r["ok"], r
    # /metrics: the refusal (on whichever node refused it) and the limit.
    seen = [_metrics(u) for u in _urls(d)]
    assert sum(m.get('kungfud_quota_refusals_total{limit="agent_bytes"}', 0) for m in seen) == 1
    assert all(m["kungfud_quota_agent_bytes_limit"] == limit for m in seen)
    await _close(*ms, *vs)

    d.restart()  # kill -9: the count is in the store, not in a process
    ms = await _clients(d, mkey)
    for m in ms:
        r = await m.request("memory.update", {"memory": mem, "content": {"t": BLOB}}, key=new_key())
        assert not r["ok"] and r["error"]["code"] == "rate_limited", r
    await _close(*ms)
    d.stop()
    r = _check(d)  # the usage table is the log's count
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout + r.stderr


@pytest.mark.rules("R12-11", "L4-5")
async def test_R12_11_review_case_one_agent_cannot_fill_a_24_mib_store_with_the_default_limits(make_daemon):
    """reviews/security-repro/f_no_per_agent_storage_quota.py: 255 KiB versions
    into a 24 MiB map. By default an agent may record 10 % of the store's size
    (LMDB: the map; PostgreSQL: ``capacity_mb``, which LMDB ignores)."""
    d = make_daemon("[storage]\nmap_size_mb = 24\ncapacity_mb = 24\n")
    _, mkey = await register(d.url, "mallory")
    _, vkey = await register(d.url, "victim")
    ms, v = await _clients(d, mkey), await Client.connect(d.url, vkey)
    mem = (await ms[0].act("memory.create", {"content": {"t": BLOB}}))["memory"]
    n, err = await _fill(ms, mem)
    assert err["code"] == "rate_limited" and err["next"] == "wait", err  # not "storage is full"
    assert "max_store_percent_per_agent = 10 %" in err["reason"], err
    assert (n + 1) * len(BLOB) <= 24 * 1024 * 1024 // 10
    for op, args in (("memory.create", {"content": {"hello": "world"}}), ("thread.create", {"content": {"title": "t"}})):
        r = await v.request(op, args, key=new_key())
        assert r["ok"], (op, r)
    m = _metrics(d.url)
    assert m["kungfud_store_capacity_bytes"] == 24 * 1024 * 1024
    assert m["kungfud_store_used_bytes"] < 0.5 * m["kungfud_store_capacity_bytes"]
    assert m["kungfud_quota_agent_bytes_limit"] == 24 * 1024 * 1024 // 10
    await _close(*ms, v)


@pytest.mark.rules("R12-11", "L4-3", "L4-5")
@pytest.mark.lmdb_only(
    "fills an 8 MiB map with 255 KiB of one repeated character, which PostgreSQL compresses; "
    "its reserve (capacity_mb) is tests/store/test_quota.py's"
)
async def test_R12_11_a_nearly_full_store_refuses_agents_but_deadlines_and_operators_still_commit(make_daemon):
    d = make_daemon(
        "[storage]\nmap_size_mb = 8\nreserve_percent = 25\n"
        "[limits]\nmax_bytes_per_agent = 0\nmax_store_percent_per_agent = 0\n",
        test_clock=True,  # the deadline passes when the test says: after the store is full, however long that took
    )
    lead, lkey = await register(d.url, "lead")
    worker, wkey = await register(d.url, "worker")
    _, mkey = await register(d.url, "mallory")
    a, w = await Client.connect(d.url, lkey), await Client.connect(d.url, wkey)
    admin = await Client.connect(d.url, d.admin_key)
    t = (await a.act("thread.create", {}))["thread"]
    grant = await a.act("thread.admit", {"thread": t, "role": "speaker"})
    await w.act("thread.join", {"token": grant["token"]})
    asg = (await a.act("thread.post", {"thread": t, "content": {"text": "work"}, "assign": {
        "to": worker, "content": {"criteria": "done"}, "deliver_within_s": 600}}))["assignment"]
    await w.act("assignment.take", {"assignment": asg})
    asked = [(await a.act("thread.post", {"thread": t, "content": {"q": str(i)}, "ask": [worker]}))["entry"]
             for i in range(3)]  # requests stocked up while there is room (round 4 finding 5)

    ms = await _clients(d, mkey)
    mem = (await ms[0].act("memory.create", {"content": {"t": BLOB}}))["memory"]
    _, err = await _fill(ms, mem)
    assert (err["code"], err.get("rule")) == ("unavailable", "R12-11"), err
    assert "nearly full" in err["reason"] and "reserve_percent" in err["reason"], err
    size = 128 * 1024  # then up to the line with smaller versions, as the review did
    while size >= 512:
        r = await ms[0].request("memory.update", {"memory": mem, "content": {"t": "y" * size}}, key=new_key())
        if not r["ok"]:
            assert r["error"]["code"] == "unavailable" and "nearly full" in r["error"]["reason"], r
            size //= 2
    r = await a.request("memory.create", {"content": {"a": "z" * 1024}}, key=new_key())  # every ordinary agent
    assert not r["ok"] and r["error"]["code"] == "unavailable" and "nearly full" in r["error"]["reason"], r
    # An exit's note is content: refused in the reserve (D325); the exit without it ends the request.
    for e in asked:
        r = await w.request("thread.handle", {"thread": t, "entry": e, "content": {"note": "n" * 1000}}, key=new_key())
        assert not r["ok"] and (r["error"]["code"], r["error"]["next"]) == ("unavailable", "revise"), r
        await w.act("thread.handle", {"thread": t, "entry": e})
    # The operator still acts.
    made = await admin.request("admin.agent.create", {"content": {"name": "helper"}}, key=new_key())
    assert made["ok"], made
    assert (await a.read("assignment.get", {"assignment": asg}))["state"] == "taken"  # its deadline still ahead
    # And the deadline still ends the work (L4-3): its fact commits in the reserve.
    d.advance_clock(600.5)  # past deliver_within_s: the next read wakes the deadline clock
    deadline = time.monotonic() + 60
    while (state := (await a.read("assignment.get", {"assignment": asg}))["state"]) == "taken":
        assert time.monotonic() < deadline, "the deadline fact never committed"
        await asyncio.sleep(0.2)
    assert state == "timed_out", state
    m = _metrics(d.url)
    assert m['kungfud_quota_refusals_total{limit="reserve"}'] >= 2
    assert m["kungfud_store_reserve_bytes"] == 8 * 1024 * 1024 // 4
    await _close(a, w, admin, *ms)


@pytest.mark.rules("L4-1", "L4-4", "R12-11")
async def test_L4_1_an_agent_at_its_limit_still_exits_its_obligations_on_its_own(make_daemon):
    """Handle, drop and leave end an agent's obligations without anyone else
    (L4-1, L4-4): the capacity limit, which only the operator can raise, must
    not take them away. Everything else it would write is refused."""
    d = make_daemon("[limits]\nmax_bytes_per_agent = 1048576\n")
    lead, lkey = await register(d.url, "lead")
    mallory, mkey = await register(d.url, "mallory")
    a, m = await Client.connect(d.url, lkey), await Client.connect(d.url, mkey)
    t = (await a.act("thread.create", {}))["thread"]
    grant = await a.act("thread.admit", {"thread": t, "role": "speaker"})
    await m.act("thread.join", {"token": grant["token"]})
    asked = (await a.act("thread.post", {"thread": t, "content": {"q": "?"}, "ask": [mallory]}))["entry"]
    asg = (await a.act("thread.post", {"thread": t, "content": {"text": "work"}, "assign": {
        "to": mallory, "content": {"criteria": "done"}}}))["assignment"]
    await m.act("assignment.take", {"assignment": asg})
    asked2 = (await a.act("thread.post", {"thread": t, "content": {"q": "??"}, "ask": [mallory]}))["entry"]
    mem = (await m.act("memory.create", {"content": {"t": BLOB}}))["memory"]
    _, err = await _fill([m], mem)
    assert err["code"] == "rate_limited", err
    size = 128 * 1024  # up to the limit, as the review did
    while size >= 16:
        r = await m.request("memory.update", {"memory": mem, "content": {"t": "y" * size}}, key=new_key())
        if not r["ok"]:
            assert r["error"]["code"] == "rate_limited", r
            size //= 2
    r = await m.request("thread.post", {"thread": t, "content": {"text": "hi"}}, key=new_key())
    assert not r["ok"] and r["error"]["code"] == "rate_limited", r
    # A note is content: refused like any write (D325, reviews/security.md round 4 finding 5) ...
    r = await m.request("thread.handle", {"thread": t, "entry": asked, "content": {"note": "n" * 1000}}, key=new_key())
    assert not r["ok"] and (r["error"]["code"], r["error"]["next"]) == ("rate_limited", "revise"), r
    assert "without the note" in r["error"]["reason"]
    # ... and its own exits still commit, the first taking it past its limit.
    await m.act("thread.handle", {"thread": t, "entry": asked})
    await m.act("assignment.drop", {"assignment": asg})
    await m.act("thread.leave", {"thread": t})
    got = await a.read("thread.entry", {"thread": t, "entry": asked2})
    assert all(r["state"] != "pending" for r in got["responses"]), got  # the leave ended it
    assert (await a.read("assignment.get", {"assignment": asg}))["state"] == "dropped"
    await _close(a, m)
    d.stop()
    r = _check(d)
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout + r.stderr
