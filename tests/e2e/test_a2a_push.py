"""A2A push notifications end to end (WIRE.md 1.3 "A2A" → "Push notifications",
issue 34 §6): a push config set through the stock client's send receives a
``statusUpdate`` per A2A-visible change, in order, with its own Authorization
and token and 1.2's webhook-id; content-free; and after a kill -9 of the daemon
mid-task the pushes go on from where they were."""

from __future__ import annotations

from a2a.types import AuthenticationInfo, TaskPushNotificationConfig

from kungfud.a2a.card import EXTENSION
from tests.e2e.a2a_kit import published, request, stock, take_and_deliver
from tests.e2e.helpers import agent_client
from tests.e2e.webhook_kit import Receiver

CONFIG = '[webhooks]\nallow_hosts = ["127.0.0.1"]\nretry_pauses_s = [0.2]\n'


def _states(rx: Receiver) -> list[str]:
    return [p.json["statusUpdate"]["status"]["state"] for p in rx.ok()]


async def _send_with_push(base: str, key: str, rx: Receiver):
    client, http = await stock(base, key, judges=True, streaming=False)
    req = request("Summarise the attached notes", return_immediately=True)
    req.configuration.task_push_notification_config.CopyFrom(TaskPushNotificationConfig(
        url=rx.url, token="tok-7", authentication=AuthenticationInfo(scheme="Bearer", credentials="push-s3cret"),
    ))
    task = [ev async for ev in client.send_message(req)][0].task
    return client, http, task


async def test_a_push_config_receives_status_updates_with_its_own_authorization(make_daemon):
    d = make_daemon(CONFIG)
    rx = await Receiver().start()
    worker, _, base = await published(d.url)
    caller, _ = await agent_client(d.url, "caller")
    client, http, task = await _send_with_push(base, caller.key, rx)
    await take_and_deliver(worker, task.id, "the summary")
    await rx.wait(lambda: "TASK_STATE_INPUT_REQUIRED" in _states(rx), 60)
    states = _states(rx)
    assert states[-1] == "TASK_STATE_INPUT_REQUIRED" and "TASK_STATE_WORKING" in states
    for p in rx.ok():
        assert p.headers["content-type"].startswith("application/a2a+json")
        assert p.headers["authorization"] == "Bearer push-s3cret"
        assert p.headers["x-a2a-notification-token"] == "tok-7"
        assert p.headers["webhook-id"] and p.headers["webhook-timestamp"]
        update = p.json["statusUpdate"]
        assert update["taskId"] == task.id and update["contextId"] == task.context_id
        assert "the summary" not in p.body.decode() and "attached notes" not in p.body.decode()  # content-free
    await client.close()
    await http.aclose()
    for c in (worker, caller):
        await c.close()
    await rx.close()


async def test_pushes_go_on_after_a_kill_9_mid_task(make_daemon):
    from kungfud.client import Client

    d = make_daemon(CONFIG)
    rx = await Receiver().start()
    worker, agent, base = await published(d.url)
    worker_key = worker.key
    caller, _ = await agent_client(d.url, "caller")
    client, http, task = await _send_with_push(base, caller.key, rx)
    took = await worker.act("task.take", {"task": task.id})
    await rx.wait(lambda: "TASK_STATE_WORKING" in _states(rx), 60)
    d.kill()
    before = len(rx.ok())
    for c in (client, worker, caller):
        await c.close()
    await http.aclose()
    d.start()
    async with await Client.connect(d.url, worker_key) as w:
        await w.act("task.deliver", {"engagement": took["engagement"], "content": {"text": "after the crash"}})
    await rx.wait(lambda: "TASK_STATE_INPUT_REQUIRED" in _states(rx), 60)
    assert _states(rx)[-1] == "TASK_STATE_INPUT_REQUIRED"
    gens = [p.json["statusUpdate"]["metadata"][EXTENSION]["generation"] for p in rx.ok()]
    # At least once: after the crash the config's POSTs may start again from one
    # not known to be acknowledged; in order within each run; none lost.
    assert gens[:before] == sorted(gens[:before]) and gens[before:] == sorted(gens[before:])
    assert sorted(set(gens)) == list(range(1, max(gens) + 1)), gens
    await rx.close()
