"""The A2A ops over /v1 (WIRE.md 1.3 "A2A"): the card, work sent as a
restricted Task and taken by a worker over /v1, both judging modes, cancel,
messageId idempotency through the op's key, and reads that answer not_found
with the same bytes for anything the caller did not create through A2A."""

from __future__ import annotations

import pytest

from kungfud.client import Client, new_key
from kungfud.wire import ACTION_OPS

from .helpers import agent_client

E = "urn:kungfud:a2a:kungfu:v1"
CARD = {"name": "Poet", "description": "Writes short poems.", "skills": [
    {"id": "haiku", "name": "Haiku", "description": "A 5-7-5 poem.", "tags": ["poetry"]},
]}


def msg(text: str, mid: str, **kw) -> dict:
    return {"messageId": mid, "role": "ROLE_USER", "parts": [{"text": text}], **kw}


async def publish(worker: Client, **kw) -> dict:
    return await worker.act("a2a.card.set", {"content": CARD, **kw})


async def pair(url: str) -> tuple[Client, str, Client, str]:
    client, c = await agent_client(url, "client")
    worker, w = await agent_client(url, "worker")
    await publish(worker)
    return client, c, worker, w


async def call(c: Client, op: str, args: dict, key: str | None = None) -> dict:
    return await c.request(op, args, key=key or (new_key() if op in ACTION_OPS else None))


async def failure(c: Client, op: str, args: dict, code: str) -> dict:
    resp = await call(c, op, args)
    assert resp["ok"] is False, resp
    assert resp["error"]["code"] == code, resp
    return resp["error"]


@pytest.mark.rules("R7.2-3", "R9-14")
async def test_card_set_get_clear(daemon):
    worker, w = await agent_client(daemon.url, "worker")
    other, o = await agent_client(daemon.url, "other")
    ghost = "ag_" + "0" * 26
    # No card and no agent: the same bytes.
    none = await failure(other, "a2a.card.get", {"agent": w}, "not_found")
    missing = await failure(other, "a2a.card.get", {"agent": ghost}, "not_found")
    assert none["reason"].replace(w, "<id>") == missing["reason"].replace(ghost, "<id>")
    r = await publish(worker, accept={"agents": [o]})
    assert r["agent"] == w and r["card_url"].endswith(f"/a2a/agents/{w}/.well-known/agent-card.json")
    got = await other.read("a2a.card.get", {"agent": w})
    assert got["content"] == CARD and got["accept"] == {"agents": [o]}
    # the card's path; its base is the public_url of the node that answered (two nodes without a
    # shared [a2a] public_url each advertise their own address: docs/a2a.md)
    assert got["card_url"].split("/a2a/", 1)[1] == r["card_url"].split("/a2a/", 1)[1]
    assert (await worker.read("a2a.card.get", {}))["agent"] == w
    assert (await worker.act("a2a.card.clear", {})) == {"cleared": True}
    await failure(other, "a2a.card.get", {"agent": w}, "not_found")


@pytest.mark.rules("R7.2-3", "R7.2-6")
async def test_send_refusals(daemon):
    client, c, worker, w = await pair(daemon.url)
    await failure(worker, "a2a.send", {"to": w, "message": msg("x", "m0")}, "forbidden")  # to oneself
    await failure(client, "a2a.send", {"to": w, "message": {**msg("x", "m1"), "role": "ROLE_AGENT"}}, "bad_request")
    await failure(client, "a2a.send", {"to": w, "message": {**msg("x", "m2"), "parts": [{"text": "a", "url": "b"}]}}, "bad_request")
    ghost = "ag_" + "1" * 26
    a = await failure(client, "a2a.send", {"to": ghost, "message": msg("x", "m3")}, "not_found")
    third, t = await agent_client(daemon.url, "third")  # an agent without a card looks like no agent
    b = await failure(client, "a2a.send", {"to": t, "message": msg("x", "m4")}, "not_found")
    assert a["reason"].replace(ghost, "<id>") == b["reason"].replace(t, "<id>")
    await publish(worker, accept={"agents": [t]})
    await failure(client, "a2a.send", {"to": w, "message": msg("x", "m5")}, "forbidden")


async def take_and_deliver(worker: Client, task: str, content: dict) -> str:
    e = (await worker.act("task.take", {"task": task}))["engagement"]
    await worker.act("task.deliver", {"engagement": e, "content": content})
    return e


@pytest.mark.rules("R7.3-2", "R7.3-16", "R7.3-17", "R9-16")
async def test_client_judging_reject_then_adopt(daemon):
    client, c, worker, w = await pair(daemon.url)
    m = msg("write a haiku", "m-1", extensions=[E], metadata={E: {"deliver_within_s": 600}})
    made = await client.act("a2a.send", {"to": w, "message": m})
    task, ctx = made["task"], made["context"]
    assert made["state"] == "TASK_STATE_SUBMITTED" and task.startswith("tk_") and ctx.startswith("cx_")
    # The worker sees a restricted Task naming it, the criteria the text.
    t = await worker.read("task.get", {"task": task})
    assert t["audience"] == {"agents": [w]} and t["adoption_limit"] == 1 and t["author"] == c
    assert t["contract"]["content"]["criteria"] == "write a haiku"
    got = await client.read("a2a.task", {"task": task})
    assert got["status"]["state"] == "TASK_STATE_SUBMITTED" and got["metadata"][E]["generation"] == 1
    assert got["history"][0]["messageId"] == "m-1" and got["history"][0]["taskId"] == task
    e1 = await take_and_deliver(worker, task, {"text": "first try"})
    got = await client.read("a2a.task", {"task": task})
    assert got["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert got["artifacts"] == [{"artifactId": e1, "name": "delivery", "parts": [{"text": "first try"}]}]
    assert got["metadata"][E]["generation"] == 3
    # Cancel is refused while the delivery awaits the verdict.
    err = await failure(client, "a2a.cancel", {"task": task}, "conflict")
    assert err["reason"].startswith("task not cancelable: ")
    # A message with taskId but no verdict: unsupported.
    err = await failure(client, "a2a.send", {"to": w, "message": msg("more", "m-2", taskId=task)}, "conflict")
    assert err["reason"].startswith("unsupported operation: ")
    # A rejection without text is bad_request; with text, back to SUBMITTED.
    no_text = {"messageId": "m-3", "role": "ROLE_USER", "parts": [{"data": {}}], "taskId": task,
               "metadata": {E: {"verdict": "reject"}}}
    await failure(client, "a2a.send", {"to": w, "message": no_text}, "bad_request")
    rej = await client.act("a2a.send", {"to": w, "message": msg("too long", "m-4", taskId=task, metadata={E: {"verdict": "reject"}})})
    assert rej == {"task": task, "engagement": e1, "verdict": "reject", "state": "TASK_STATE_SUBMITTED"}
    e = await worker.read("engagement.get", {"engagement": e1})
    assert e["state"] == "rejected" and e["judgment"]["content"] == {"reason": "too long"}
    e2 = await take_and_deliver(worker, task, {"a2a": {"parts": [{"text": "old pond"}, {"data": {"n": 1}}]}})
    adopt = await client.act("a2a.send", {"to": w, "message": msg("thanks", "m-5", taskId=task, metadata={E: {"verdict": "adopt"}})})
    assert adopt["state"] == "TASK_STATE_COMPLETED" and adopt["engagement"] == e2
    got = await client.read("a2a.task", {"task": task})
    assert got["status"]["state"] == "TASK_STATE_COMPLETED"
    assert [a["artifactId"] for a in got["artifacts"]] == [e1, e2]
    assert got["artifacts"][1]["parts"] == [{"text": "old pond"}, {"data": {"n": 1}}]
    assert [h["messageId"] for h in got["history"]] == ["m-1", "m-4", "m-5"]
    assert (await client.read("a2a.task", {"task": task, "history_length": 1}))["history"][0]["messageId"] == "m-5"
    assert got["metadata"][E]["generation"] == 7  # created, taken, delivered, rejected, taken, delivered, adopted
    # status.message is structure only: no participant text.
    assert "old pond" not in str(got["status"]) and "haiku" not in str(got["status"])
    # Terminal: a verdict is unsupported; cancel is not cancelable.
    err = await failure(client, "a2a.send", {"to": w, "message": msg("x", "m-6", taskId=task, metadata={E: {"verdict": "adopt"}})}, "conflict")
    assert err["reason"].startswith("unsupported operation: ")
    assert (await failure(client, "a2a.cancel", {"task": task}, "conflict"))["reason"].startswith("task not cancelable: ")


@pytest.mark.rules("R7.3-18", "L4-3")
async def test_deadline_judging_completes(make_daemon):
    d = make_daemon("[a2a]\nauto_adopt_s = 30\n", test_clock=True)
    client, c, worker, w = await pair(d.url)
    made = await client.act("a2a.send", {"to": w, "message": msg("do it", "d-1")})
    task = made["task"]
    t = await worker.read("task.get", {"task": task})
    assert t["contract"]["judge_within_s"] == 30 and t["contract"]["on_no_judgment"] == "adopt"
    await take_and_deliver(worker, task, {"text": "done"})
    got = await client.read("a2a.task", {"task": task})
    assert got["status"]["state"] == "TASK_STATE_WORKING" and got["metadata"][E]["generation"] == 3
    # No verdicts under deadline judging.
    err = await failure(client, "a2a.send", {"to": w, "message": msg("ok", "d-2", taskId=task, metadata={E: {"verdict": "adopt"}})}, "conflict")
    assert err["reason"].startswith("unsupported operation: ")
    d.advance_clock(31)
    got = await client.read("a2a.task", {"task": task})
    assert got["status"]["state"] == "TASK_STATE_COMPLETED" and got["metadata"][E]["generation"] == 4


@pytest.mark.rules("R7.3-21", "R7.3-23")
async def test_cancel_before_take_and_with_open_engagement(daemon):
    client, c, worker, w = await pair(daemon.url)
    t1 = (await client.act("a2a.send", {"to": w, "message": msg("a", "c-1")}))["task"]
    assert await client.act("a2a.cancel", {"task": t1}) == {"task": t1, "state": "TASK_STATE_CANCELED"}
    assert (await failure(worker, "task.take", {"task": t1}, "conflict"))
    await failure(client, "task.resume", {"task": t1}, "conflict")  # for good
    assert (await client.act("a2a.cancel", {"task": t1}))["state"] == "TASK_STATE_CANCELED"  # again: same answer
    t2 = (await client.act("a2a.send", {"to": w, "message": msg("b", "c-2", extensions=[E])}))["task"]
    e = (await worker.act("task.take", {"task": t2}))["engagement"]
    assert await client.act("a2a.cancel", {"task": t2}) == {"task": t2, "state": "TASK_STATE_WORKING"}
    got = await client.read("a2a.task", {"task": t2})
    assert got["status"]["state"] == "TASK_STATE_WORKING" and got["metadata"][E]["canceled"] is True
    # The taker is never cut off: it delivers; the client still judges.
    await worker.act("task.deliver", {"engagement": e, "content": {"text": "done"}})
    assert (await client.read("a2a.task", {"task": t2}))["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    r = await client.act("a2a.send", {"to": w, "message": msg("no", "c-3", taskId=t2, metadata={E: {"verdict": "reject"}})})
    assert r["state"] == "TASK_STATE_CANCELED"


@pytest.mark.rules("L3-2")
async def test_same_message_id_is_one_task(daemon):
    client, c, worker, w = await pair(daemon.url)
    key = f"a2a:{w}:same-1"
    args = {"to": w, "message": msg("once", "same-1")}
    first = await client.act("a2a.send", args, key=key)
    again = await client.act("a2a.send", args, key=key)
    assert again == first and again.replayed
    other = await call(client, "a2a.send", {"to": w, "message": msg("another", "same-1")}, key=key)
    assert other["error"]["code"] == "idempotency_mismatch"
    page = await client.read("a2a.tasks", {})
    assert [i["id"] for i in page["items"]] == [first["task"]] and page["cursor"] == ""


@pytest.mark.rules("R12-9", "R9-16")
async def test_reads_not_found_with_identical_bytes(daemon):
    client, c, worker, w = await pair(daemon.url)
    stranger, s = await agent_client(daemon.url, "stranger")
    task = (await client.act("a2a.send", {"to": w, "message": msg("mine", "r-1")}))["task"]
    v1 = (await client.act("task.create", {"audience": {"agents": [w]}, "contract": {"content": {"output": "o", "criteria": "x"}}}))["task"]
    ghost = "tk_" + "2" * 26

    async def raw(who: Client, op: str, args: dict) -> bytes:
        return (await call(who, op, args))["error"]

    base = await raw(client, "a2a.task", {"task": ghost})
    for who, op, args in [
        (stranger, "a2a.task", {"task": task}),
        (worker, "a2a.task", {"task": task}),  # the taker: not its A2A task
        (client, "a2a.task", {"task": v1}),  # made over /v1
        (client, "a2a.task", {"task": "not an id"}),
        (client, "a2a.task", {"task": task + ".v1"}),
        (client, "a2a.task", {"task": task, "to": s}),
        (stranger, "a2a.cancel", {"task": task}),
        (stranger, "a2a.push.list", {"task": task}),
    ]:
        err = await raw(who, op, args)
        assert err["code"] == "not_found" and err == {**base, "reason": base["reason"].replace(ghost, args["task"])}
    assert (await stranger.read("a2a.tasks", {}))["items"] == []
    assert [i["id"] for i in (await client.read("a2a.tasks", {"to": w}))["items"]] == [task]


async def test_tasks_pages_newest_change_first_and_filters(daemon):
    """WIRE.md 1.3: `a2a.tasks` lists "newest change first": a Task changed
    later (canceled, taken) moves to the front (D410)."""
    client, c, worker, w = await pair(daemon.url)
    made = [await client.act("a2a.send", {"to": w, "message": msg(f"n{i}", f"p-{i}")}) for i in range(3)]
    ids = [m["task"] for m in made]
    assert [i["id"] for i in (await client.read("a2a.tasks", {}))["items"]] == ids[::-1]
    await client.act("a2a.cancel", {"task": ids[0]})
    first = await client.read("a2a.tasks", {"limit": 2})
    assert [i["id"] for i in first["items"]] == [ids[0], ids[2]] and first["cursor"]
    rest = await client.read("a2a.tasks", {"limit": 2, "cursor": first["cursor"]})
    assert [i["id"] for i in rest["items"]] == [ids[1]] and rest["cursor"] == ""
    await worker.act("task.take", {"task": ids[1]})  # taken: WORKING, its newest change
    page = await client.read("a2a.tasks", {})
    assert [i["id"] for i in page["items"]] == [ids[1], ids[0], ids[2]]
    assert page["items"][0]["status"]["state"] == "TASK_STATE_WORKING"
    canceled = await client.read("a2a.tasks", {"state": "TASK_STATE_CANCELED"})
    assert [i["id"] for i in canceled["items"]] == [ids[0]]
    ctx = await client.read("a2a.tasks", {"context": made[1]["context"]})
    assert [i["id"] for i in ctx["items"]] == [ids[1]]
    # A context the daemon made for this caller is kept; another is replaced.
    again = await client.act("a2a.send", {"to": w, "message": msg("same ctx", "p-9", contextId=made[1]["context"])})
    assert again["context"] == made[1]["context"]
    fresh = await client.act("a2a.send", {"to": w, "message": msg("new ctx", "p-10", contextId="cx_made_up")})
    assert fresh["context"] != "cx_made_up"
    bad = await failure(client, "a2a.tasks", {"cursor": ids[0]}, "bad_request")
    assert bad["next"] == "revise"


async def test_tasks_paging_never_skips_or_repeats(daemon):
    """Every page size walks every Task once, in the order of the whole
    listing, ties in one millisecond included (D410)."""
    client, c, worker, w = await pair(daemon.url)
    made = [(await client.act("a2a.send", {"to": w, "message": msg(f"m{i}", f"w-{i}")}))["task"] for i in range(7)]
    for i in (1, 4):
        await client.act("a2a.cancel", {"task": made[i]})
    whole = [i["id"] for i in (await client.read("a2a.tasks", {}))["items"]]
    assert whole == [made[4], made[1], *[t for t in made[::-1] if t not in (made[1], made[4])]]
    for size in (1, 2, 3, 7):
        seen: list[str] = []
        cursor = None
        while cursor != "":
            page = await client.read("a2a.tasks", {"limit": size, **({"cursor": cursor} if cursor else {})})
            assert len(page["items"]) <= size
            seen += [i["id"] for i in page["items"]]
            cursor = page["cursor"]
        assert seen == whole, size


async def test_push_configs_never_show_credentials(make_daemon):
    d = make_daemon('[webhooks]\nallow_hosts = ["127.0.0.1"]\n[a2a]\npush_configs_per_task = 2\n')
    client, c, worker, w = await pair(d.url)
    task = (await client.act("a2a.send", {"to": w, "message": msg("p", "pp-1")}))["task"]
    cfg = {"url": "http://127.0.0.1:9/hook", "token": "tok", "authentication": {"scheme": "Bearer", "credentials": "s3cret"}}
    r = await client.act("a2a.push.set", {"task": task, "config": cfg})
    assert r["config"]["authentication"] == {"scheme": "Bearer"} and "s3cret" not in str(r)
    listed = await client.read("a2a.push.list", {"task": task})
    assert listed["items"] == [{"id": r["config"]["id"], "url": cfg["url"], "authentication": {"scheme": "Bearer"}}]
    await client.act("a2a.push.set", {"task": task, "config": {"url": "http://127.0.0.1:9/b", "id": "two"}})
    await failure(client, "a2a.push.set", {"task": task, "config": {"url": "http://127.0.0.1:9/c"}}, "conflict")
    await failure(client, "a2a.push.set", {"task": task, "config": {"url": "http://10.0.0.1/x"}}, "bad_request")
    assert await client.act("a2a.push.clear", {"task": task, "config": "two"}) == {"cleared": True}
    assert len((await client.read("a2a.push.list", {"task": task}))["items"]) == 1


@pytest.mark.rules("R12-8")
async def test_a_push_url_is_resolved_at_set_as_a_webhook_url_is(make_daemon):
    """WIRE.md 1.3: "the same URL rules checked at set and at each delivery":
    a push config's host is resolved when it is set, as `webhook.set`'s is
    (D216, D411); a name that does not resolve (`.invalid` never does) is
    refused with the same reason, by `a2a.push.set` and by a send carrying
    the config, and nothing is made."""
    d = make_daemon('[webhooks]\nallow_hosts = ["127.0.0.1"]\n')
    client, c, worker, w = await pair(d.url)
    url = "https://nowhere.invalid/p"
    hook = await failure(client, "webhook.set", {"url": url}, "bad_request")
    task = (await client.act("a2a.send", {"to": w, "message": msg("p", "pr-1")}))["task"]
    set_ = await failure(client, "a2a.push.set", {"task": task, "config": {"url": url}}, "bad_request")
    assert set_["reason"] == hook["reason"] and set_["next"] == "revise"
    conf = {"taskPushNotificationConfig": {"url": url}}
    sent = await failure(client, "a2a.send", {"to": w, "message": msg("q", "pr-2"), "configuration": conf}, "bad_request")
    assert sent["reason"] == hook["reason"]
    assert [i["id"] for i in (await client.read("a2a.tasks", {}))["items"]] == [task]
    assert (await client.read("a2a.push.list", {"task": task}))["items"] == []


async def test_push_config_set_with_the_send_in_the_same_action(make_daemon):
    d = make_daemon('[webhooks]\nallow_hosts = ["127.0.0.1"]\n')
    client, c, worker, w = await pair(d.url)
    conf = {"taskPushNotificationConfig": {"id": "cfg-1", "url": "http://127.0.0.1:9/p",
                                           "authentication": {"scheme": "Bearer", "credentials": "hidden"}}}
    task = (await client.act("a2a.send", {"to": w, "message": msg("p", "ps-1"), "configuration": conf}))["task"]
    listed = await client.read("a2a.push.list", {"task": task})
    assert listed["items"] == [{"id": "cfg-1", "url": "http://127.0.0.1:9/p", "authentication": {"scheme": "Bearer"}}]
    # A refused URL refuses the whole send: nothing is made.
    bad = {"taskPushNotificationConfig": {"url": "http://10.1.2.3/p"}}
    await failure(client, "a2a.send", {"to": w, "message": msg("q", "ps-2"), "configuration": bad}, "bad_request")
    assert len((await client.read("a2a.tasks", {}))["items"]) == 1
