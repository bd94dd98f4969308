"""Each A2A 1.0 method as the one op it is (WIRE.md 1.3 "A2A"), run as the
calling agent. Requests are parsed into the a2a-sdk's own protobuf types (so a
request A2A does not allow is refused as A2A refuses it, InvalidParams; fields
this version does not know are ignored, D412) and handed on as ProtoJSON; results are the ops' A2A JSON as they are.

:class:`Call` is one request's context: who calls, to which agent, with which
extensions. Every method returns the JSON result or raises :class:`Failure`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from a2a.types import a2a_pb2 as pb
from google.protobuf.json_format import MessageToDict, ParseDict, ParseError

from .card import EXTENSION
from .errors import from_rejection, invalid_params
from .ops import Answer, Ops

__all__ = ["Call", "Methods", "NoAgent", "TERMINAL", "DONE", "with_receipt"]

TERMINAL = frozenset({"TASK_STATE_COMPLETED", "TASK_STATE_CANCELED"})
#: A blocking answer and a stream end at these (a stream carrying a rejection goes on: it starts at SUBMITTED).
DONE = TERMINAL | {"TASK_STATE_INPUT_REQUIRED"}


@dataclass
class Call:
    agent: str  # the caller
    key_hash: bytes | None
    to: str  # the card's agent (the path)
    judges: bool = False  # A2A-Extensions names E
    peer: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, str] | None = None  # the request's trace context (traceparent headers, wire.md 1.3 "Tracing")


def known(value: Any, desc: Any) -> Any:
    """``value`` (ProtoJSON of the message ``desc``) without the fields ``desc``
    does not have, at every depth (D412): a newer 1.x client's added fields
    are ignored, as the a2a-sdk's own servers ignore them; a known field with
    a wrong type or an unknown enum value is still refused by the parse.
    Free-form well-known types (``Struct``, ``Value``, …) are kept as sent."""
    if not isinstance(value, dict) or desc.file.name.startswith("google/protobuf/"):
        return value
    out = {}
    for name, v in value.items():
        f = desc.fields_by_name.get(name) or _json_names(desc).get(name)
        if f is None:
            continue
        sub = f.message_type
        if sub is not None and sub.GetOptions().map_entry:
            inner = sub.fields_by_name["value"].message_type
            v = {k: known(x, inner) for k, x in v.items()} if inner is not None and isinstance(v, dict) else v
        elif sub is not None:
            v = [known(x, sub) for x in v] if isinstance(v, list) else known(v, sub)
        out[name] = v
    return out


def _json_names(desc: Any) -> dict[str, Any]:
    return {f.json_name: f for f in desc.fields}


def parse(params: Any, kind: type) -> Any:
    if not isinstance(params, dict):
        raise invalid_params("params must be a JSON object")
    try:
        return ParseDict(known(params, kind.DESCRIPTOR), kind(), ignore_unknown_fields=False)
    except (ParseError, ValueError, TypeError) as e:
        raise invalid_params(f"params are not a valid {kind.__name__}: {str(e)[:200]}") from None


def as_json(msg: Any) -> dict[str, Any]:
    return MessageToDict(msg, preserving_proto_field_name=False)


def _when(task: dict) -> datetime:
    return datetime.fromisoformat(task["status"]["timestamp"].replace("Z", "+00:00"))


def _listed(task: dict, artifacts: bool, history: int | None) -> dict:
    """A ListTasks item: without artifacts unless asked; its newest ``history``
    messages (0: none), as GetTask's ``historyLength`` shows them."""
    out = {k: v for k, v in task.items() if artifacts or k != "artifacts"}
    if history is not None:
        shown = out.get("history", [])[-history:] if history > 0 else []
        out.pop("history", None)
        if shown:
            out["history"] = shown
    return out


class NoAgent(Exception):
    """The called agent has no card (any more): the one 404, as before the key."""


def _checked(answer: Answer) -> Any:
    if not answer.ok:
        err = answer.error or {}
        if err.get("code") == "not_found" and str(err.get("reason", "")).startswith("a2a agent "):
            raise NoAgent()
        raise from_rejection(err)
    return answer.result


def _meta(call: Call) -> dict[str, Any]:
    return {"meta": call.meta} if call.meta else {}


class Methods:
    def __init__(self, ops: Ops):
        self.ops = ops

    async def _op(self, call: Call, op: str, args: dict, key: str = "") -> Any:
        return _checked(await self.ops.call(call.agent, call.key_hash, op, args, key, call.peer, **_meta(call)))

    # --- SendMessage / SendStreamingMessage: the op; blocking and streams are the app's --

    async def send(self, call: Call, params: Any) -> tuple[dict, dict, dict]:
        """``a2a.send``; returns (its result, the SendMessageConfiguration as
        sent, the receipt: ``{key, replayed}``)."""
        req = parse(params, pb.SendMessageRequest)
        if not req.HasField("message"):
            raise invalid_params("params.message is required")
        message = as_json(req.message)
        message.setdefault("parts", [])  # ProtoJSON leaves an empty list out; the op's Message has it
        if not message.get("messageId"):
            raise invalid_params("message.messageId is required (it is the idempotency key of the send)")
        if call.judges and EXTENSION not in message.get("extensions", []):
            message["extensions"] = [*message.get("extensions", []), EXTENSION]
        if req.HasField("metadata") and not message.get("metadata"):
            message["metadata"] = as_json(req.metadata)
        config = as_json(req.configuration) if req.HasField("configuration") else {}
        args: dict[str, Any] = {"to": call.to, "message": message}
        op_config = {k: v for k, v in config.items() if k not in ("returnImmediately", "historyLength")}
        if op_config:
            args["configuration"] = op_config
        key = f"a2a:{call.to}:{message['messageId']}"
        answer = await self.ops.call(call.agent, call.key_hash, "a2a.send", args, key, call.peer, **_meta(call))
        return _checked(answer), config, {"key": key, "replayed": answer.replayed}

    # --- reads ------------------------------------------------------------------------

    async def task(self, call: Call, task: str, history_length: int | None = None) -> dict:
        args: dict[str, Any] = {"task": task, "to": call.to}
        if history_length is not None:
            args["history_length"] = history_length
        return await self._op(call, "a2a.task", args)

    async def get_task(self, call: Call, params: Any) -> dict:
        req = parse(params, pb.GetTaskRequest)
        return await self.task(call, req.id, req.history_length if req.HasField("history_length") else None)

    async def list_tasks(self, call: Call, params: Any) -> dict:
        req = parse(params, pb.ListTasksRequest)
        args: dict[str, Any] = {"to": call.to}
        if req.context_id:
            args["context"] = req.context_id
        if req.status:
            args["state"] = pb.TaskState.Name(req.status)
        if req.page_token:
            args["cursor"] = req.page_token
        if req.HasField("page_size"):
            args["limit"] = req.page_size
        page = await self._op(call, "a2a.tasks", args)
        items = page.get("items", [])
        if req.HasField("status_timestamp_after"):  # A2A's filter: changed after that time (D414)
            after = req.status_timestamp_after.ToDatetime(tzinfo=timezone.utc)
            items = [t for t in items if _when(t) > after]
        history = req.history_length if req.HasField("history_length") else None
        items = [_listed(t, req.include_artifacts, history) for t in items]
        return {"tasks": items, "nextPageToken": page.get("cursor") or "", "pageSize": len(items)}

    # --- cancel -----------------------------------------------------------------------

    async def cancel(self, call: Call, params: Any) -> dict:
        req = parse(params, pb.CancelTaskRequest)
        await self._op(call, "a2a.cancel", {"task": req.id, "to": call.to}, f"a2a:{call.to}:cancel:{req.id}")
        return await self.task(call, req.id)

    # --- push configs -------------------------------------------------------------------

    async def push_create(self, call: Call, params: Any) -> dict:
        req = parse(params, pb.TaskPushNotificationConfig)
        config: dict[str, Any] = {"url": req.url}
        if req.id:
            config["id"] = req.id
        if req.token:
            config["token"] = req.token
        if req.HasField("authentication"):
            config["authentication"] = {"scheme": req.authentication.scheme, "credentials": req.authentication.credentials}
        digest = hashlib.sha256(req.SerializeToString(deterministic=True)).hexdigest()[:32]
        args = {"task": req.task_id, "config": config, "to": call.to}
        got = await self._op(call, "a2a.push.set", args, f"a2a:{call.to}:push:{digest}")
        return _push_json(got["task"], got["config"])

    async def _configs(self, call: Call, task: str) -> list[dict]:
        got = await self._op(call, "a2a.push.list", {"task": task, "to": call.to})
        return [_push_json(task, c) for c in got.get("items", [])]

    async def push_get(self, call: Call, params: Any) -> dict:
        req = parse(params, pb.GetTaskPushNotificationConfigRequest)
        for c in await self._configs(call, req.task_id):
            if c["id"] == req.id:
                return c
        raise from_rejection(
            {"code": "not_found", "reason": f"push config {req.id[:64]!r} of Task {req.task_id[:64]!r} was not found, or you may not read it", "next": "stop"}
        )

    async def push_list(self, call: Call, params: Any) -> dict:
        req = parse(params, pb.ListTaskPushNotificationConfigsRequest)
        return {"configs": await self._configs(call, req.task_id), "nextPageToken": ""}

    async def push_delete(self, call: Call, params: Any) -> None:
        req = parse(params, pb.DeleteTaskPushNotificationConfigRequest)
        args = {"task": req.task_id, "config": req.id, "to": call.to}
        await self._op(call, "a2a.push.clear", args, f"a2a:{call.to}:unpush:{req.task_id}:{req.id}")
        return None


def with_receipt(task: dict, receipt: dict) -> dict:
    """The Task a send answers, ``metadata[E].receipt`` holding the send's receipt."""
    meta = dict(task.get("metadata") or {})
    meta[EXTENSION] = {**(meta.get(EXTENSION) or {}), "receipt": receipt}
    return {**task, "metadata": meta}


def _push_json(task: str, config: dict) -> dict:
    out = {"taskId": task, "id": config.get("id", ""), "url": config.get("url", "")}
    if config.get("token"):
        out["token"] = config["token"]
    if config.get("authentication"):
        out["authentication"] = {"scheme": config["authentication"].get("scheme", "")}
    return out
