"""The a2a_task event and push notifications (WIRE.md 1.3 "A2A"): one event
per A2A-visible change, to the author, content-free, only for `subscribe {a2a:
true}`; a push config hears each change of its Task, in order, with its own
headers and no credentials or participant text in the body."""

from __future__ import annotations

import asyncio
import pytest

from kungfud.client import Client

from .helpers import agent_client
from .test_a2a_ops import E, msg, pair, take_and_deliver
from .webhook_kit import Receiver


async def frames(c: Client, n: int, timeout: float = 20.0) -> list[dict]:
    out = []
    async def take():
        async for ev in c.events():
            out.append(ev)
            if len(out) >= n:
                return
    await asyncio.wait_for(take(), timeout)
    return out


@pytest.mark.rules("R8-20", "R9-16")
async def test_a2a_task_events_follow_each_change_to_the_author_only_when_asked(daemon):
    client, c, worker, w = await pair(daemon.url)
    sub = await client.request("subscribe", {"a2a": True})
    assert sub["ok"], sub
    task = (await client.act("a2a.send", {"to": w, "message": msg("go", "ev-1", extensions=[E])}))["task"]
    e = await take_and_deliver(worker, task, {"text": "done"})
    await client.act("a2a.send", {"to": w, "message": msg("ok", "ev-2", taskId=task, metadata={E: {"verdict": "adopt"}})})
    got = [f for f in await frames(client, 6) if f["event"] == "a2a_task"]
    # SUBMITTED (1), WORKING (2), INPUT_REQUIRED (3), COMPLETED (4)
    assert [(g["data"]["state"], g["data"]["generation"]) for g in got] == [
        ("TASK_STATE_SUBMITTED", 1), ("TASK_STATE_WORKING", 2), ("TASK_STATE_INPUT_REQUIRED", 3),
        ("TASK_STATE_COMPLETED", 4),
    ]
    assert all(set(g["data"]) == {"task", "state", "generation", "at"} and g["data"]["task"] == task for g in got)
    seqs = [g["seq"] for g in got]
    assert seqs == sorted(seqs)
    final = await client.read("a2a.task", {"task": task})
    assert final["metadata"][E]["generation"] == got[-1]["data"]["generation"]
    # Without the opt-in a replay passes over them (the author's turn events still come).
    assert (await client.request("subscribe", {"since": 0}))["ok"]
    kinds = [f["event"] for f in await quiet(client)]
    assert "turn" in kinds and "a2a_task" not in kinds, kinds
    assert e


async def quiet(c: Client, idle: float = 1.0) -> list[dict]:
    """Every event frame until none arrives for ``idle`` seconds."""
    out = []
    it = c.events().__aiter__()
    while True:
        try:
            out.append(await asyncio.wait_for(it.__anext__(), idle))
        except asyncio.TimeoutError:
            return out


@pytest.mark.rules("R8-20")
async def test_push_config_receives_each_status_update_with_its_own_headers(make_daemon):
    receiver = await Receiver().start()
    try:
        d = make_daemon('[webhooks]\nallow_hosts = ["127.0.0.1"]\nretry_pauses_s = [0.2]\n')
        client, c, worker, w = await pair(d.url)
        conf = {"taskPushNotificationConfig": {"url": receiver.url, "token": "tok-1",
                                               "authentication": {"scheme": "Bearer", "credentials": "s3cret"}}}
        made = await client.act("a2a.send", {"to": w, "message": msg("secret words", "pu-1", extensions=[E]),
                                             "configuration": conf})
        task = made["task"]
        await take_and_deliver(worker, task, {"text": "participant output"})
        await client.act("a2a.send", {"to": w, "message": msg("ok", "pu-2", taskId=task, metadata={E: {"verdict": "adopt"}})})
        await receiver.wait(lambda: len(receiver.ok()) >= 4)
        posts = receiver.ok()
        states = [p.json["statusUpdate"]["status"]["state"] for p in posts]
        assert states == ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_INPUT_REQUIRED", "TASK_STATE_COMPLETED"]
        first = posts[0]
        assert first.headers["content-type"] == "application/a2a+json"
        assert first.headers["authorization"] == "Bearer s3cret"
        assert first.headers["x-a2a-notification-token"] == "tok-1"
        assert first.headers["webhook-id"] and first.headers["webhook-timestamp"] and "webhook-signature" not in first.headers
        body = first.json["statusUpdate"]
        assert body["taskId"] == task and body["contextId"] == made["context"]
        text = b"".join(p.body for p in posts)
        assert b"secret words" not in text and b"participant output" not in text and b"s3cret" not in text
        # Ended with the terminal event: listed no more, nothing further sent.
        assert (await client.read("a2a.push.list", {"task": task}))["items"] == []
        await asyncio.sleep(1.5)
        assert len(receiver.ok()) == 4
    finally:
        await receiver.close()


@pytest.mark.rules("L1-1", "L1-4")
async def test_check_rebuilds_every_a2a_state_table_and_event(make_daemon):
    """Cards, markers, contexts, push configs, the a2a_push table and the
    a2a_task events all follow from the facts: `kungfud check` agrees."""
    import subprocess
    import sys
    from pathlib import Path

    d = make_daemon('[webhooks]\nallow_hosts = ["127.0.0.1"]\n')
    client, c, worker, w = await pair(d.url)
    conf = {"taskPushNotificationConfig": {"url": "http://127.0.0.1:9/p"}}
    t1 = (await client.act("a2a.send", {"to": w, "message": msg("a", "ck-1", extensions=[E]), "configuration": conf}))["task"]
    await take_and_deliver(worker, t1, {"text": "x"})
    await client.act("a2a.send", {"to": w, "message": msg("no", "ck-2", taskId=t1, metadata={E: {"verdict": "reject"}})})
    t2 = (await client.act("a2a.send", {"to": w, "message": msg("b", "ck-3")}))["task"]
    await client.act("a2a.cancel", {"task": t2})
    await client.close()
    await worker.close()
    d.stop()
    r = subprocess.run([sys.executable, "-m", "kungfud", "check", *d.store_args],
                       cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout + r.stderr


@pytest.mark.rules("R8-20")
async def test_a_webhook_naming_a2a_task_hears_them_and_a_default_one_does_not(make_daemon):
    named, default = await Receiver().start(), await Receiver().start()
    try:
        d = make_daemon('[webhooks]\nallow_hosts = ["127.0.0.1"]\n')
        client, c, worker, w = await pair(d.url)
        other, o = await agent_client(d.url, "other")
        await client.act("webhook.set", {"url": named.url, "events": ["a2a_task"]})
        await other.act("webhook.set", {"url": default.url})
        task = (await client.act("a2a.send", {"to": w, "message": msg("go", "wh-1")}))["task"]
        await other.act("a2a.send", {"to": w, "message": msg("go", "wh-2")})
        await worker.act("task.take", {"task": task})
        await named.wait(lambda: len(named.ok()) >= 2)
        events = [p.json for p in named.ok()]
        assert [(e["event"], e["data"]["state"]) for e in events[:2]] == [
            ("a2a_task", "TASK_STATE_SUBMITTED"), ("a2a_task", "TASK_STATE_WORKING")]
        await asyncio.sleep(1.0)
        assert all(p.json["event"] != "a2a_task" for p in default.posts)
    finally:
        await named.close()
        await default.close()
