"""The A2A app (kungfud/a2a) against a fake daemon (tests/a2a/fake.py): the
paths, the card, the key, the version, the error table, what reaches the ops,
blocking answers and streams — WIRE.md 1.3 "A2A". The same behaviour against a
real daemon and the stock a2a-sdk client: tests/e2e/test_a2a.py."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from kungfud.a2a import streams
from kungfud.a2a.app import A2AApp, Settings
from kungfud.a2a.card import EXTENSION

from .fake import FakeOps

BASE = "/a2a/agents/ag_worker"
V1 = {"A2A-Version": "1.0", "Authorization": "Bearer key-alice"}


def _client(ops: FakeOps, block_s: float = 30) -> httpx.AsyncClient:
    app = A2AApp(ops, Settings(public_url="http://a2a.example:8741", block_s=block_s, auto_adopt_s=5))
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test")


def _rpc(method: str, params: dict, rid: object = 1) -> dict:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


def _msg(mid: str = "m1", text: str = "summarise this", **extra) -> dict:
    return {"message": {"messageId": mid, "role": "ROLE_USER", "parts": [{"text": text}], **extra}}


@pytest.fixture(autouse=True)
def quick_keepalive(monkeypatch):
    monkeypatch.setattr(streams, "KEEPALIVE_S", 0.3)


async def test_the_card_has_what_a_stock_client_needs_and_an_etag():
    async with _client(FakeOps()) as c:
        r = await c.get(f"{BASE}/.well-known/agent-card.json")
        assert r.status_code == 200
        card = r.json()
        assert card["name"] == "Worker" and card["description"] == "does work"
        assert [i["protocolBinding"] for i in card["supportedInterfaces"]] == ["JSONRPC", "HTTP+JSON"]
        assert all(i["url"] == "http://a2a.example:8741/a2a/agents/ag_worker" and i["protocolVersion"] == "1.0"
                   for i in card["supportedInterfaces"])
        assert card["capabilities"]["streaming"] is True and card["capabilities"]["pushNotifications"] is True
        assert card["capabilities"]["extensions"] == [
            {"uri": EXTENSION, "required": False, "params": {"judging_default": "deadline", "auto_adopt_s": 5}}
        ]
        assert card["securitySchemes"] == {"kungfud": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}}
        assert card["securityRequirements"]
        assert card["skills"][0]["name"] == "Work under a Kungfu contract"
        assert card["defaultInputModes"] == ["text/plain", "application/json"]
        tag = r.headers["etag"]
        again = await c.get(f"{BASE}/.well-known/agent-card.json", headers={"If-None-Match": tag})
        assert again.status_code == 304


@pytest.mark.rules("R12-9")
async def test_an_agent_without_a_card_and_no_agent_are_the_same_404_on_every_path():
    ops = FakeOps()
    ops.cards["ag_bob"] = None  # exists as a key holder, no card
    del ops.cards["ag_bob"]
    async with _client(ops) as c:
        answers = []
        for agent in ("ag_bob", "ag_nobody"):
            for verb, path, headers in (
                ("GET", "/.well-known/agent-card.json", {}),
                ("POST", "", V1),
                ("POST", "", {}),
                ("GET", "/tasks/tk_1", V1),
                ("POST", "/message:send", {"Authorization": "Bearer wrong"}),
            ):
                r = await c.request(verb, f"/a2a/agents/{agent}{path}", headers=headers, json=_rpc("GetTask", {"id": "x"}))
                answers.append((r.status_code, r.content))
        assert len(set(answers)) == 1 and answers[0][0] == 404


async def test_no_key_or_an_unknown_key_is_401_with_www_authenticate():
    async with _client(FakeOps()) as c:
        for headers in ({"A2A-Version": "1.0"}, {"A2A-Version": "1.0", "Authorization": "Bearer nope"},
                        {"A2A-Version": "1.0", "Authorization": "Basic a2V5"}):
            r = await c.post(BASE, headers=headers, json=_rpc("GetTask", {"id": "tk_1"}))
            assert r.status_code == 401
            assert r.headers["www-authenticate"].startswith("Bearer")
            assert r.json()["error"]["message"].startswith("unauthenticated: ")


async def test_no_version_or_another_major_is_version_not_supported():
    async with _client(FakeOps()) as c:
        for headers, url in (({"Authorization": "Bearer key-alice"}, BASE),
                             ({"Authorization": "Bearer key-alice", "A2A-Version": "0.3"}, BASE),
                             ({"Authorization": "Bearer key-alice", "A2A-Version": "2.0"}, BASE)):
            r = await c.post(url, headers=headers, json=_rpc("message/send", {}, rid="r1"))
            assert r.status_code == 200
            err = r.json()["error"]
            assert r.json()["id"] == "r1"
            assert err["code"] == -32009
            assert err["data"][0]["reason"] == "VERSION_NOT_SUPPORTED" and err["data"][0]["domain"] == "kungfud"
            assert "A2A-Version: 1.0" in err["message"]
        r = await c.get(f"{BASE}/tasks/tk_9", headers={"Authorization": "Bearer key-alice"})
        assert r.status_code == 400 and r.json()["error"]["details"][0]["reason"] == "VERSION_NOT_SUPPORTED"
        # The version as a query parameter, and any 1.x.
        r = await c.post(f"{BASE}?A2A-Version=1.0", headers={"Authorization": "Bearer key-alice"}, json=_rpc("GetTask", {"id": "tk_9"}))
        assert r.json()["error"]["code"] == -32001
        r = await c.post(BASE, headers={**V1, "A2A-Version": "1.2"}, json=_rpc("GetTask", {"id": "tk_9"}))
        assert r.json()["error"]["code"] == -32001


@pytest.mark.rules("L3-2")
async def test_a_send_is_a2a_send_keyed_by_to_and_message_id_with_e_and_metadata_folded_in():
    ops = FakeOps()
    async with _client(ops) as c:
        params = {**_msg("m-7"), "metadata": {EXTENSION: {"deliver_within_s": 60}},
                  "configuration": {"returnImmediately": True, "historyLength": 3, "acceptedOutputModes": ["text/plain"]}}
        r = await c.post(BASE, headers={**V1, "A2A-Extensions": EXTENSION}, json=_rpc("SendMessage", params))
        task = r.json()["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_SUBMITTED"
        agent, op, args, key = ops.calls[0]
        assert (agent, op, key) == ("ag_alice", "a2a.send", "a2a:ag_worker:m-7")
        assert args["to"] == "ag_worker"
        assert args["message"]["extensions"] == [EXTENSION]
        assert args["message"]["metadata"] == {EXTENSION: {"deliver_within_s": 60}}
        assert args["configuration"] == {"acceptedOutputModes": ["text/plain"]}  # returnImmediately, historyLength stripped
        # The same messageId again: the same Task (the op's receipt answers it).
        r2 = await c.post(BASE, headers=V1, json=_rpc("SendMessage", params))
        assert r2.json()["result"]["task"]["id"] == task["id"]
        assert "extensions" not in ops.calls[-2][2]["message"]  # no A2A-Extensions header: no E added


async def test_params_a2a_does_not_allow_are_invalid_params():
    async with _client(FakeOps()) as c:
        r = await c.post(BASE, headers=V1, json=_rpc("SendMessage", {"message": {"messageId": "m", "role": "ROLE_WRONG"}}))
        assert r.json()["error"]["code"] == -32602
        r = await c.post(BASE, headers=V1, json=_rpc("GetExtendedAgentCard", {}))
        assert r.json()["error"]["code"] == -32601
        r = await c.post(BASE, headers=V1, content=b"{not json")
        assert r.json()["error"]["code"] == -32700


async def test_fields_a_newer_client_adds_are_ignored_and_never_reach_the_op():
    """WIRE.md 1.3 serves any 1.x: a field this version's Message (or request)
    does not have is ignored, as the a2a-sdk's own servers ignore it, and is
    not stored; a known field of the wrong type or an unknown enum value is
    still InvalidParams (D412)."""
    ops = FakeOps()
    async with _client(ops) as c:
        params = _msg("m-new")
        params["message"]["parts"][0]["futurePartField"] = 1
        params["message"]["futureField"] = {"x": 1}
        params["futureParam"] = True
        params["configuration"] = {"returnImmediately": True, "futureOption": "on"}
        r = await c.post(BASE, headers=V1, json=_rpc("SendMessage", params))
        assert r.json()["result"]["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
        sends = lambda: [args for _, op, args, _ in ops.calls if op == "a2a.send"]  # noqa: E731
        sent = sends()[-1]
        assert sent["message"] == {"messageId": "m-new", "role": "ROLE_USER", "parts": [{"text": "summarise this"}]}
        assert "configuration" not in sent
        rest = await c.post(f"{BASE}/message:send", headers=V1, json={**_msg("m-rest", futureField=2), "futureParam": 1})
        assert rest.status_code == 200 and sends()[-1]["message"]["messageId"] == "m-rest"
        assert "future" not in str(sends()[-1])
        for bad in ({"role": "ROLE_FUTURE"}, {"parts": "not a list"}):
            r = await c.post(BASE, headers=V1, json=_rpc("SendMessage", _msg("m-bad", **bad)))
            assert r.json()["error"]["code"] == -32602, bad
            assert r.json()["error"]["data"][0]["reason"] == "INVALID_PARAMS"


@pytest.mark.parametrize(
    "rejection, rpc_code, status, reason",
    [
        ({"code": "forbidden", "reason": "you are not on the accept list", "next": "stop"}, -32000, 403, "FORBIDDEN"),
        ({"code": "rate_limited", "reason": "over 1200 actions per minute; retry in 7 s", "next": "wait"}, -32000, 429, "RATE_LIMITED"),
        ({"code": "bad_request", "reason": "role must be ROLE_USER", "next": "revise"}, -32602, 400, "INVALID_PARAMS"),
        ({"code": "too_large", "reason": "content is big", "next": "revise"}, -32602, 413, "TOO_LARGE"),
        ({"code": "idempotency_mismatch", "reason": "another request", "next": "revise"}, -32602, 409, "IDEMPOTENCY_MISMATCH"),
        ({"code": "conflict", "reason": "busy", "next": "retry", "rule": "R7-1"}, -32000, 409, "CONFLICT"),
        ({"code": "unavailable", "reason": "store down", "next": "retry"}, -32603, 503, "UNAVAILABLE"),
        ({"code": "internal", "reason": "oops", "next": "retry"}, -32603, 500, "INTERNAL"),
    ],
)
async def test_the_error_table(rejection, rpc_code, status, reason):
    ops = FakeOps()
    ops.refuse["a2a.send"] = rejection
    async with _client(ops) as c:
        r = await c.post(BASE, headers=V1, json=_rpc("SendMessage", _msg()))
        assert r.status_code == 200
        err = r.json()["error"]
        assert err["code"] == rpc_code
        assert err["message"] == f"{rejection['code']}: {rejection['reason']}"
        info = err["data"][0]
        assert info["@type"] == "type.googleapis.com/google.rpc.ErrorInfo" and info["domain"] == "kungfud"
        assert info["reason"] == reason
        assert info["metadata"]["code"] == rejection["code"] and info["metadata"]["next"] == rejection["next"]
        assert info["metadata"].get("rule") == rejection.get("rule")
        r = await c.post(f"{BASE}/message:send", headers=V1, json=_msg())
        assert r.status_code == status
        assert r.json()["error"]["details"][0]["reason"] == reason
        if rejection["code"] == "rate_limited":
            assert r.headers["retry-after"] == "7"


@pytest.mark.rules("R12-9")
async def test_another_callers_task_is_task_not_found_with_the_same_bytes_as_none():
    ops = FakeOps()
    async with _client(ops) as c:
        r = await c.post(BASE, headers=V1, json=_rpc("SendMessage", {**_msg(), "configuration": {"returnImmediately": True}}))
        tid = r.json()["result"]["task"]["id"]
        bob = {**V1, "Authorization": "Bearer key-bob"}
        theirs = await c.post(BASE, headers=bob, json=_rpc("GetTask", {"id": tid}))
        none = await c.post(BASE, headers=bob, json=_rpc("GetTask", {"id": "tk_404"}))
        assert theirs.json()["error"]["code"] == -32001
        assert theirs.json()["error"]["data"][0]["reason"] == "TASK_NOT_FOUND"
        assert theirs.json()["error"]["message"].replace(tid, "X") == none.json()["error"]["message"].replace("tk_404", "X")
        rest = await c.get(f"{BASE}/tasks/{tid}", headers=bob)
        assert rest.status_code == 404


async def test_cancel_refused_while_a_verdict_is_awaited_is_task_not_cancelable():
    ops = FakeOps()
    ops.refuse["a2a.cancel"] = {"code": "conflict", "reason": "task not cancelable: a delivery awaits your verdict", "next": "revise",
                                "hint": {"op": "a2a.send", "args": {}}}
    async with _client(ops) as c:
        r = await c.post(BASE, headers=V1, json=_rpc("CancelTask", {"id": "tk_1"}))
        err = r.json()["error"]
        assert err["code"] == -32002 and err["data"][0]["reason"] == "TASK_NOT_CANCELABLE"
        assert err["data"][0]["metadata"]["hint"] == {"op": "a2a.send", "args": {}}
        r = await c.post(f"{BASE}/tasks/tk_1:cancel", headers=V1)
        assert r.status_code == 400


async def test_a_follow_up_without_a_verdict_is_unsupported_operation():
    ops = FakeOps()
    ops.refuse["a2a.send"] = {"code": "bad_request", "reason": "unsupported operation: no verdict in this message", "next": "revise"}
    async with _client(ops) as c:
        r = await c.post(BASE, headers=V1, json=_rpc("SendMessage", _msg(taskId="tk_1")))
        assert r.json()["error"]["code"] == -32004


async def _works_then_completes(ops: FakeOps, working_after_s: float, completed_after_s: float) -> None:
    """The worker of the first Task: WORKING after a while, then COMPLETED with an artifact."""
    await asyncio.sleep(working_after_s)
    ops.move("tk_1", "TASK_STATE_WORKING")
    await asyncio.sleep(completed_after_s)
    ops.move("tk_1", "TASK_STATE_COMPLETED", {"artifactId": "en_1", "parts": [{"text": "done"}]})


async def test_a_blocking_answer_writes_a_space_while_it_waits_and_is_valid_json():
    ops = FakeOps()
    async with _client(ops) as c:
        worker = asyncio.ensure_future(_works_then_completes(ops, 1.0, 0.5))
        r = await c.post(BASE, headers=V1, json=_rpc("SendMessage", _msg()))
        await worker
        assert r.content.startswith(b" ") and r.content.strip().startswith(b"{")
        body = json.loads(r.content)
        assert body["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        assert ops.watching["ag_alice"] == set()


async def test_a_blocking_answer_ends_at_prefer_wait_with_the_current_task():
    ops = FakeOps()
    async with _client(ops) as c:
        r = await c.post(f"{BASE}/message:send", headers={**V1, "Prefer": "wait=1"}, json=_msg())
        assert r.status_code == 200
        assert json.loads(r.content)["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"


def _sse(raw: bytes) -> list[tuple[str | None, dict | None, bool]]:
    """(id, data, is_comment) of each SSE event."""
    out = []
    for block in raw.decode().split("\n\n"):
        if not block.strip():
            continue
        if block.startswith(":"):
            out.append((None, None, True))
            continue
        fields = dict(line.split(": ", 1) for line in block.splitlines())
        out.append((fields.get("id"), json.loads(fields["data"]), False))
    return out


async def test_a_stream_is_the_task_then_changes_with_event_ids_and_comments_while_quiet():
    ops = FakeOps()
    async with _client(ops) as c:
        worker = asyncio.ensure_future(_works_then_completes(ops, 0.8, 0.2))
        r = await c.post(BASE, headers=V1, json=_rpc("SendStreamingMessage", _msg(), rid=5))
        await worker
        assert r.headers["content-type"].startswith("text/event-stream")
        events = _sse(r.content)
        assert any(comment for _, _, comment in events)
        data = [(i, d) for i, d, comment in events if not comment]
        assert all(d["id"] == 5 and d["jsonrpc"] == "2.0" for _, d in data)
        kinds = [next(iter(d["result"])) for _, d in data]
        assert kinds == ["task", "statusUpdate", "artifactUpdate", "statusUpdate"]
        # ids are the a2a_task event seqs: the snapshot's is where the changes start
        seqs = [int(i) for i, _ in data]
        assert seqs[1:] == [2, 3, 3] and seqs[0] < 2
        assert data[2][1]["result"]["artifactUpdate"]["lastChunk"] is True
        assert data[3][1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
        assert ops.watching["ag_alice"] == set()  # the ended stream no longer waits for wake-ups


async def test_last_event_id_replays_the_later_events_of_that_task():
    ops = FakeOps()
    async with _client(ops) as c:
        r = await c.post(f"{BASE}/message:send", headers=V1, json={**_msg(), "configuration": {"returnImmediately": True}})
        tid = r.json()["task"]["id"]
        ops.move(tid, "TASK_STATE_WORKING")  # seq 2
        ops.move(tid, "TASK_STATE_COMPLETED", {"artifactId": "en_1", "parts": [{"text": "ok"}]})  # seq 3
        r = await c.get(f"{BASE}/tasks/{tid}:subscribe", headers={**V1, "Last-Event-ID": "1"})
        data = [(i, d) for i, d, comment in _sse(r.content) if not comment]
        # HTTP+JSON: StreamResponse objects, no JSON-RPC wrapper; no snapshot on a replay
        assert [int(i) for i, _ in data] == [2, 3, 3]
        assert [d["statusUpdate"]["status"]["state"] for _, d in data if "statusUpdate" in d] == [
            "TASK_STATE_WORKING", "TASK_STATE_COMPLETED"]
        # Without Last-Event-ID: the snapshot, and a terminal Task's stream ends there.
        r = await c.post(BASE, headers=V1, json=_rpc("SubscribeToTask", {"id": tid}))
        data = [d for _, d, comment in _sse(r.content) if not comment]
        assert len(data) == 1 and data[0]["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_push_configs_never_show_credentials():
    ops = FakeOps()
    async with _client(ops) as c:
        cfg = {"taskId": "tk_1", "url": "https://example.com/hook", "token": "t0k",
               "authentication": {"scheme": "Bearer", "credentials": "s3cret"}}
        r = await c.post(BASE, headers=V1, json=_rpc("CreateTaskPushNotificationConfig", cfg))
        got = r.json()["result"]
        assert got["authentication"] == {"scheme": "Bearer"} and "s3cret" not in r.text
        assert ops.calls[-1][2]["config"]["authentication"]["credentials"] == "s3cret"
        assert ops.calls[-1][3].startswith("a2a:ag_worker:push:")
        r = await c.get(f"{BASE}/tasks/tk_1/pushNotificationConfigs", headers=V1)
        assert r.json()["configs"][0]["id"] == "pc_1"
        r = await c.get(f"{BASE}/tasks/tk_1/pushNotificationConfigs/pc_1", headers=V1)
        assert r.json()["url"] == "https://example.com/hook"
        r = await c.post(BASE, headers=V1, json=_rpc("GetTaskPushNotificationConfig", {"taskId": "tk_1", "id": "pc_9"}))
        assert r.json()["error"]["code"] == -32001
        r = await c.delete(f"{BASE}/tasks/tk_1/pushNotificationConfigs/pc_1", headers=V1)
        assert r.status_code == 200 and ops.calls[-1][1] == "a2a.push.clear"


async def test_an_error_to_a_caller_that_accepts_only_a_stream_is_one_sse_event():
    """A 0.3 client's streaming send (no A2A-Version, Accept: text/event-stream)
    reads the version error as its stream's one event, not a content-type error."""
    async with _client(FakeOps()) as c:
        headers = {"Authorization": "Bearer key-alice", "Accept": "text/event-stream"}
        r = await c.post(BASE, headers=headers, json=_rpc("message/stream", {}, rid="s"))
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        [(_, data, _)] = _sse(r.content)
        assert data["id"] == "s" and data["error"]["code"] == -32009
        r = await c.post(BASE, headers={**headers, "Accept": "application/json"}, json=_rpc("message/stream", {}))
        assert r.headers["content-type"].startswith("application/json")


@pytest.mark.rules("L3-2")
async def test_a_sends_task_carries_its_receipt():
    ops = FakeOps()
    async with _client(ops) as c:
        params = {**_msg("m-r"), "configuration": {"returnImmediately": True}}
        first = (await c.post(BASE, headers=V1, json=_rpc("SendMessage", params))).json()["result"]["task"]
        again = (await c.post(BASE, headers=V1, json=_rpc("SendMessage", params))).json()["result"]["task"]
        assert first["metadata"][EXTENSION]["receipt"] == {"key": "a2a:ag_worker:m-r", "replayed": False}
        assert again["metadata"][EXTENSION]["receipt"] == {"key": "a2a:ag_worker:m-r", "replayed": True}


@pytest.mark.rules("R12-9")
async def test_a_card_cleared_under_a_request_is_the_one_404_and_tasks_are_read_through_their_agent():
    ops = FakeOps()
    ops.cards["ag_other"] = {"name": "Other", "description": "another agent"}
    async with _client(ops) as c:
        r = await c.post(BASE, headers=V1, json=_rpc("SendMessage", {**_msg(), "configuration": {"returnImmediately": True}}))
        tid = r.json()["result"]["task"]["id"]
        # The same caller asks another agent's endpoint for it: not found there (the op's `to`).
        r = await c.post("/a2a/agents/ag_other", headers=V1, json=_rpc("GetTask", {"id": tid}))
        assert r.json()["error"]["code"] == -32001 and ops.calls[-1][2]["to"] == "ag_other"
        nobody = await c.get("/a2a/agents/ag_nobody/.well-known/agent-card.json")
        ops.refuse["a2a.send"] = {"code": "not_found", "reason": "a2a agent ag_worker was not found, or you may not read it", "next": "stop"}
        for path in ("", "/message:send"):
            r = await c.post(BASE + path, headers=V1, json=_rpc("SendMessage", _msg()) if not path else _msg())
            assert (r.status_code, r.content) == (404, nobody.content)


async def test_a_body_over_the_limit_is_refused_unread():
    from kungfud.a2a.app import MAX_BODY

    async with _client(FakeOps()) as c:
        r = await c.post(BASE, headers=V1, content=b" " * (MAX_BODY + 1))
        assert r.json()["error"]["code"] == -32600 and "limit" in r.json()["error"]["message"]
