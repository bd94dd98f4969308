"""Helpers for black-box tests: register agents, connect clients, check
rejections against WIRE.md, and drive raw websocket frames."""

from __future__ import annotations

import asyncio
import itertools
import json
import secrets
from typing import Any

import msgspec
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from kungfud.client import Client, new_key
from tests.wording import check_wording


async def register(url: str, name: str = "agent") -> tuple[str, str]:
    """A new agent through open registration: (agent id, key)."""
    async with await Client.connect(url) as c:
        r = await c.act("agent.register", {"content": {"name": name}})
        return r["agent"], r["key"]


async def agent_client(url: str, name: str = "agent") -> tuple[Client, str]:
    agent, key = await register(url, name)
    c = await Client.connect(url, key)
    c.agent = agent
    return c, agent


# --- black-box checks of WIRE.md "Failure" ------------------------------------

#: WIRE.md "Failure": the only codes and next steps a rejection may carry.
CODES = frozenset(
    {
        "bad_request",
        "unauthenticated",
        "not_found",
        "forbidden",
        "conflict",
        "idempotency_mismatch",
        "rate_limited",
        "too_large",
        "unavailable",
        "internal",
    }
)
NEXT_STEPS = frozenset({"retry", "wait", "revise", "stop"})

#: Ops marked A in WIRE.md that these tests use (they need a `key`).
ACTION_OPS = frozenset(
    {
        "agent.register",
        "admin.agent.set_status",
        "memory.create",
        "memory.update",
        "memory.publish",
        "memory.unpublish",
        "memory.withdraw",
    }
)

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"


def fake_id(prefix: str) -> str:
    """An id of the daemon's shape that names nothing (never issued)."""
    return prefix + "".join(secrets.choice(_ALPHABET) for _ in range(26))


def check_error(error: Any) -> dict:
    """WIRE.md "Failure": exactly code/reason/next (+ optional hint and rule), code
    and next from the closed sets, a reason a person can act on that names no
    internal reference (WIRE.md 1.1), a hint that is a call."""
    assert isinstance(error, dict), error
    assert {"code", "reason", "next"} <= error.keys() <= {"code", "reason", "next", "hint", "rule"}, error
    assert error["code"] in CODES, error
    assert error["next"] in NEXT_STEPS, error
    assert isinstance(error["reason"], str) and error["reason"].strip(), error
    check_wording(error["reason"], error.get("rule"), error)
    if "hint" in error:
        hint = error["hint"]
        assert isinstance(hint, dict) and hint.keys() == {"op", "args"}, error
        assert isinstance(hint["op"], str) and isinstance(hint["args"], dict), error
    return error


def check_failure(resp: dict, code: str | None = None, req_id: Any = ...) -> dict:
    """A whole failure response: ``{"id", "ok": false, "error"}``; returns the error."""
    assert resp.get("ok") is False, resp
    assert set(resp) == {"id", "ok", "error"}, resp
    if req_id is not ...:
        assert resp["id"] == req_id and type(resp["id"]) is type(req_id), resp
    err = check_error(resp["error"])
    if code is not None:
        assert err["code"] == code, resp
    return err


async def call(client: Any, op: str, args: dict | None = None, *, key: str | None = None) -> dict:
    """One request through the client library; actions get a fresh key unless
    one is given. Returns the whole response."""
    if key is None and op in ACTION_OPS:
        key = new_key()
    return await client.request(op, args or {}, key=key)


async def rejected(client: Any, op: str, args: dict | None = None, code: str | None = None, *, key: str | None = None) -> dict:
    """The request must fail with ``code``; returns the checked error object."""
    return check_failure(await call(client, op, args, key=key), code)


# --- raw websocket frames ---------------------------------------------------------


class _Reply(msgspec.Struct):
    """Decodes a success frame keeping ``result`` as the exact bytes sent."""

    id: Any
    ok: bool
    replayed: bool = False
    result: msgspec.Raw = msgspec.Raw(b"null")
    error: Any = None


_reply_dec = msgspec.json.Decoder(_Reply)


def raw_result(frame: str) -> bytes:
    """The exact JSON text of ``result`` inside a response frame."""
    return bytes(_reply_dec.decode(frame).result)


class Raw:
    """A bare websocket: arbitrary frames out, replies matched by id (they may
    arrive in any order)."""

    def __init__(self, ws: ClientConnection):
        self.ws = ws
        self._buffer: dict[str, str] = {}
        self._ids = itertools.count(1)

    @classmethod
    async def connect(cls, url: str, key: str | None = None, **kw: Any) -> "Raw":
        headers = {"Authorization": f"Bearer {key}"} if key else None
        ws = await connect(url, additional_headers=headers, compression=None, max_size=None, **kw)
        return cls(ws)

    async def __aenter__(self) -> "Raw":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def close(self) -> None:
        await self.ws.close()

    def next_id(self) -> int:
        return next(self._ids)

    async def send(self, frame: Any) -> None:
        await self.ws.send(frame if isinstance(frame, (str, bytes)) else json.dumps(frame))

    async def recv_text(self, timeout: float = 10.0) -> str:
        return await asyncio.wait_for(self.ws.recv(), timeout)

    async def recv(self, timeout: float = 10.0) -> dict:
        return json.loads(await self.recv_text(timeout))

    async def reply_text(self, req_id: Any, timeout: float = 10.0) -> str:
        """The raw reply frame for ``req_id`` (others are kept for later)."""
        want = json.dumps(req_id)
        while want not in self._buffer:
            text = await self.recv_text(timeout)
            self._buffer[json.dumps(json.loads(text).get("id"))] = text
        return self._buffer.pop(want)

    async def call_text(self, frame: dict, timeout: float = 10.0) -> str:
        await self.send(frame)
        return await self.reply_text(frame["id"], timeout)

    async def call(self, frame: dict, timeout: float = 10.0) -> dict:
        return json.loads(await self.call_text(frame, timeout))

    async def req(self, op: str, args: dict | None = None, *, key: str | None = None) -> dict:
        frame: dict[str, Any] = {"id": self.next_id(), "op": op, "args": args or {}}
        if key is not None:
            frame["key"] = key
        elif op in ACTION_OPS:
            frame["key"] = new_key()
        return await self.call(frame)

    async def closed_with(self, timeout: float = 10.0) -> int | None:
        """Wait until the server closes the connection; the close code it sent."""
        try:
            while True:
                await asyncio.wait_for(self.ws.recv(), timeout)
        except ConnectionClosed as e:
            return e.rcvd.code if e.rcvd is not None else None
