"""Webhooks over a real daemon (WIRE.md 1.2): ``webhook.set/get/clear``, the
secret shown once, signed POSTs to a real HTTP receiver in this process, in
seq order; a SIGKILL mid-backlog resumes from the first event not
acknowledged; failing then disabled on a shortened schedule; cleared by
deactivation and key reset; refused URLs; metrics; and, on two nodes, the
node that delivers killed while another takes over."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import urllib.request

import pytest

from kungfud.client import Client
from tests.cluster import _kill9, wait_for
from tests.e2e.helpers import check_failure, register
from tests.e2e.webhook_kit import Receiver

CONFIG = '[webhooks]\nallow_hosts = ["127.0.0.1:*"]\nretry_pauses_s = [0.2]\n'


async def _pair(url: str) -> tuple[Client, Client, str, str, str]:
    """A asks, B (which holds the webhook) is asked: every ask is a turn event of B."""
    a, ka = await register(url, "asker")
    b, kb = await register(url, "hooked")
    ca, cb = await Client.connect(url, ka), await Client.connect(url, kb)
    ca.agent_key = ka  # type: ignore[attr-defined]
    t = (await ca.act("thread.create", {"content": {"title": "hooks"}}))["thread"]
    g = await ca.act("thread.admit", {"thread": t, "role": "speaker"})
    await cb.act("thread.join", {"token": g["token"]})
    return ca, cb, t, b, kb


async def _ask(ca: Client, t: str, b: str, n: int = 1) -> None:
    for _ in range(n):
        await ca.act("thread.post", {"thread": t, "content": {"q": "?"}, "ask": [b]})


def _seqs(posts) -> list[int]:
    return [p.json["seq"] for p in posts]


async def _close(*clients: Client) -> None:
    """Every connection a test opened, closed before its loop ends: one left open
    holds the daemon's stop for its close timeout (5 s) at teardown."""
    for c in clients:
        await c.close()


@pytest.mark.rules("R8-20", "L3-2")
def test_set_get_deliver_signed_in_order_and_clear(make_daemon):
    sw = pytest.importorskip("standardwebhooks.webhooks")
    d = make_daemon(CONFIG)

    async def go():
        rx = await Receiver().start()
        ca, cb, t, b, _ = await _pair(d.urls[0])
        assert await cb.read("webhook.get", {}) == {"url": None}
        r = await cb.act("webhook.set", {"url": rx.url}, key="set-1")
        assert r["url"] == rx.url and r["events"] == ["turn", "opportunity", "outcome"] and r["secret"].startswith("whsec_")
        since = r["since"]
        again = await cb.request("webhook.set", {"url": rx.url}, key="set-1")
        assert again["result"]["secret"] is None and again.get("replayed") is True  # shown once (L3-2)
        await _ask(ca, t, b, 5)
        await rx.wait(lambda: len(rx.ok()) >= 5)
        seqs = _seqs(rx.ok())
        assert seqs == sorted(seqs) and seqs[0] > since
        verifier = sw.Webhook(r["secret"])
        for p in rx.ok():
            body = verifier.verify(p.body, p.headers)
            assert body["agent"] == b and body["event"] == "turn" and p.id == f"{b}.{body['seq']}"
            assert p.headers["content-type"] == "application/json"
        await asyncio.sleep(0.3)  # the acknowledged position is written in batches
        got = await cb.read("webhook.get", {})
        assert got["state"] == "active" and got["delivered_seq"] == seqs[-1] and got["pending"] == 0
        assert "secret" not in got
        assert (await cb.act("webhook.clear", {})) == {"cleared": True}
        assert await cb.read("webhook.get", {}) == {"url": None}
        before = len(rx.posts)
        await _ask(ca, t, b, 2)
        await asyncio.sleep(0.5)
        assert len(rx.posts) == before
        metrics = urllib.request.urlopen(d.urls[0].replace("ws://", "http://").rsplit("/", 1)[0] + "/metrics").read().decode()
        assert "kungfud_webhook_deliveries_total 5" in metrics or "kungfud_webhook_deliveries_total" in metrics
        assert "kungfud_webhook_oldest_undelivered_seconds" in metrics
        await rx.close()
        await _close(ca, cb)
        return r["secret"]

    secret = asyncio.run(go())
    # The audit log has a line per set and clear; the secret is in no log line.
    logs = "".join(p.read_text() for p in d.log_paths)
    assert '"op":"webhook.set"' in logs and '"op":"webhook.clear"' in logs
    assert secret not in logs and secret[6:] not in logs


def test_refused_urls_are_bad_requests_naming_the_setting(make_daemon):
    d = make_daemon(CONFIG)

    async def go():
        _, kb = await register(d.urls[0], "x")
        cb = await Client.connect(d.urls[0], kb)
        for url in ("https://169.254.169.254/latest", "https://[::1]/h", "https://10.1.2.3/h", "http://example.com/h",
                    "https://localhost/h", "ftp://example.com/h"):
            resp = await cb.request("webhook.set", {"url": url}, key=url)
            err = check_failure(resp, "bad_request")
            assert "allow_hosts" in err["reason"] or "https://" in err["reason"], err
        resp = await cb.request("webhook.set", {"url": "https://example.com/h", "events": ["nope"]}, key="e")
        check_failure(resp, "bad_request")
        await _close(cb)

    asyncio.run(go())


@pytest.mark.rules("R8-20", "L1-4")
def test_sigkill_mid_backlog_resumes_from_first_unacknowledged(make_daemon):
    d = make_daemon(CONFIG)

    async def go():
        rx = await Receiver().start()
        rx.delay = 0.05
        ca, cb, t, b, kb = await _pair(d.urls[0])
        await cb.act("webhook.set", {"url": rx.url})
        await _ask(ca, t, b, 40)
        await rx.wait(lambda: len(rx.ok()) >= 8)
        d.kill()  # SIGKILL mid-backlog (and maybe mid-POST)
        await asyncio.sleep(0.5)  # requests the killed daemon sent before it died reach the receiver first
        n_before = len(rx.posts)
        acked_before = set(_seqs(rx.ok()))
        d.start()
        expected = [e["seq"] for e in await _all_turn_seqs(d.urls[0], kb)]
        assert len(expected) == 40
        await rx.wait(lambda: set(expected) <= set(_seqs(rx.ok())), 60)
        # No event lost; after the restart delivery starts at or before the first
        # event not acknowledged by a 2xx, and goes on in seq order.
        resumed = _seqs([p for p in rx.posts[n_before:] if 200 <= p.status < 300])
        first_missing = min(s for s in expected if s not in acked_before)
        assert resumed and resumed[0] <= first_missing, (resumed[:5], first_missing)
        assert resumed == sorted(resumed)
        assert set(expected) <= acked_before | set(resumed)
        await rx.close()
        await _close(ca, cb)

    asyncio.run(go())


async def _all_turn_seqs(url: str, key: str) -> list[dict]:
    """The agent's events from its durable feed (subscribe since 0)."""
    c = await Client.connect(url, key)
    r = await c.read("subscribe", {"since": 0})
    out = []
    while len(out) < 40:
        ev = await asyncio.wait_for(anext(c.events()), 10)
        if ev["event"] == "turn" and ev["data"]["added"]:
            out.append(ev)
    await c.close()
    return out


@pytest.mark.rules("R8-21")
def test_failing_then_disabled_then_set_again(make_daemon):
    d = make_daemon(CONFIG + "disable_after_s = 1.0\n")

    async def go():
        rx = await Receiver().start()
        rx.status = 500
        ca, cb, t, b, _ = await _pair(d.urls[0])
        await cb.act("webhook.set", {"url": rx.url})
        await _ask(ca, t, b, 2)
        await rx.wait(lambda: len(rx.posts) >= 2)
        got = await cb.read("webhook.get", {})
        # CONFIG opens every port of 127.0.0.1: a failure there reads "failed" only (D328)
        assert got["state"] in ("failing", "disabled") and got["last_error"] == "failed" and "last_attempt_at" in got
        assert got["pending"] == 2
        turn = await cb.read("turn", {})  # R8-21: what the undelivered events point at is in the turn
        assert len([i for i in turn["items"] if i.get("obligation") == "respond"]) == 2
        for _ in range(100):
            got = await cb.read("webhook.get", {})
            if got["state"] == "disabled":
                break
            await asyncio.sleep(0.1)
        assert got["state"] == "disabled"
        n = len(rx.posts)
        await asyncio.sleep(0.6)
        assert len(rx.posts) == n  # nothing more is sent
        assert all(_seqs([p])[0] == _seqs(rx.posts[:1])[0] for p in rx.posts)  # a later event waits for the one before
        rx.status = 200
        await cb.act("webhook.set", {"url": rx.url})  # again: a new registration, from now on
        await _ask(ca, t, b, 1)
        await rx.wait(lambda: len(rx.ok()) >= 1)
        assert (await cb.read("webhook.get", {}))["state"] == "active"
        await rx.close()
        await _close(ca, cb)

    asyncio.run(go())


def test_cleared_by_deactivation_and_by_key_reset(make_daemon):
    d = make_daemon(CONFIG)

    async def go():
        admin = await Client.connect(d.urls[0], d.admin_key)
        opened = [admin]
        for how in ("reset", "deactivate"):
            b, kb = await register(d.urls[0], how)
            cb = await Client.connect(d.urls[0], kb)
            opened.append(cb)
            await cb.act("webhook.set", {"url": "http://127.0.0.1:9/hook"})
            assert (await cb.read("webhook.get", {}))["url"] == "http://127.0.0.1:9/hook"
            if how == "reset":
                r = await admin.act("admin.agent.reset_key", {"agent": b})
                cb = await Client.connect(d.urls[0], r["key"])
            else:
                await admin.act("admin.agent.set_status", {"agent": b, "status": "deactivated"})
                cb = await Client.connect(d.urls[0], kb)
            opened.append(cb)
            assert await cb.read("webhook.get", {}) == {"url": None}
        b, kb = await register(d.urls[0], "kept")
        cb = await Client.connect(d.urls[0], kb)
        await cb.act("webhook.set", {"url": "http://127.0.0.1:9/hook"})  # one endpoint left for check to see
        await _close(*opened, cb)

    asyncio.run(go())
    # The registrations are facts; the `hooks` index is derived: kungfud check rebuilds it from the log.
    assert d.terminate() == 0
    r = subprocess.run([sys.executable, "-m", "kungfud", "check", *d.store_args], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout + r.stderr


def _shard_holder(cluster, agent: str) -> int | None:
    """The node (index into ``urls``) holding the webhook lease of ``agent``'s shard."""
    from kungfud.webhooks.delivery import shard_of

    n = shard_of(agent)
    if cluster.mode == "pg2":
        import psycopg

        from kungfud.nodes.pg import LOCK_FAMILIES

        key = LOCK_FAMILIES["webhooks"] + n
        with psycopg.connect(cluster.store_url, autocommit=True) as conn:
            row = conn.execute(
                "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
                " WHERE l.locktype = 'advisory' AND l.granted AND l.classid = %s AND l.objid = %s",
                (key >> 32, key & 0xFFFFFFFF),
            ).fetchone()
        pid = None if row is None else int(row[0].rsplit("-", 1)[1])
    else:
        pid = cluster._flock_pid(cluster.data_dir / f"webhooks.{n}.lock")
    pids = cluster.pids
    return pids.index(pid) if pid in pids else None


@pytest.mark.parametrize("kind", ["lmdb2", "pg2"])
def test_kill_the_delivering_node_and_another_continues_in_order(make_cluster, kind):
    c = make_cluster(kind, CONFIG)

    async def go():
        rx = await Receiver().start()
        ca, cb, t, b, _ = await _pair(c.urls[0])
        await cb.act("webhook.set", {"url": rx.url})
        await _ask(ca, t, b, 3)
        await rx.wait(lambda: len(rx.ok()) >= 3)
        assert wait_for(lambda: _shard_holder(c, b) is not None, 10)
        holder = _shard_holder(c, b)
        other = 1 - holder
        c.kill_node(holder)
        await asyncio.sleep(0.3)
        n = len(rx.ok())
        first_ca = ca
        ca = await Client.connect(c.urls[other], ca.agent_key)
        await _ask(ca, t, b, 3)
        await rx.wait(lambda: len(rx.ok()) >= n + 3, 20)  # within seconds, by the node still alive
        seqs = _seqs(rx.ok())
        assert sorted(set(seqs)) == sorted(set(seqs), key=seqs.index)  # first deliveries in seq order
        await rx.close()
        await _close(ca, cb, first_ca)

    asyncio.run(go())


@pytest.mark.rules("R8-20")
@pytest.mark.parametrize("kind", ["lmdb2", "pg2"])
def test_an_endpoint_set_on_another_node_is_served_at_once(make_cluster, kind):
    """The runner knows in memory which agents have an endpoint (D272): a
    registration written on the node that does not deliver the agent is
    announced to the one that does, so the next event is POSTed within
    seconds — not at the next sweep (15 s) — even when it is committed on the
    delivering node right after."""
    c = make_cluster(kind, CONFIG)

    async def go():
        rx = await Receiver().start()
        ca, cb, t, b, kb = await _pair(c.urls[0])
        assert wait_for(lambda: _shard_holder(c, b) is not None, 10)
        holder = _shard_holder(c, b)
        cb = await Client.connect(c.urls[1 - holder], kb)
        ca = await Client.connect(c.urls[holder], ca.agent_key)
        await cb.act("webhook.set", {"url": rx.url})
        await _ask(ca, t, b)  # committed where b's webhook is delivered
        await rx.wait(lambda: len(rx.ok()) >= 1, 8)
        await rx.close()

    asyncio.run(go())


@pytest.mark.rules("R8-20")
def test_an_open_task_offered_reaches_a_webhook_at_once(make_daemon):
    """WIRE.md 1.2: a webhook that takes ``task_offered`` hears an open Task
    when it is created — a few seconds, not the runner's next sweep (15 s):
    the open-Task stream is stored once, so its commit names no agent, and
    wakes every agent with an endpoint instead."""
    d = make_daemon(CONFIG)

    async def go():
        rx = await Receiver().start()
        _, ka = await register(d.urls[0], "author")
        b, kb = await register(d.urls[0], "taker")
        ca, cb = await Client.connect(d.urls[0], ka), await Client.connect(d.urls[0], kb)
        await cb.act("webhook.set", {"url": rx.url, "events": ["task_offered"]})
        task = (await ca.act("task.create", {"audience": "open", "contract": {"content": {"output": "a haiku", "criteria": "5-7-5"}}}))["task"]
        await rx.wait(lambda: len(rx.ok()) >= 1, 8)
        body = rx.ok()[0].json
        assert body["agent"] == b and body["event"] == "task_offered" and body["data"]["task"] == task
        await ca.close()
        await cb.close()
        await rx.close()

    asyncio.run(go())


def test_set_again_during_a_long_pause_is_used_at_the_next_event(make_daemon):
    d = make_daemon('[webhooks]\nallow_hosts = ["127.0.0.1:*"]\nretry_pauses_s = [60]\n')

    async def go():
        bad, good = await Receiver().start(), await Receiver().start()
        bad.status = 500
        ca, cb, t, b, _ = await _pair(d.urls[0])
        await cb.act("webhook.set", {"url": bad.url})
        await _ask(ca, t, b)
        await bad.wait(lambda: len(bad.posts) >= 1)  # failed: the next attempt is 60 s away
        await cb.act("webhook.set", {"url": good.url})
        await _ask(ca, t, b)
        await good.wait(lambda: len(good.ok()) >= 1, 10)  # not after the old endpoint's pause
        assert len(bad.posts) == 1
        await bad.close()
        await good.close()
        await _close(ca, cb)

    asyncio.run(go())


def test_a_slow_receiver_does_not_hold_up_another_agents_deliveries(make_daemon):
    d = make_daemon(CONFIG)

    async def go():
        slow, fast = await Receiver().start(), await Receiver().start()
        slow.delay = 8.0  # answers within the 10 s, slowly
        ca, cb, t, b, _ = await _pair(d.urls[0])
        c2, k2 = await register(d.urls[0], "other")
        cc = await Client.connect(d.urls[0], k2)
        g = await ca.act("thread.admit", {"thread": t, "role": "speaker"})
        await cc.act("thread.join", {"token": g["token"]})
        await cb.act("webhook.set", {"url": slow.url})
        await cc.act("webhook.set", {"url": fast.url})
        await _ask(ca, t, b, 3)  # b's first POST waits 8 s; the others wait for it
        for _ in range(5):
            await _ask(ca, t, c2)
        await fast.wait(lambda: len(fast.ok()) >= 5, 5)  # long before the slow receiver answers
        assert len(slow.posts) == 0  # still waiting on its first
        await slow.close()
        await fast.close()
        await _close(ca, cb, cc)

    asyncio.run(go())
