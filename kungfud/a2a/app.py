"""The A2A endpoint as an ASGI app (Starlette routing, the a2a-sdk's types and
error classes): the paths of WIRE.md 1.3 "A2A" → "Endpoints".

In order, for every path under ``/a2a/agents/{agent}``: an agent with no card
(or none at all) is the one 404, the same bytes whatever was asked; then the
Bearer key (401 with ``WWW-Authenticate: Bearer``); then ``A2A-Version``
(-32009); then the method, each one op (:mod:`.methods`). The JSON-RPC and
HTTP+JSON routing is written here rather than the SDK's JsonRpcDispatcher and
RestDispatcher because those answer through the SDK's RequestHandler with
whole Task objects and its own error shapes: the one-404 before the key, the
error table, blocking answers that write spaces and streams with ids cannot go
through them.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Awaitable, Callable

import msgspec
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from .. import tracing
from . import card as cards
from .errors import Failure, from_rejection, invalid_request, method_not_found, parse_error, unsupported, version_error
from .methods import DONE, Call, Methods, NoAgent, with_receipt
from .ops import Ops
from .streams import Follower, blocking_body, sse_events

__all__ = ["A2AApp", "Settings"]

log = logging.getLogger("kungfud.a2a")
_enc = msgspec.json.Encoder()
_INTERNAL = from_rejection({"code": "internal", "reason": "the daemon failed on this request", "next": "retry"})
JSON = "application/json"
SSE = "text/event-stream"
NOT_FOUND = b'{"error":{"code":404,"status":"NOT_FOUND","message":"not_found: no A2A agent here"}}'
MAX_BODY = 2 * 1024 * 1024  # a request body; an op's own args limits (wire/limits.py) apply within it


class Settings(msgspec.Struct):
    public_url: str
    block_s: float = 30.0
    auto_adopt_s: int = 5


def _json(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(_enc.encode(body), status, headers, JSON)


def _not_found() -> Response:
    return Response(NOT_FOUND, 404, media_type=JSON)


def _unauthorized(why: str) -> Response:
    body = {"error": {"code": 401, "status": "UNAUTHENTICATED", "message": f"unauthenticated: {why}"}}
    return _json(body, 401, {"www-authenticate": 'Bearer realm="kungfud"'})


def _version_ok(request: Request) -> str | None:
    """None when the request speaks 1.x, else what it said ("" for nothing)."""
    said = request.headers.get("a2a-version") or request.query_params.get("A2A-Version") or ""
    major = said.strip().split(".")[0]
    return None if major == "1" else said.strip()[:32]


def _prefer_wait(request: Request) -> float | None:
    for part in request.headers.get("prefer", "").split(","):
        name, _, value = part.strip().partition("=")
        if name.strip().lower() == "wait":
            try:
                return max(0.0, float(value.strip()))
            except ValueError:
                return None
    return None


def _rpc_error(request: Request, f: Failure, req_id: Any) -> Response:
    """A JSON-RPC error (HTTP 200). A request that accepts only an event
    stream gets it as the stream's one event: an SSE client of any version
    (a 0.3 client's streaming call: the version error) reads it as an answer."""
    accept = ",".join(request.headers.getlist("accept"))
    if "text/event-stream" in accept and "json" not in accept:
        return Response(b"data: " + _enc.encode(f.rpc(req_id)) + b"\n\n", 200, f.headers(), SSE)
    return _json(f.rpc(req_id), 200, f.headers())


class A2AApp:
    def __init__(self, ops: Ops, settings: Settings):
        self.ops = ops
        self.settings = settings
        self.methods = Methods(ops)
        self.app = Starlette(
            routes=[
                Route("/a2a/agents/{agent}/.well-known/agent-card.json", self.card, methods=["GET"]),
                Route("/a2a/agents/{agent}", self.jsonrpc, methods=["POST"]),
                Route("/a2a/agents/{agent}/{rest:path}", self.rest, methods=["GET", "POST", "DELETE"]),
                Route("/a2a/agents/{agent}", self.rest, methods=["GET", "DELETE"]),
            ]
        )

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)

    # --- the card, and who calls -----------------------------------------------------

    async def card(self, request: Request) -> Response:
        got = self.ops.card(request.path_params["agent"])
        if got is None:
            return _not_found()
        body = cards.encode(cards.render_card(got, self.settings.public_url, self.settings.auto_adopt_s))
        tag = cards.etag(body)
        if tag in request.headers.get("if-none-match", ""):
            return Response(b"", 304, {"etag": tag})
        return Response(body, 200, {"etag": tag, "cache-control": "no-cache"}, JSON)

    def _caller(self, request: Request) -> tuple[Call | None, Response | None]:
        to = request.path_params["agent"]
        if self.ops.card(to) is None:
            return None, _not_found()
        scheme, _, key = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not key.strip():
            return None, _unauthorized("send Authorization: Bearer <your agent key>")
        who = self.ops.authenticate(key.strip())
        if who is None:
            return None, _unauthorized("unknown agent key (rotated or reset?)")
        judges = cards.EXTENSION in [e.strip() for e in request.headers.get("a2a-extensions", "").split(",")]
        peer = request.client.host if request.client else ""
        return Call(who[0], who[1], to, judges, peer, meta=tracing.frame_meta(request.headers)), None

    async def _body(self, request: Request) -> Any:
        chunks, size = [], 0
        async for chunk in request.stream():  # read no further than the limit
            size += len(chunk)
            if size > MAX_BODY:
                raise invalid_request(f"the request body is over {MAX_BODY} bytes, the limit")
            chunks.append(chunk)
        raw = b"".join(chunks)
        try:
            return json.loads(raw) if raw.strip() else {}
        except (ValueError, UnicodeDecodeError) as e:
            raise parse_error(f"the body is not JSON: {e}") from None

    # --- JSON-RPC ----------------------------------------------------------------------------

    async def jsonrpc(self, request: Request) -> Response:
        call, refused = self._caller(request)
        if refused is not None:
            return refused
        assert call is not None
        req_id: Any = None
        try:
            body = await self._body(request)
            if isinstance(body, dict):
                rid = body.get("id")
                req_id = rid if isinstance(rid, (str, int)) and not isinstance(rid, bool) else None
            if not isinstance(body, dict) or body.get("jsonrpc") != "2.0" or not isinstance(body.get("method"), str):
                raise invalid_request("a JSON-RPC 2.0 request object with a method (batches are not served)")
            if (said := _version_ok(request)) is not None:
                raise version_error(said)
            return await self._rpc(request, call, req_id, body["method"], body.get("params", {}))
        except Failure as f:
            return _rpc_error(request, f, req_id)
        except NoAgent:
            return _not_found()
        except Exception:
            log.exception("A2A request failed")
            return _rpc_error(request, _INTERNAL, req_id)

    async def _rpc(self, request: Request, call: Call, req_id: Any, method: str, params: Any) -> Response:
        m = self.methods
        simple: dict[str, Callable[[Call, Any], Awaitable[Any]]] = {
            "GetTask": m.get_task, "ListTasks": m.list_tasks, "CancelTask": m.cancel,
            "CreateTaskPushNotificationConfig": m.push_create, "GetTaskPushNotificationConfig": m.push_get,
            "ListTaskPushNotificationConfigs": m.push_list, "DeleteTaskPushNotificationConfig": m.push_delete,
        }
        if method in simple:
            return _json({"jsonrpc": "2.0", "id": req_id, "result": await simple[method](call, params)})
        if method == "SendMessage":
            return await self._send(request, call, params, req_id, True)
        if method == "SendStreamingMessage":
            return await self._send_stream(request, call, params, req_id, True)
        if method == "SubscribeToTask":
            task = params.get("id") if isinstance(params, dict) else None
            return await self._subscribe(request, call, task, req_id, True)
        raise method_not_found(method)

    # --- HTTP+JSON ----------------------------------------------------------------------------

    async def rest(self, request: Request) -> Response:
        call, refused = self._caller(request)
        if refused is not None:
            return refused
        assert call is not None
        try:
            if (said := _version_ok(request)) is not None:
                raise version_error(said)
            return await self._rest(request, call, "/" + request.path_params.get("rest", ""), request.method)
        except Failure as f:
            return _json(f.rest(), f.http_status, f.headers())
        except NoAgent:
            return _not_found()
        except Exception:
            log.exception("A2A request failed")
            return _json(_INTERNAL.rest(), 500)

    async def _rest(self, request: Request, call: Call, path: str, verb: str) -> Response:
        m = self.methods
        q = request.query_params
        parts = [p for p in path.split("/") if p]
        if verb == "POST" and path == "/message:send":
            return await self._send(request, call, await self._body(request), None, False)
        if verb == "POST" and path == "/message:stream":
            return await self._send_stream(request, call, await self._body(request), None, False)
        if path == "/tasks" and verb == "GET":
            params: dict[str, Any] = {k: q[k] for k in ("contextId", "status", "pageSize", "pageToken", "historyLength", "statusTimestampAfter") if k in q}
            if "includeArtifacts" in q:
                params["includeArtifacts"] = q["includeArtifacts"].lower() == "true"
            return _json(await m.list_tasks(call, params))
        if len(parts) == 2 and parts[0] == "tasks":
            task, _, action = parts[1].partition(":")
            if action == "" and verb == "GET":
                params = {"id": task}
                if "historyLength" in q:
                    params["historyLength"] = q["historyLength"]
                return _json(await m.get_task(call, params))
            if action == "cancel" and verb == "POST":
                return _json(await m.cancel(call, {"id": task}))
            if action == "subscribe" and verb in ("GET", "POST"):
                return await self._subscribe(request, call, task, None, False)
        if len(parts) in (3, 4) and parts[0] == "tasks" and parts[2] == "pushNotificationConfigs":
            task = parts[1]
            if len(parts) == 3 and verb == "POST":
                body = await self._body(request)
                body = {**body, "taskId": task} if isinstance(body, dict) else body
                return _json(await m.push_create(call, body))
            if len(parts) == 3 and verb == "GET":
                return _json(await m.push_list(call, {"taskId": task}))
            if len(parts) == 4 and verb == "GET":
                return _json(await m.push_get(call, {"taskId": task, "id": parts[3]}))
            if len(parts) == 4 and verb == "DELETE":
                await m.push_delete(call, {"taskId": task, "id": parts[3]})
                return _json({})
        raise method_not_found(f"{verb} {path}")

    # --- sends, blocking and streams ----------------------------------------------------

    async def _send(self, request: Request, call: Call, params: Any, req_id: Any, rpc: bool) -> Response:
        result, config, receipt = await self.methods.send(call, params)
        task_id = result["task"]
        history = config.get("historyLength")

        def render(task: dict) -> bytes:
            body = {"task": with_receipt(task, receipt)}
            return _enc.encode({"jsonrpc": "2.0", "id": req_id, "result": body} if rpc else body)

        def fail(f: Failure) -> bytes:
            return _enc.encode(f.rpc(req_id) if rpc else f.rest())

        def done(task: dict) -> bool:
            return bool(config.get("returnImmediately")) or (task.get("status") or {}).get("state") in DONE

        task = await self.methods.task(call, task_id, history)
        if done(task):  # nothing to wait for (a verdict's COMPLETED): no stream, no follower
            return Response(render(task), 200, media_type=JSON)
        after = self.ops.head(call.agent)  # the changes from here on wake the wait;
        task = await self.methods.task(call, task_id, history)  # those before are in this read
        if done(task):
            return Response(render(task), 200, media_type=JSON)
        wait = self.settings.block_s
        if (asked := _prefer_wait(request)) is not None:
            wait = min(wait, asked)
        return StreamingResponse(
            blocking_body(self.methods, call, task_id, after, wait, render, fail, history, task), 200, media_type=JSON
        )

    async def _send_stream(self, request: Request, call: Call, params: Any, req_id: Any, rpc: bool) -> Response:
        after = self.ops.head(call.agent)
        result, _, receipt = await self.methods.send(call, params)
        task = with_receipt(await self.methods.task(call, result["task"]), receipt)
        return self._stream(request, call, task, after, req_id, rpc)

    async def _subscribe(self, request: Request, call: Call, task_id: Any, req_id: Any, rpc: bool) -> Response:
        if not isinstance(task_id, str) or not task_id:
            raise unsupported("SubscribeToTask needs the Task's id")
        last = request.headers.get("last-event-id", "").strip()
        after = int(last) if last.isdigit() else self.ops.head(call.agent)
        task = await self.methods.task(call, task_id)
        return self._stream(request, call, task, after, req_id, rpc, replay=last.isdigit())

    def _stream(
        self, request: Request, call: Call, task: dict, after: int, req_id: Any, rpc: bool, replay: bool = False
    ) -> Response:
        async def gone() -> bool:
            return await request.is_disconnected()

        follower = Follower(self.methods, call, task["id"], after)
        events = sse_events(follower, task, after, req_id, rpc, gone, replay)
        return StreamingResponse(events, 200, {"cache-control": "no-cache", "x-accel-buffering": "no"}, SSE)
