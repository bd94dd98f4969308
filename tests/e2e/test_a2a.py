"""A2A end to end (issue 34 §6, WIRE.md 1.3 "A2A"): the STOCK a2a-sdk client
(pinned in the test extra) against a real daemon, a worker over /v1
(kungfud.client) that takes and delivers. Runs in every node mode: on lmdb2 and
pg2 the A2A calls of one test go to different nodes."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from a2a.types import CancelTaskRequest, GetTaskRequest, SubscribeToTaskRequest
from a2a.utils.errors import TaskNotFoundError

from kungfud.a2a.card import EXTENSION
from tests.e2e.a2a_kit import published, request, state_of, stock, stock_session, take_and_deliver, task_id_of
from kungfud.client.core import Rejected
from tests.e2e.helpers import agent_client

DONE = ("TASK_STATE_COMPLETED", "TASK_STATE_CANCELED", "TASK_STATE_INPUT_REQUIRED")


async def _states(stream, until: str, seen: list[str], ids: list[str] | None = None) -> None:
    async for ev in stream:
        s = state_of(ev)
        if ids is not None and (ev.HasField("task") or ev.HasField("status_update")):
            ids.append(task_id_of(ev))
        if s is not None:
            seen.append(s)
            if s == until:
                return


async def test_the_card_resolves_with_the_stock_client(daemon):
    worker, agent, base = await published(daemon.url, "Card worker")
    async with httpx.AsyncClient() as http:
        from a2a.client import A2ACardResolver

        card = await A2ACardResolver(http, base).get_agent_card()
    assert card.name == "Card worker"
    assert [i.protocol_binding for i in card.supported_interfaces] == ["JSONRPC", "HTTP+JSON"]
    assert card.supported_interfaces[0].url == base
    assert card.capabilities.streaming and card.capabilities.push_notifications
    assert card.capabilities.extensions[0].uri == EXTENSION
    await worker.close()


@pytest.mark.rules("R7.3-18")
async def test_a_stream_reaches_completed_through_deadline_judging(clocked_daemon):
    d = clocked_daemon
    async with stock_session(d, via=d.a2a_urls[-1]) as s:  # the other node, on lmdb2/pg2
        seen: list[str] = []
        ids: list[str] = []

        async def work() -> None:
            while not ids:
                await asyncio.sleep(0.05)
            await take_and_deliver(s.worker, ids[0])
            await asyncio.sleep(1.0)
            d.advance_clock(30)  # past judge_within_s = [a2a] auto_adopt_s: adopted as the contract says

        w = asyncio.ensure_future(work())
        await asyncio.wait_for(_states(s.client.send_message(request()), "TASK_STATE_COMPLETED", seen, ids), 60)
        await w
        assert seen[0] == "TASK_STATE_SUBMITTED" and seen[-1] == "TASK_STATE_COMPLETED"
        assert "TASK_STATE_WORKING" in seen and "TASK_STATE_INPUT_REQUIRED" not in seen
        task = await s.client.get_task(GetTaskRequest(id=ids[0]))
        assert task.artifacts and task.artifacts[0].parts[0].text == "three lines"


async def test_judging_with_the_extension_reject_then_adopt(daemon):
    async with stock_session(daemon, "judge", judges=True) as s:
        worker, client = s.worker, s.client
        seen: list[str] = []
        ids: list[str] = []
        w = asyncio.ensure_future(_when(ids, lambda: take_and_deliver(worker, ids[0], "draft")))
        await asyncio.wait_for(_states(client.send_message(request()), "TASK_STATE_INPUT_REQUIRED", seen, ids), 60)
        await w
        tid = ids[0]
        # Reject with a reason: back to SUBMITTED, and the stream stays open through the retry.
        seen2: list[str] = []
        reject = request("too long, three lines please", task_id=tid, metadata={EXTENSION: {"verdict": "reject"}})
        w = asyncio.ensure_future(_later(1.0, lambda: take_and_deliver(worker, tid, "better")))
        await asyncio.wait_for(_states(client.send_message(reject), "TASK_STATE_INPUT_REQUIRED", seen2), 60)
        await w
        assert seen2[0] == "TASK_STATE_SUBMITTED" and seen2[-1] == "TASK_STATE_INPUT_REQUIRED"
        adopt = request("good, thank you", task_id=tid, metadata={EXTENSION: {"verdict": "adopt"}})
        seen3: list[str] = []
        await asyncio.wait_for(_states(client.send_message(adopt), "TASK_STATE_COMPLETED", seen3), 60)
        assert seen3[-1] == "TASK_STATE_COMPLETED"
        task = await client.get_task(GetTaskRequest(id=tid))
        assert [a.parts[0].text for a in task.artifacts][-1] == "better"


async def _when(ids: list, act) -> None:
    while not ids:
        await asyncio.sleep(0.05)
    await act()


async def _later(s: float, act) -> None:
    await asyncio.sleep(s)
    await act()


@pytest.mark.rules("L3-2")
async def test_the_same_message_id_twice_is_one_task(daemon):
    async with stock_session(daemon, streaming=False) as s:
        req = request(message_id="the-one-message", return_immediately=True)
        first = [ev async for ev in s.client.send_message(req)][0].task
        again = [ev async for ev in s.client.send_message(req)][0].task
        assert first.id == again.id
        assert again.metadata[EXTENSION]["receipt"]["replayed"] is True
        assert [t["id"] for t in (await s.caller.read("a2a.tasks", {}))["items"]] == [first.id]


@pytest.mark.timeout_s(180)
@pytest.mark.parametrize("streaming", [True, False])
async def test_a_silent_phase_of_7_s_on_the_default_5_s_client(daemon, streaming):
    """The worker says nothing for 7 s: comments (streams) and leading spaces
    (blocking answers) keep the stock client's 5 s read timeout from firing."""
    async with stock_session(daemon, judges=True, streaming=streaming) as s:
        assert s.http.timeout.read == 5.0
        seen: list[str] = []
        ids: list[str] = []

        async def work() -> None:
            tid = await _new_task(s.caller, ids)
            await take_and_deliver(s.worker, tid, silent_s=7.0)

        w = asyncio.ensure_future(work())
        await asyncio.wait_for(_states(s.client.send_message(request()), "TASK_STATE_INPUT_REQUIRED", seen, ids), 90)
        await w
        assert seen[-1] == "TASK_STATE_INPUT_REQUIRED"


async def _new_task(caller, ids: list) -> str:
    """The Task the caller's send created (a blocking send shows it only at the end)."""
    while True:
        if ids:
            return ids[0]
        page = await caller.read("a2a.tasks", {})
        if page["items"]:
            return page["items"][0]["id"]
        await asyncio.sleep(0.1)


async def test_subscribe_after_a_disconnect_goes_on_to_the_end(daemon):
    async with stock_session(daemon, judges=True) as s:
        stream = s.client.send_message(request())
        first = await asyncio.wait_for(anext(stream), 30)
        tid = task_id_of(first)
        await stream.aclose()  # the caller goes away
        await take_and_deliver(s.worker, tid)
        seen: list[str] = []
        await asyncio.wait_for(
            _states(s.client.subscribe(SubscribeToTaskRequest(id=tid)), "TASK_STATE_INPUT_REQUIRED", seen), 60)
        assert seen[-1] == "TASK_STATE_INPUT_REQUIRED"


async def test_cancel_before_a_take_is_canceled(daemon):
    from a2a.types import TaskState

    async with stock_session(daemon, streaming=False) as s:
        task = [ev async for ev in s.client.send_message(request(return_immediately=True))][0].task
        other, other_http = await stock(s.base, s.caller.key, streaming=False, via=daemon.a2a_urls[-1])  # lmdb2/pg2: another node
        canceled = await other.cancel_task(CancelTaskRequest(id=task.id))
        await other.close()
        await other_http.aclose()
        assert TaskState.Name(canceled.status.state) == "TASK_STATE_CANCELED"
        assert TaskState.Name((await s.client.get_task(GetTaskRequest(id=task.id))).status.state) == "TASK_STATE_CANCELED"
        with pytest.raises(Rejected) as refused:  # no new engagement, for good
            await s.worker.act("task.take", {"task": task.id})
        assert refused.value.code == "conflict"


async def test_list_tasks_with_the_stock_client_newest_change_first_paged(daemon):
    """ListTasks (WIRE.md 1.3: `a2a.tasks`, newest change first, paged by
    cursor, `nextPageToken` "" at the end): a Task canceled after the others
    comes first, pages neither skip nor repeat, and A2A's `historyLength` and
    `statusTimestampAfter` are honoured (D410, D414)."""
    from a2a.types import ListTasksRequest

    async with stock_session(daemon, streaming=False) as s:
        made = [[ev async for ev in s.client.send_message(request(f"task {i}", return_immediately=True))][0].task.id
                for i in range(3)]
        canceled = await s.client.cancel_task(CancelTaskRequest(id=made[0]))
        first = await s.client.list_tasks(ListTasksRequest(page_size=2))
        assert [t.id for t in first.tasks] == [made[0], made[2]] and first.next_page_token
        rest = await s.client.list_tasks(ListTasksRequest(page_size=2, page_token=first.next_page_token))
        assert [t.id for t in rest.tasks] == [made[1]] and rest.next_page_token == ""
        assert all(t.history for t in first.tasks)
        bare = await s.client.list_tasks(ListTasksRequest(history_length=0))
        assert [t.id for t in bare.tasks] == [made[0], made[2], made[1]] and not any(t.history for t in bare.tasks)
        later = ListTasksRequest()
        later.status_timestamp_after.CopyFrom(canceled.status.timestamp)
        assert list((await s.client.list_tasks(later)).tasks) == []
        since = ListTasksRequest()
        since.status_timestamp_after.FromSeconds(0)
        assert len((await s.client.list_tasks(since)).tasks) == 3


@pytest.mark.rules("R12-9")
async def test_another_callers_task_is_not_found(daemon):
    worker, _, base = await published(daemon.url)
    alice, _ = await agent_client(daemon.url, "alice")
    bob, _ = await agent_client(daemon.url, "bob")
    a, ha = await stock(base, alice.key, streaming=False)
    b, hb = await stock(base, bob.key, streaming=False)
    task = [ev async for ev in a.send_message(request(return_immediately=True))][0].task
    with pytest.raises(TaskNotFoundError) as theirs:
        await b.get_task(GetTaskRequest(id=task.id))
    with pytest.raises(TaskNotFoundError) as none:
        await b.get_task(GetTaskRequest(id="tk_" + "0" * 26))
    assert str(theirs.value).replace(task.id, "X") == str(none.value).replace("tk_" + "0" * 26, "X")
    assert str(theirs.value).startswith("not_found: ")
    for c in (a, b):
        await c.close()
    for h in (ha, hb):
        await h.aclose()
    for c in (worker, alice, bob):
        await c.close()


async def test_raw_errors_401_404_and_version(daemon):
    worker, agent, base = await published(daemon.url)
    caller, _ = await agent_client(daemon.url, "caller")
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "tk_x"}}
    async with httpx.AsyncClient() as http:
        r = await http.post(base, json=body, headers={"A2A-Version": "1.0"})
        assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")
        nobody = base.replace(agent, "ag_" + "0" * 26)
        r1 = await http.post(nobody, json=body, headers={"Authorization": f"Bearer {caller.key}"})
        await worker.act("a2a.card.clear", {})
        r2 = await http.get(base + "/.well-known/agent-card.json")
        assert (r1.status_code, r1.content) == (r2.status_code, r2.content) and r1.status_code == 404
        await worker.act("a2a.card.set", {"content": {"name": "w", "description": "d"}})
        r = await http.post(base, json=body, headers={"Authorization": f"Bearer {caller.key}"})
        assert r.status_code == 200 and r.json()["error"]["code"] == -32009
    await worker.close()
    await caller.close()


@pytest.mark.timeout_s(180)
async def test_kill_9_mid_task_the_task_and_its_stream_go_on(make_daemon):
    """kill -9 of every daemon process while the worker holds the Task: after
    the restart the engagement is still the worker's, it delivers, and the
    caller's stream, reconnected with SubscribeToTask, goes on to the end."""
    from kungfud.client import Client

    d = make_daemon()
    worker, agent, base = await published(d.url)
    worker_key = worker.key
    caller, _ = await agent_client(d.url, "caller")
    client, http = await stock(base, caller.key, judges=True)
    stream = client.send_message(request())
    tid = task_id_of(await asyncio.wait_for(anext(stream), 30))
    took = await worker.act("task.take", {"task": tid})
    seen: list[str] = []
    d.kill()
    try:  # the daemon died under the open stream: it ends with an error, not a hang
        await asyncio.wait_for(_states(stream, "TASK_STATE_INPUT_REQUIRED", seen), 20)
    except Exception as e:
        assert not isinstance(e, asyncio.TimeoutError), "the stream of a killed daemon hung"
    else:
        raise AssertionError(f"the stream went on without its daemon: {seen}")
    for c in (client, worker, caller):
        await c.close()
    await http.aclose()
    d.start()
    base = d.a2a_url + f"/a2a/agents/{agent}"  # a restart listens on new free ports
    async with await Client.connect(d.url, worker_key) as w:
        client, http = await stock(base, caller.key, judges=True)
        again = client.subscribe(SubscribeToTaskRequest(id=tid))
        first = await asyncio.wait_for(anext(again), 30)
        assert state_of(first) == "TASK_STATE_WORKING"  # taken before the crash, still the worker's
        await w.act("task.deliver", {"engagement": took["engagement"], "content": {"text": "after the crash"}})
        await asyncio.wait_for(_states(again, "TASK_STATE_INPUT_REQUIRED", seen), 60)
        task = await client.get_task(GetTaskRequest(id=tid))
        assert task.artifacts[-1].parts[0].text == "after the crash"
    await client.close()
    await http.aclose()


async def test_a_caller_flooding_an_agent_is_rate_limited_with_retry_after(make_daemon):
    """The /v1 action rate limit is the A2A caller's too (Intake admission):
    -32000 over JSON-RPC, 429 with Retry-After over HTTP+JSON; another caller
    is served meanwhile."""
    d = make_daemon("[limits]\nactions_per_minute = 3\n")
    worker, _, base = await published(d.url)
    flood, _ = await agent_client(d.url, "flood")
    other, _ = await agent_client(d.url, "other")
    v1 = {"A2A-Version": "1.0"}

    def msg(i: int) -> dict:
        return {"message": {"messageId": f"m{i}", "role": "ROLE_USER", "parts": [{"text": "work"}]},
                "configuration": {"returnImmediately": True}}

    async with httpx.AsyncClient(headers={**v1, "Authorization": f"Bearer {flood.key}"}) as http:
        codes = []
        for i in range(6):
            r = await http.post(base, json={"jsonrpc": "2.0", "id": i, "method": "SendMessage", "params": msg(i)})
            codes.append(r.json().get("error", {}).get("code"))
        assert codes[0] is None and -32000 in codes, codes
        r = await http.post(base + "/message:send", json=msg(99))
        assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1
        assert r.json()["error"]["details"][0]["reason"] == "RATE_LIMITED"
        assert r.json()["error"]["message"].startswith("rate_limited: ")
    async with httpx.AsyncClient(headers={**v1, "Authorization": f"Bearer {other.key}"}) as http:
        r = await http.post(base + "/message:send", json=msg(1))
        assert r.status_code == 200 and r.json()["task"]["id"].startswith("tk_")
    for c in (worker, flood, other):
        await c.close()


async def test_push_configs_through_the_stock_client_never_show_credentials(make_daemon):
    from a2a.types import (
        AuthenticationInfo, DeleteTaskPushNotificationConfigRequest, GetTaskPushNotificationConfigRequest,
        ListTaskPushNotificationConfigsRequest, TaskPushNotificationConfig,
    )

    d = make_daemon('[webhooks]\nallow_hosts = ["127.0.0.1"]\n')
    worker, _, base = await published(d.url)
    caller, _ = await agent_client(d.url, "caller")
    client, http = await stock(base, caller.key, streaming=False)
    task = [ev async for ev in client.send_message(request(return_immediately=True))][0].task
    made = await client.create_task_push_notification_config(TaskPushNotificationConfig(
        task_id=task.id, url="http://127.0.0.1:9/hook", token="tok-1",
        authentication=AuthenticationInfo(scheme="Bearer", credentials="s3cret-push"),
    ))
    assert made.id and made.task_id == task.id and made.authentication.scheme == "Bearer"
    assert made.authentication.credentials == "" and made.token == "tok-1"
    listed = await client.list_task_push_notification_configs(ListTaskPushNotificationConfigsRequest(task_id=task.id))
    assert [c.id for c in listed.configs] == [made.id]
    got = await client.get_task_push_notification_config(GetTaskPushNotificationConfigRequest(task_id=task.id, id=made.id))
    assert got.url == "http://127.0.0.1:9/hook" and got.authentication.credentials == ""
    raw = await http.get(f"{base}/tasks/{task.id}/pushNotificationConfigs", headers={"A2A-Version": "1.0"})
    assert raw.status_code == 200 and "s3cret-push" not in raw.text
    await client.delete_task_push_notification_config(DeleteTaskPushNotificationConfigRequest(task_id=task.id, id=made.id))
    listed = await client.list_task_push_notification_configs(ListTaskPushNotificationConfigsRequest(task_id=task.id))
    assert list(listed.configs) == []
    await client.close()
    await http.aclose()
    for c in (worker, caller):
        await c.close()


async def test_sigterm_with_open_a2a_streams_exits_0_promptly(make_daemon):
    """A stream no one will end (no worker) does not hold the daemon up: SIGTERM
    stops it with status 0 well within its stop budget, the stream ended."""
    import signal
    import time

    d = make_daemon()
    worker, _, base = await published(d.url)
    caller, _ = await agent_client(d.url, "caller")
    client, http = await stock(base, caller.key)
    stream = client.send_message(request())
    await asyncio.wait_for(anext(stream), 30)
    started = time.monotonic()
    d.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(d.wait, 30) == 0
    assert time.monotonic() - started < 20
    try:  # the stream ended with its daemon: an error or its end, not a hang
        await asyncio.wait_for(anext(stream), 10)
    except asyncio.TimeoutError:
        raise AssertionError("the stream of a stopped daemon hung") from None
    except (StopAsyncIteration, Exception):
        pass
    else:
        raise AssertionError("an event after the daemon stopped")
    await client.close()
    await http.aclose()
    for c in (worker, caller):
        await c.close()


async def test_a_push_config_in_the_send_is_set_on_the_new_task(make_daemon):
    from a2a.types import ListTaskPushNotificationConfigsRequest, TaskPushNotificationConfig

    d = make_daemon('[webhooks]\nallow_hosts = ["127.0.0.1"]\n')
    worker, _, base = await published(d.url)
    caller, _ = await agent_client(d.url, "caller")
    client, http = await stock(base, caller.key, streaming=False)
    req = request(return_immediately=True)
    req.configuration.task_push_notification_config.CopyFrom(TaskPushNotificationConfig(url="http://127.0.0.1:9/in-send"))
    task = [ev async for ev in client.send_message(req)][0].task
    listed = await client.list_task_push_notification_configs(ListTaskPushNotificationConfigsRequest(task_id=task.id))
    assert [c.url for c in listed.configs] == ["http://127.0.0.1:9/in-send"]
    await client.close()
    await http.aclose()
    for c in (worker, caller):
        await c.close()


async def _sse_events(response) -> list[tuple[int, dict]]:
    """(id, data) of each SSE event until the stream ends (comments skipped)."""
    out, fields = [], {}
    async for line in response.aiter_lines():
        if not line:
            if "data" in fields:
                out.append((int(fields["id"]), json.loads(fields["data"])))
            fields = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(": ")
            fields[name] = value
    return out


async def test_last_event_id_replays_every_later_change_of_the_task(daemon):
    worker, _, base = await published(daemon.url)
    caller, _ = await agent_client(daemon.url, "caller")
    headers = {"Authorization": f"Bearer {caller.key}", "A2A-Version": "1.0", "A2A-Extensions": EXTENSION}
    body = {"message": {"messageId": "replay-1", "role": "ROLE_USER", "parts": [{"text": "work"}]}}
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        async with http.stream("POST", base + "/message:stream", json=body) as r:
            lines = r.aiter_lines()
            first = [await anext(lines) for _ in range(2)]  # id:, data: of the snapshot
        snapshot_id = int(first[0].removeprefix("id: "))
        task = json.loads(first[1].removeprefix("data: "))["task"]
        await take_and_deliver(worker, task["id"], "replayed work")
        async with http.stream("GET", f"{base}/tasks/{task['id']}:subscribe",
                               headers={"Last-Event-ID": str(snapshot_id)}) as r:
            events = await asyncio.wait_for(_sse_events(r), 60)
    ids = [i for i, _ in events]
    assert ids == sorted(ids) and ids[0] > snapshot_id
    kinds = [next(iter(d)) for _, d in events]
    assert "task" not in kinds  # a replay sends no snapshot
    states = [d["statusUpdate"]["status"]["state"] for _, d in events if "statusUpdate" in d]
    assert states == ["TASK_STATE_WORKING", "TASK_STATE_INPUT_REQUIRED"], events
    art = [d["artifactUpdate"] for _, d in events if "artifactUpdate" in d]
    assert art and art[0]["artifact"]["parts"][0]["text"] == "replayed work"
    for c in (worker, caller):
        await c.close()
