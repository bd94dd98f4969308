"""Hostile input (issue 6, item 6) against WIRE.md "Transport" and "Frames".

* ``test_wire_20000_hostile_frames``: 20,000 frames — hypothesis JSON values,
  envelope-shaped frames with random fields, and mutations of valid frames of
  every op (flipped, inserted and deleted characters, truncation, wrong types,
  huge numbers, unknown fields, invalid escapes and lone surrogates, raw control
  characters, nesting around the decoder's limit) — over four connections (header
  auth, hello auth, a second header-auth agent, unauthenticated) to one daemon.
  Every frame gets exactly one reply within 10 s on an open connection (0 hangs,
  nothing closes: no frame is binary or oversized); every reply is a success or
  a WIRE.md error (code from the set, never ``internal``; ``next`` from the set);
  a frame that is not a request is ``bad_request`` and its ``id`` is echoed when
  one can be read; after every batch each connection still answers a valid
  request and the daemon process is alive (0 crashes).
* size bombs around ``max_frame_bytes`` (configured to 8 KiB): a frame of
  exactly the limit is served, one byte more closes 1009 (also when the excess
  comes in a continuation fragment);
* nesting bombs: content nested up to the decoder's limit is accepted and
  round-trips byte for byte through storage, reads, replays, a restart and
  ``kungfud check``; one level deeper is ``bad_request`` echoing the id;
* binary frames close 1003; invalid UTF-8 in a text frame (sent over a raw
  socket, which websockets clients refuse to do) fails that connection only.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import os
import re
import string
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from kungfud.wire import MAX_DEPTH
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from kungfud.client import Client, new_key
from kungfud.wire import OPS
from tests.e2e.helpers import Raw, check_error, register

from .conftest import OP_BINARY, OP_CONT, OP_TEXT, ROOT, RawWS, kungfud_check

FRAMES = int(os.environ.get("KUNGFUD_HOSTILE_FRAMES", "20000"))
BATCH = 25
EXAMPLES = FRAMES // BATCH
REPLY_TIMEOUT = 10.0
# conn-u stays unauthenticated for the whole run on purpose (its replies are
# checked); the door's hello deadline (D231) is tests/e2e/test_door.py's, so here
# it is the longest the configuration takes.
CONFIG = "[limits]\nactions_per_minute = 1000000\n[server]\nhello_within_s = 3600\n"

ENVELOPE_KEYS = {"id", "op", "args", "key"}
FIELD_NAMES = sorted(
    {
        "content", "memory", "version", "author", "cursor", "limit", "thread", "role", "token", "agent", "status",
        "entry", "reply_to", "ask", "task", "assign", "to", "criteria", "deliver", "assignment", "verdict",
        "reason", "note", "audience", "contract", "engagement", "full", "newest_first", "mine", "since", "key", "name",
        "deliver_within_s", "judge_within_s", "redoes", "inputs", "adoption_limit", "judge", "eligibility",
        "agents", "readers", "on_no_judgment", "output", "contract_version",
    }
)


# --- what a reply may be ----------------------------------------------------------


class _Strict(Exception):
    pass


def _no_inf(text: str) -> float:
    v = float(text)
    if math.isinf(v):
        raise _Strict("number out of range")
    return v


def _no_constant(text: str) -> Any:
    raise _Strict(f"{text} is not JSON")


def strict_parse(frame: str) -> tuple[bool, Any]:
    """(True, value) when ``frame`` is one RFC 8259 JSON text that any conforming
    decoder reads the same way (no NaN/Infinity, no number overflowing a double,
    no lone surrogate escapes)."""
    try:
        value = json.loads(frame, parse_constant=_no_constant, parse_float=_no_inf)
        json.dumps(value, ensure_ascii=False).encode("utf-8")  # lone surrogates fail here
    except (ValueError, RecursionError, _Strict, UnicodeEncodeError):
        return False, None
    return True, value


def _lenient(frame: str) -> Any:
    """The frame as a JSON decoder that reads overflowing numbers as infinity
    sees it (None when it is not JSON at all)."""
    try:
        return json.loads(frame)
    except (ValueError, RecursionError):
        return None


def valid_id(v: Any) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, int):
        return -(2**63) <= v < 2**63
    return isinstance(v, str) and len(v) <= 64


def is_request(value: Any) -> bool:
    """Whether a parsed frame is a well-formed envelope (WIRE.md "Frames"); its
    args may still be wrong, which is ``bad_request`` too, or not."""
    if not isinstance(value, dict) or not {"id", "op"} <= value.keys() <= ENVELOPE_KEYS:
        return False
    if not valid_id(value["id"]) or not isinstance(value["op"], str) or value["op"] not in OPS:
        return False
    if "args" in value and not isinstance(value["args"], dict):
        return False
    key = value.get("key", None)
    if OPS[value["op"]].kind == "A":
        return isinstance(key, str) and 1 <= len(key) <= 128 and all(" " <= c <= "~" for c in key)
    return "key" not in value


def check_reply(frame: str, reply: dict, authenticated: bool) -> str:
    """WIRE.md "Success"/"Failure" for the reply to ``frame``; returns its code
    (``ok`` for a success)."""
    ok, value = strict_parse(frame)

    def must(cond: bool, what: str) -> None:
        assert cond, f"{what}: {frame[:300]!r} -> {json.dumps(reply)[:300]}"

    if reply.get("ok") is True:
        must(set(reply) == {"id", "ok", "replayed", "result"} and isinstance(reply["replayed"], bool), "success shape")
        must(ok and is_request(value), "a success for a frame that is not a request")
        must(reply["id"] == value["id"] and type(reply["id"]) is type(value["id"]), "id not echoed")
        must(authenticated or value["op"] in ("hello", "agent.register"), "served before authentication")
        return "ok"
    must(reply.get("ok") is False and set(reply) == {"id", "ok", "error"}, "failure shape")
    try:
        err = check_error(reply["error"])  # code and next from WIRE.md's sets, a reason, a hint that is a call
    except AssertionError:
        must(False, "error object outside WIRE.md")
    must(err["code"] != "internal", "internal: the daemon failed on a frame")
    # Client text in a reason is cut to 64 characters (WIRE.md 1.1): no reason
    # grows with what the frame holds.
    must(len(err["reason"]) <= 400, "a reason echoing unbounded client text")
    must(err["code"] != "rate_limited" or err["next"] == "wait", "rate_limited without next: wait")
    if not (ok and is_request(value)):
        # Before authentication only the envelope is read (docs/decisions.md D51):
        # a well-formed envelope of an op that needs an agent is `unauthenticated`
        # whatever its args hold — a number overflowing a double included.
        lenient = _lenient(frame)
        envelope_only = not authenticated and is_request(lenient) and not OPS[lenient["op"]].open
        must(
            err["code"] == "bad_request" or (envelope_only and err["code"] == "unauthenticated"),
            f"not a request, yet {err['code']}",
        )
    # The id is echoed whenever the frame lets one be read (WIRE.md "Transport").
    rid = value.get("id") if ok and isinstance(value, dict) else None
    if ok and isinstance(value, dict) and valid_id(rid):
        must(reply["id"] == rid and type(reply["id"]) is type(rid), "id not echoed")
    elif isinstance(rid, int) and not isinstance(rid, bool):
        # An integer beyond 64 bits: the daemon refuses it as an id; it may still echo it.
        must(reply["id"] is None or reply["id"] == rid, "a different id")
    elif ok and isinstance(value, dict) and "id" in value:
        must(reply["id"] is None, "an invalid id echoed")
    else:
        must(reply["id"] is None or valid_id(reply["id"]), "an invalid id")
    return err["code"]


# --- the frames --------------------------------------------------------------------

_json_leaf = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
)
json_values = st.recursive(
    _json_leaf,
    lambda c: st.lists(c, max_size=5) | st.dictionaries(st.text(max_size=12) | st.sampled_from(FIELD_NAMES), c, max_size=5),
    max_leaves=12,
)
_ids = (
    st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.text(max_size=70)
    | st.sampled_from([True, False, None, 1.5, -0.0, 2**63, -(2**63) - 1, 10**30, [], {}, "x" * 64, "x" * 65])
)
# agent.rotate_key with `{}` (a likely mutation) would close the fuzzing
# connection by design (4001, WIRE.md "Operating a deployment"): it is not
# fuzzed here; tests/e2e/test_operators.py covers it.
KEY_CHANGING = frozenset({"agent.rotate_key"})
_ops = st.sampled_from(sorted(set(OPS) - KEY_CHANGING)) | st.text(max_size=20) | st.sampled_from(["memory.destroy", "", "Hello", "turn "])
_keys = st.text(alphabet=string.printable, min_size=0, max_size=130) | st.just("k" * 129) | json_values


def _dumps(v: Any, ascii_only: bool) -> str:
    return json.dumps(v, ensure_ascii=ascii_only)


@st.composite
def json_frames(draw: st.DrawFn) -> str:
    return _dumps(draw(json_values), draw(st.booleans()))


@st.composite
def envelope_frames(draw: st.DrawFn) -> str:
    """Envelope-shaped frames: real ops and field names, random values."""
    frame: dict[str, Any] = {}
    if draw(st.integers(0, 9)):
        frame["id"] = draw(_ids)
    if draw(st.integers(0, 9)):
        frame["op"] = draw(_ops)
    if draw(st.integers(0, 4)):
        frame["args"] = draw(
            st.dictionaries(st.sampled_from(FIELD_NAMES), json_values | st.sampled_from(REAL_VALUES), max_size=4)
            | json_values
        )
    if draw(st.booleans()):
        frame["key"] = draw(_keys)
    if not draw(st.integers(0, 15)):
        frame[draw(st.text(max_size=8))] = draw(json_values)
    items = list(frame.items())
    order = draw(st.permutations(range(len(items))))
    return _dumps(dict(items[i] for i in order), draw(st.booleans()))


# Filled once the daemon has real objects: (frame dict) of every op, and ids.
CORPUS: list[dict] = []
REAL_VALUES: list[Any] = []

_NUMBERS = ["1e999", "-1e999", "1" + "0" * 400, "0x10", "01", ".5", "+1", "NaN", "Infinity", "-0", "1e-400",
            "18446744073709551616", "9007199254740993", "-9223372036854775809", "2.5e308", "1E2"]
_ESCAPES = ["\\ud800", "\\udc00\\ud800", "\\ud83d\\ude00", "\\x41", "\\u12", "\\", "\\uZZZZ", "\\'", "\\u0000",
            "\\uDFFF", "\\/", "\\a"]
_DEPTHS = [10, 100, 500, 900, 960, 970, 974, 975, 976, 977, 978, 979, 980, 981, 985, 990, 1000, 1200, 5000]
_safe_chars = st.characters(exclude_categories=("Cs",))


def _paths(v: Any, path: tuple = ()) -> list[tuple]:
    out = [path]
    if isinstance(v, dict):
        for k, x in v.items():
            out += _paths(x, path + (k,))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            out += _paths(x, path + (i,))
    return out


def _copy(v: Any) -> Any:
    return json.loads(json.dumps(v))


def _set(v: Any, path: tuple, new: Any) -> Any:
    """``v`` with the value at ``path`` replaced; copies, so that nothing shared
    (the corpus, REAL_VALUES) ever changes and generation stays deterministic."""
    if not path:
        return _copy(new)
    v = _copy(v)
    cur = v
    for p in path[:-1]:
        cur = cur[p]
    cur[path[-1]] = _copy(new)
    return v


def _drop(v: Any, path: tuple) -> Any:
    if not path:
        return v
    v = _copy(v)
    cur = v
    for p in path[:-1]:
        cur = cur[p]
    del cur[path[-1]]
    return v


@st.composite
def mutated_frames(draw: st.DrawFn) -> str:
    """A valid frame of some op, mutated one to three times (JSON-level first,
    then text-level)."""
    base = draw(st.sampled_from(CORPUS))
    value: Any = _copy(base)  # the corpus never changes
    if "key" in value:
        value["key"] = draw(st.uuids()).hex  # a fresh key: a mutation that stays valid really acts
    for _ in range(draw(st.integers(0, 2))):
        paths = _paths(value)
        path = draw(st.sampled_from(paths))
        how = draw(st.integers(0, 7))
        if how == 0:
            value = _set(value, path, draw(json_values))  # wrong type / random value
        elif how == 1 and path:
            value = _drop(value, path)  # a missing field
        elif how == 2 and isinstance(value, dict):
            target = value
            for p in path:
                if isinstance(target, (dict, list)):
                    target = target[p]
            if isinstance(target, dict):
                target[draw(st.sampled_from(FIELD_NAMES) | st.text(max_size=8))] = draw(json_values)
        elif how == 3:
            value = _set(value, path, draw(st.sampled_from(
                [2**63, -(2**63) - 1, 10**40, 2**53 + 1, 0, -1, 31_536_001, 2**64 - 1, 2**64])))
        elif how == 4:
            value = _set(value, path, draw(st.sampled_from(REAL_VALUES)))
        elif how == 5:  # review L1/L6: digits int() cannot read, huge client text
            value = _set(value, path, draw(st.sampled_from(["²", "①", "١", "1\n", "0x1", "A" * 100_000])))
        elif how == 6 and isinstance(value, dict) and isinstance(value.get("args"), dict):
            value["args"]["f" * draw(st.sampled_from([65, 5000, 100_000]))] = 1  # an unknown field, echoed cut
        else:
            value = _set(value, path, "x" * draw(st.sampled_from([0, 63, 64, 65, 128, 129, 200, 201, 256, 257, 1001])))
    text = _dumps(value, draw(st.booleans()))
    for _ in range(draw(st.integers(0 if value != base else 1, 2))):
        how = draw(st.integers(0, 8))
        i = draw(st.integers(0, len(text)))
        if how == 0 and text:  # flip one character
            i = min(i, len(text) - 1)
            text = text[:i] + draw(_safe_chars) + text[i + 1 :]
        elif how == 1:  # truncate
            text = text[:i]
        elif how == 2:  # insert
            text = text[:i] + draw(st.text(_safe_chars, min_size=1, max_size=8)) + text[i:]
        elif how == 3:  # delete a range
            text = text[:i] + text[i + draw(st.integers(1, 10)) :]
        elif how == 4:  # duplicate a range
            j = min(len(text), i + draw(st.integers(1, 20)))
            text = text[:j] + text[i:j] + text[j:]
        elif how == 5:  # a number no decoder agrees on
            m = list(re.finditer(r"-?\d+(\.\d+)?([eE][-+]?\d+)?", text))
            if m:
                hit = draw(st.sampled_from(m))
                text = text[: hit.start()] + draw(st.sampled_from(_NUMBERS)) + text[hit.end() :]
        elif how == 6:  # an escape inside a string: invalid, lone surrogate, or fine
            m = [q.end() for q in re.finditer(r'"(?=[^"]*")', text)]
            if m:
                at = draw(st.sampled_from(m))
                text = text[:at] + draw(st.sampled_from(_ESCAPES)) + text[at:]
        elif how == 7:  # a raw control character
            text = text[:i] + chr(draw(st.integers(0, 31))) + text[i:]
        else:  # nesting around the limit, at some value position
            m = [q.end() for q in re.finditer(r":\s*", text)]
            if m:
                at = draw(st.sampled_from(m))
                d = draw(st.sampled_from(_DEPTHS))
                opener, closer = draw(st.sampled_from([("[", "]"), ('{"a":', "}")]))
                end = text.find(",", at)
                end = end if end != -1 else len(text) - 1
                text = text[:at] + opener * d + text[at:end] + closer * d + text[end:]
    return text


frames = st.one_of(json_frames(), envelope_frames(), mutated_frames(), mutated_frames())


# --- the daemon side -------------------------------------------------------------------


class Conn:
    """A raw websocket connection whose frames are answered one at a time."""

    def __init__(self, raw: Raw, authenticated: bool, name: str):
        self.raw = raw
        self.authenticated = authenticated
        self.name = name
        self.replies = 0
        self.events = 0

    async def exchange(self, frame: str) -> dict:
        await self.raw.send(frame)
        deadline = time.monotonic() + REPLY_TIMEOUT
        while True:
            left = deadline - time.monotonic()
            try:
                text = await self.raw.recv_text(timeout=max(0.01, left))
            except asyncio.TimeoutError:
                raise AssertionError(f"hang: no reply within {REPLY_TIMEOUT}s on {self.name} to {frame[:300]!r}") from None
            except Exception as e:
                raise AssertionError(f"{self.name} closed after {frame[:300]!r}: {e!r}") from None
            reply = json.loads(text)
            if "event" in reply:  # a mutated `subscribe` may have subscribed: events are not replies
                self.events += 1
                continue
            self.replies += 1
            return reply


async def _corpus(url: str) -> tuple[list[Conn], dict]:
    """Real objects, a valid frame of every op, and the four connections."""
    a_id, a_key = await register(url, "fuzz-a")
    b_id, b_key = await register(url, "fuzz-b")
    c_id, c_key = await register(url, "fuzz-c")
    async with await Client.connect(url, a_key) as a, await Client.connect(url, b_key) as b:
        mem = (await a.act("memory.create", {"content": {"text": "fuzz"}}))["memory"]
        await a.act("memory.publish", {"memory": mem})
        th = (await a.act("thread.create", {"content": {"title": "fuzz"}}))["thread"]
        grant = await a.act("thread.admit", {"thread": th, "role": "speaker"})
        await b.act("thread.join", {"token": grant["token"]})
        post = await a.act(
            "thread.post",
            {"thread": th, "content": {"q": 1}, "ask": [b_id], "assign": {"to": b_id, "content": {"criteria": "c"}}},
        )
        asg = post["assignment"]
        tk = (await a.act("task.create", {"audience": "open", "contract": {"content": {"output": "o", "criteria": "c"}}}))["task"]
        en = (await b.act("task.take", {"task": tk}))["engagement"]
    ref = {"memory": mem, "version": 1}
    contract = {"content": {"output": "o", "criteria": "c"}, "inputs": [ref], "deliver_within_s": 60, "judge": b_id,
                "eligibility": {"agents": [b_id]}, "readers": "public", "adoption_limit": 2, "on_no_judgment": "adopt"}
    args = {
        "hello": {"key": "kf_" + "0" * 43},
        "agent.register": {"content": {"name": "fuzzed"}},
        "agent.whoami": {},
        "admin.agent.set_status": {"agent": b_id, "status": "deactivated"},
        "admin.agent.create": {"content": {"name": "fuzzed"}},
        "admin.agent.list": {"status": "active", "cursor": None, "limit": 10},
        "admin.agent.reset_key": {"agent": b_id},
        "memory.create": {"content": {"text": "hi", "n": [1, 2.5, None, True]}},
        "memory.update": {"memory": mem, "content": {"text": "v2"}},
        "memory.publish": {"memory": mem},
        "memory.unpublish": {"memory": mem},
        "memory.withdraw": {"memory": mem},
        "memory.get": {"memory": mem, "version": 1},
        "memory.list": {"author": a_id, "cursor": None, "limit": 10},
        "thread.create": {"content": {"title": "t"}},
        "thread.admit": {"thread": th, "role": "observer"},
        "thread.void_admission": {"thread": th},
        "thread.join": {"token": "kt_" + "0" * 43},
        "thread.leave": {"thread": th},
        "thread.remove": {"thread": th, "agent": b_id},
        "thread.set_role": {"thread": th, "agent": b_id, "role": "observer"},
        "thread.post": {"thread": th, "memory": ref, "reply_to": 1, "ask": [b_id],
                        "assign": {"to": b_id, "content": {"criteria": "c"}, "deliver_within_s": 60,
                                   "judge_within_s": 60, "redoes": asg}},
        "thread.handle": {"thread": th, "entry": 1, "content": {"note": "seen"}},
        "thread.retract": {"thread": th, "entry": 1},
        "thread.close": {"thread": th},
        "thread.get": {"thread": th},
        "thread.entries": {"thread": th, "cursor": None, "limit": 5, "full": True, "newest_first": True},
        "thread.entry": {"thread": th, "entry": 1},
        "thread.assignments": {"thread": th},
        "thread.list": {"cursor": None, "limit": 5},
        "assignment.take": {"assignment": asg, "deliver": {"content": {"r": 1}}},
        "assignment.deliver": {"assignment": asg, "memory": ref},
        "assignment.judge": {"assignment": asg, "verdict": "reject", "content": {"reason": "no"}},
        "assignment.drop": {"assignment": asg},
        "assignment.void": {"assignment": asg},
        "assignment.get": {"assignment": asg},
        "task.create": {"audience": {"agents": [b_id]}, "contract": contract},
        "task.revise": {"task": tk, "contract": contract},
        "task.pause": {"task": tk},
        "task.resume": {"task": tk},
        "task.take": {"task": tk, "deliver": {"memory": ref}},
        "task.deliver": {"engagement": en, "content": {"d": 1}},
        "task.drop": {"engagement": en},
        "task.judge": {"engagement": en, "verdict": "adopt"},
        "task.get": {"task": tk, "contract_version": 1},
        "task.list": {"cursor": None, "limit": 5, "mine": True},
        "engagement.get": {"engagement": en},
        "turn": {"cursor": None, "limit": 5},
        "opportunities": {"limit": 5},
        "outcomes": {"cursor": None, "limit": 5},
        "subscribe": {},
        "webhook.set": {"url": "https://93.184.216.34/hook", "events": ["turn", "outcome"]},  # a literal: no DNS
        "webhook.get": {},
        "webhook.clear": {},
        "search": {"q": "hello wor*", "limit": 5},
        "agent.key.create": {"scope": "read", "label": "fuzz", "expires_in_s": 3600},
        "agent.key.list": {},
        "agent.key.revoke": {"key_id": "ky_" + "0" * 26},
        "a2a.card.set": {"content": {"name": "fuzz", "description": "d"}, "accept": "any"},
        "a2a.card.get": {"agent": b_id},
        "a2a.card.clear": {},
        "a2a.send": {"to": b_id, "message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}},
        "a2a.cancel": {"task": tk},
        "a2a.task": {"task": tk, "history_length": 2},
        "a2a.tasks": {"limit": 5},
        "a2a.push.set": {"task": tk, "config": {"url": "https://93.184.216.34/push", "token": "t"}},
        "a2a.push.list": {"task": tk},
        "a2a.push.clear": {"task": tk, "config": "pc_x"},
    }
    assert set(args) == set(OPS) - KEY_CHANGING, (set(OPS) - KEY_CHANGING) ^ set(args)
    CORPUS.clear()
    ids = itertools.count(1)
    for op, a_args in args.items():
        frame: dict[str, Any] = {"id": next(ids), "op": op, "args": a_args}
        if OPS[op].kind == "A":
            frame["key"] = "fixed-key"
        CORPUS.append(frame)
        CORPUS.append({"id": f"s-{op}", "op": op, "args": a_args, **({"key": "k"} if "key" in frame else {})})
    REAL_VALUES[:] = [a_id, b_id, c_id, mem, th, asg, tk, en, ref, 1, 2, "adopt", "speaker", "governor", {"note": "x"}]
    conns = [
        Conn(await Raw.connect(url, a_key), True, "conn-a (header auth)"),
        Conn(await Raw.connect(url), True, "conn-b (hello auth)"),
        Conn(await Raw.connect(url, c_key), True, "conn-c (header auth)"),
        Conn(await Raw.connect(url), False, "conn-u (unauthenticated)"),
    ]
    hello = await conns[1].exchange(json.dumps({"id": "h", "op": "hello", "args": {"key": b_key}}))
    assert hello["ok"] is True, hello
    return conns, {"a": a_id, "b": b_id, "c": c_id}


async def _alive(conns: list[Conn], agents: dict) -> None:
    for c, who in zip(conns, ("a", "b", "c", None)):
        if c.authenticated:
            r = await c.exchange('{"id":"alive","op":"agent.whoami","args":{}}')
            assert r["ok"] is True and r["result"]["agent"] == agents[who], (c.name, r)
        else:
            r = await c.exchange('{"id":"alive","op":"agent.whoami","args":{}}')
            assert r["ok"] is False and r["error"]["code"] == "unauthenticated", (c.name, r)


@pytest.mark.rules("L2-3", "L2-4")
def test_wire_20000_hostile_frames_get_a_wire_reply_and_never_crash_or_hang(make_daemon):
    d = make_daemon(CONFIG, name="fuzz")
    loop = asyncio.new_event_loop()
    limit_before = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit_before, 10_000))  # strict_parse reads as deep as the daemon does
    codes: dict[str, int] = {}
    problems: dict[str, list[str]] = {}  # a wrong reply, by kind: examples (fuzzing goes on)
    fatal: list[BaseException] = []  # a hang, a closed connection, a dead daemon: fuzzing stops
    sent = 0
    try:
        conns, agents = loop.run_until_complete(_corpus(d.url))
        started = time.monotonic()

        async def lane(c: Conn, mine: list[str]) -> None:
            for f in mine:
                reply = await c.exchange(f)
                try:
                    code = check_reply(f, reply, c.authenticated)
                except AssertionError as e:
                    why = str(e).split("\n")[0]
                    kind = reply.get("error", {}).get("code", "ok") if isinstance(reply, dict) else "?"
                    problems.setdefault(kind, []).append(why[:600])
                    code = f"wrong:{kind}"
                codes[code] = codes.get(code, 0) + 1

        async def batch(frames_: list[str]) -> None:
            nonlocal sent
            async with asyncio.TaskGroup() as tg:  # one failure cancels the other lanes
                for i, c in enumerate(conns):
                    tg.create_task(lane(c, frames_[i :: len(conns)]))
            sent += len(frames_)
            assert d.proc.poll() is None, "the daemon died"
            await _alive(conns, agents)

        @settings(
            max_examples=EXAMPLES,
            derandomize=True,
            deadline=None,
            database=None,
            phases=(Phase.explicit, Phase.generate),
            suppress_health_check=list(HealthCheck),
        )
        @given(st.lists(frames, min_size=BATCH, max_size=BATCH))
        def run(frames_: list[str]) -> None:
            # Failures are recorded here rather than raised into hypothesis: the
            # daemon is live state, so a replayed example cannot reproduce them;
            # each message names the frame.
            if fatal:
                return
            try:
                loop.run_until_complete(asyncio.wait_for(batch(frames_), 300))
            except BaseException as e:  # noqa: BLE001 - reported below
                fatal.append(e)

        run()
        elapsed = time.monotonic() - started
        events = sum(c.events for c in conns)
        print(
            f"hostile frames: {sent} frames in {elapsed:.1f}s over {len(conns)} connections; "
            f"replies by code {dict(sorted(codes.items()))}; {events} events"
        )
        if fatal:
            e = fatal[0]
            errors = [x for x in (e.exceptions if isinstance(e, BaseExceptionGroup) else [e])]
            raise AssertionError(f"after {sent} frames: " + "; ".join(repr(x) for x in errors)) from e
        assert not problems, "wrong replies:\n" + "\n".join(
            f"{kind}: {len(xs)} frames, e.g. " + " | ".join(xs[:3]) for kind, xs in problems.items()
        )
        assert sent >= FRAMES, sent
        assert codes.get("bad_request", 0) > sent // 2  # most of them were garbage
        loop.run_until_complete(_fresh(d.url))  # a fresh connection is served as well
        for c in conns:
            loop.run_until_complete(c.raw.close())
    finally:
        loop.close()
        sys.setrecursionlimit(limit_before)


async def _fresh(url: str) -> None:
    async with await Raw.connect(url) as r:
        resp = await r.req("agent.register", {"content": {"name": "after the storm"}})
        assert resp["ok"] is True, resp


# --- size bombs -----------------------------------------------------------------------

SMALL = 8192


def _padded(size: int, fill: str = "x", req_id: Any = "big") -> str:
    """A valid memory.create frame of exactly ``size`` UTF-8 bytes, padded with
    ``fill`` (and a few ``x`` to make up the last bytes)."""
    head = json.dumps({"id": req_id, "op": "memory.create", "key": new_key(), "args": {"content": {"pad": ""}}})
    room = size - len(head.encode())
    per = len(fill.encode())
    assert room >= 0, (size, len(head))
    pad = fill * (room // per) + "x" * (room % per)
    frame = head.replace('"pad": ""', '"pad": "' + pad + '"')
    assert len(frame.encode()) == size
    return frame


@pytest.mark.rules("R12-11")
async def test_wire_size_bombs_frame_at_max_frame_bytes_is_served_one_byte_more_closes_1009(make_daemon):
    d = make_daemon(f"[server]\nmax_frame_bytes = {SMALL}\n", name="small")
    _, key = await register(d.url, "bomber")
    async with await Raw.connect(d.url, key) as r:
        # Exactly at the limit (counted in UTF-8 bytes): served.
        for fill in ("x", "é", "€", "😀"):
            await r.send(_padded(SMALL, fill))
            resp = await r.recv(timeout=15)
            assert resp["ok"] is True and resp["id"] == "big", (fill, resp)
        # Garbage of exactly the limit: bad_request, the connection stays.
        await r.send("{" + " " * (SMALL - 2) + "]")
        resp = await r.recv(timeout=15)
        assert resp["ok"] is False and resp["error"]["code"] == "bad_request" and resp["id"] is None, resp
        resp = await r.req("agent.whoami")
        assert resp["ok"] is True, resp
        # One byte more: close 1009.
        await r.send(_padded(SMALL + 1, "é"))
        assert await r.closed_with(timeout=15) == 1009
    # The excess arriving in a continuation fragment: also 1009.
    raw = await RawWS.connect(d.url, key)
    try:
        frame = _padded(SMALL + 1).encode()
        await raw.send(OP_TEXT, frame[:4000], fin=False)
        await raw.send(OP_CONT, frame[4000:8000], fin=False)
        await raw.send(OP_CONT, frame[8000:], fin=True)
        assert await raw.close_code() == 1009
    finally:
        raw.close()
    # A fragmented frame at the limit, split inside a multi-byte character: served.
    raw = await RawWS.connect(d.url, key)
    try:
        frame = _padded(SMALL, "é").encode()
        cut = frame.index("é".encode()) + 1  # between the two bytes of é
        await raw.send(OP_TEXT, frame[:cut], fin=False)
        await raw.send(OP_CONT, frame[cut:], fin=True)
        resp = json.loads(await raw.recv_text(15))
        assert resp["ok"] is True and resp["id"] == "big", resp
    finally:
        raw.close()
    await _fresh(d.url)
    assert d.proc.poll() is None


# --- nesting bombs -----------------------------------------------------------------------


def _nested(depth: int, kind: str = "list") -> Any:
    v: Any = "core"
    for _ in range(depth):
        v = [v] if kind == "list" else {"a": v}
    return v


def _nested_text(depth: int, kind: str = "list") -> str:
    return ("[" * depth + '"core"' + "]" * depth) if kind == "list" else ('{"a":' * depth + '"core"' + "}" * depth)


def _create(depth: int, kind: str, key: str, req_id: str = "deep") -> str:
    return '{"id":"%s","op":"memory.create","key":"%s","args":{"content":{"x":%s}}}' % (
        req_id, key, _nested_text(depth, kind))


@pytest.mark.rules("L1-1", "L1-4", "L3-2")
async def test_wire_nesting_up_to_the_decoders_limit_round_trips_and_one_level_more_is_bad_request(make_daemon):
    d = make_daemon(CONFIG, name="nest")
    _, key = await register(d.url, "nester")
    # This process decodes the replies: let it read as deep as the daemon writes.
    limit_before = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit_before, 10_000))
    try:
        await _nesting(d, key)
    finally:
        sys.setrecursionlimit(limit_before)


async def _nesting(d: Any, key: str) -> None:
    accepted: dict[str, tuple[str, str, int]] = {}  # kind -> (memory, key, depth)
    over: dict[str, dict] = {}  # kind -> the reply one level deeper
    async with await Raw.connect(d.url, key) as r:
        for kind in ("list", "object"):
            # The deepest content the daemon accepts, by bisection.
            lo, hi, best = 1, 5000, None
            while lo <= hi:
                mid = (lo + hi) // 2
                k = new_key()
                resp = json.loads(await _send_text(r, _create(mid, kind, k)))
                assert resp["id"] == "deep", resp
                if resp["ok"]:
                    best = (resp["result"]["memory"], k, mid)
                    lo = mid + 1
                else:
                    hi = mid - 1
            # `args` may nest MAX_DEPTH levels: args → content → x take two of them.
            assert best is not None and best[2] == MAX_DEPTH - 2, best
            accepted[kind] = best
            over[kind] = json.loads(await _send_text(r, _create(best[2] + 1, kind, new_key(), "over")))
            print(f"nesting ({kind}): content nested {best[2]} deep is accepted; {best[2] + 1} -> {over[kind]}")
        # Far beyond: a bad_request with the id read from the front of the frame.
        resp = json.loads(await _send_text(r, '{"id":"bomb","op":"memory.list","args":' + _nested_text(200_000) + "}"))
        assert resp["ok"] is False and resp["error"]["code"] == "bad_request" and resp["id"] == "bomb", resp
        bomb = '{"id":"bomb2","op":"memory.create","key":"b","args":{"content":' + _nested_text(150_000, "object") + "}}"
        resp = json.loads(await _send_text(r, bomb))
        assert resp["ok"] is False and resp["error"]["code"] == "bad_request" and resp["id"] == "bomb2", resp
    # Accepted deep content round-trips: read, replay (L3-2), kill -9 and restart, check.
    problems: list[str] = []
    for attempt in ("live", "after kill -9 and restart"):
        async with await Raw.connect(d.url, key) as r:
            for kind, (memory, k, depth) in accepted.items():
                want = {"x": _nested(depth, kind)}
                resp = json.loads(await _send_text(r, '{"id":"g","op":"memory.get","args":{"memory":"%s"}}' % memory))
                if not (resp["ok"] is True and resp["result"]["content"] == want):
                    problems.append(f"{attempt}: memory.get of the {kind} nested {depth} deep -> {str(resp)[:200]}")
                resp = json.loads(await _send_text(r, _create(depth, kind, k, "again")))
                if not (resp["ok"] is True and resp["replayed"] is True and resp["result"]["memory"] == memory):
                    problems.append(
                        f"{attempt}: replay of the acknowledged memory.create of content nested {depth} deep "
                        f"({kind}, receipt {memory}) -> {resp}"
                    )
        c = kungfud_check(d.data_dir)
        if c.returncode != 0:
            problems.append(f"{attempt}: kungfud check: {c.stdout}{c.stderr}")
        if attempt == "live":
            d.kill()
            d.start()
    # One level more than accepted: bad_request naming the nesting, the id echoed
    # (WIRE.md "Transport": a text frame that is not a valid request is bad_request).
    for kind, resp in over.items():
        if not (resp["ok"] is False and resp["id"] == "over" and resp["error"]["code"] == "bad_request"):
            problems.append(f"content nested {accepted[kind][2] + 1} deep ({kind}): expected bad_request, got {resp}")
    assert not problems, "\n".join(problems)


async def _send_text(r: Raw, frame: str) -> str:
    await r.send(frame)
    return await r.recv_text(timeout=20)


# --- binary frames and invalid UTF-8 ---------------------------------------------------------


async def test_wire_binary_frames_close_1003_and_nothing_else(daemon):
    _, key = await register(daemon.url, "binary")
    for payload in (b"", b'{"id":1,"op":"agent.whoami","args":{}}', bytes(range(256)) * 8):
        other = await Raw.connect(daemon.url, key)
        raw = await RawWS.connect(daemon.url, key)
        try:
            await raw.send_text('{"id":1,"op":"agent.whoami","args":{}}')
            assert json.loads(await raw.recv_text())["ok"] is True
            await raw.send(OP_BINARY, payload)
            assert await raw.close_code() == 1003, payload[:20]
            resp = await other.req("agent.whoami")  # another connection is untouched
            assert resp["ok"] is True, resp
        finally:
            raw.close()
            await other.close()
    # A binary fragment opening a fragmented message: 1003 as well.
    raw = await RawWS.connect(daemon.url, key)
    try:
        await raw.send(OP_BINARY, b"{", fin=False)
        await raw.send(OP_CONT, b"}", fin=True)
        assert await raw.close_code() == 1003
    finally:
        raw.close()
    await _fresh(daemon.url)


INVALID_UTF8 = [
    b'{"id":1,"op":"agent.whoami","args":{},"x":"\xff"}',  # a byte that is never UTF-8
    b'{"id":2,"op":"memory.create","key":"k","args":{"content":{"x":"\xc0\xaf"}}}',  # overlong "/"
    b'{"id":3,"op":"memory.create","key":"k","args":{"content":{"x":"\xed\xa0\x80"}}}',  # an encoded surrogate
    b'{"id":4,"op":"memory.create","key":"k","args":{"content":{"x":"\xf4\x90\x80\x80"}}}',  # beyond U+10FFFF
    b'{"id":5,"op":"agent.whoami","args":{}}\xe2\x82',  # a truncated sequence at the end
]


async def test_wire_invalid_utf8_in_a_text_frame_fails_only_that_connection(daemon):
    """A text frame must be UTF-8 (RFC 6455 §8.1: the endpoint fails the
    connection, close 1007). Observed: the daemon (websockets) closes that
    connection with 1007 — not the ``bad_request`` WIRE.md gives other invalid
    text frames, which RFC 6455 does not permit — writes nothing, and serves
    everyone else."""
    _, key = await register(daemon.url, "utf8")
    async with await Raw.connect(daemon.url, key) as other:
        for payload in INVALID_UTF8:
            raw = await RawWS.connect(daemon.url, key)
            try:
                await raw.send(OP_TEXT, payload)
                code = await raw.close_code()
                assert code == 1007, (payload, code)
            finally:
                raw.close()
            resp = await other.req("agent.whoami")
            assert resp["ok"] is True, resp
        listed = await other.req("memory.list")
        assert listed["result"]["items"] == [], listed  # nothing was written
    await _fresh(daemon.url)


# --- event-loop stall (review H2) and echoed text / malformed values (L1, L6) -----------

_FLOODER = r"""
import asyncio, sys, time
from websockets.asyncio.client import connect
url, key, frame_file, seconds = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
frame = open(frame_file, "rb").read()
async def main():
    headers = {"Authorization": "Bearer " + key} if key != "-" else None
    async with connect(url, additional_headers=headers, compression=None, max_size=None) as ws:
        replies = 0
        async def drain():
            nonlocal replies
            async for _ in ws:
                replies += 1
                if replies == 1:
                    print("flooding", flush=True)
        reader = asyncio.create_task(drain())
        end = time.monotonic() + seconds
        sent = 0
        while time.monotonic() < end:  # pipelined: never waits for a reply
            await ws.send(frame, text=True)
            sent += 1
        reader.cancel()
        print(sent, replies, flush=True)
asyncio.run(main())
"""


#: how much worse than the control flood a victim's p50 may be (ms): the stall
#: the review found was 617 ms (docs/reliability.md H2); on the shared 2-core
#: machine at load 20 a fixed daemon showed 55 ms, so 50 was too tight
STALL_MS = 200


def _empty_arrays_frame(max_bytes: int = 1024 * 1024) -> str:
    """The review's frame: `turn` whose args hold ~350k empty arrays, just under 1 MiB."""
    head, tail = '{"id":1,"op":"turn","args":{"x":[', "]}}"
    n = (max_bytes - len(head) - len(tail) + 1) // 3
    frame = head + ",".join(["[]"] * n) + tail
    assert len(frame) <= max_bytes
    return frame


async def _victim_p50(url: str, key: str, samples: int = 40) -> float:
    async with await Client.connect(url, key) as c:
        times = []
        for _ in range(samples):
            t0 = time.perf_counter()
            await c.read("agent.whoami")
            times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return times[len(times) // 2]


async def _p50_during_flood(url: str, flooder_key: str, victim_key: str, frame_file: Path) -> float:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _FLOODER, url, flooder_key, str(frame_file), "30",
        stdout=asyncio.subprocess.PIPE, cwd=str(ROOT),
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 60)
        assert line.strip() == b"flooding", line
        return await _victim_p50(url, victim_key)
    finally:
        proc.kill()
        await proc.wait()


@pytest.mark.rules("R12-11")
async def test_wire_empty_array_flood_before_and_after_authentication_does_not_stall_others(make_daemon, tmp_path):
    """Review H2: 1 MiB frames of ~350k empty arrays, sent without waiting for
    replies, moved another client's p50 from 0.16 ms to 617 ms; also when the
    frame is not JSON (cut short). The victim must
    stay under STALL_MS beyond what a flood of harmless 1 MiB frames (one string,
    the review's control) costs it on the same machine in the same run — the
    control absorbs CPU contention from whatever else the machine runs."""
    d = make_daemon(CONFIG, name="flood")
    _, flooder_key = await register(d.url, "flooder")
    _, victim_key = await register(d.url, "victim")
    control, arrays = tmp_path / "control.json", tmp_path / "arrays.json"
    arrays.write_text(_empty_arrays_frame())
    control.write_text('{"id":1,"op":"turn","args":{"x":"' + "a" * (len(arrays.read_text()) - 35) + '"}}')
    assert abs(len(control.read_text()) - len(arrays.read_text())) < 8
    # The same frame cut short by one byte: not JSON, so the daemon looks for an
    # id to echo — which once decoded all 350k arrays into Python lists.
    truncated = tmp_path / "truncated.json"
    truncated.write_text(arrays.read_text()[:-1])
    for key in (flooder_key, "-"):  # authenticated, then unauthenticated
        p50_control = await _p50_during_flood(d.url, key, victim_key, control)
        for frame in (arrays, truncated):
            p50 = await _p50_during_flood(d.url, key, victim_key, frame)
            who = "authenticated" if key != "-" else "unauthenticated"
            assert p50 < STALL_MS + p50_control, (who, frame.name, p50, p50_control)
    assert d.proc.poll() is None


def _content_flood_frame(op: str, item: str | None, max_bytes: int = 1024 * 1024) -> str:
    """An action whose content holds as many ``item`` as fit in just under 1 MiB
    (``None``: one string that long instead, the harmless control)."""
    head, tail = '{"id":1,"op":"%s","key":"k","args":{"content":{"x":[' % op, "]}}}"
    if item is None:
        return head + '"' + "a" * (max_bytes - len(head) - len(tail) - 2) + '"' + tail
    n = (max_bytes - len(head) - len(tail) + 1) // (len(item) + 1)
    frame = head + ",".join([item] * n) + tail
    assert len(frame) <= max_bytes
    return frame


@pytest.mark.rules("R12-11", "L4-5")
async def test_wire_content_flood_through_register_and_memory_create_does_not_stall_others(make_daemon, tmp_path):
    """Issue 12 H2 remainder: `agent.register` (before authentication) and every
    authenticated action decoded `content` — ~340k empty arrays cost the loop
    ~60-110 ms per frame, ~260k short strings ~30 ms. The daemon counts arrays,
    objects and values in C and refuses such a frame before building any (D62);
    another client's `agent.whoami` p50 stays within STALL_MS of the control's."""
    d = make_daemon(CONFIG, name="contentflood")
    _, flooder_key = await register(d.url, "flooder")
    _, victim_key = await register(d.url, "victim")
    for op, key in (("agent.register", "-"), ("memory.create", flooder_key)):
        control = tmp_path / f"{op}.control.json"
        control.write_text(_content_flood_frame(op, None))
        p50_control = await _p50_during_flood(d.url, key, victim_key, control)
        for name, item in (("arrays", "[]"), ("strings", '"ab"')):
            frame = tmp_path / f"{op}.{name}.json"
            frame.write_text(_content_flood_frame(op, item))
            p50 = await _p50_during_flood(d.url, key, victim_key, frame)
            assert p50 < STALL_MS + p50_control, (op, name, p50, p50_control)
            async with await Raw.connect(d.url, None if key == "-" else key) as r:
                await r.send(frame.read_text())
                reply = json.loads(await r.reply_text(1))
            err = check_error(reply["error"])
            assert err["code"] == "bad_request" and "the limit per request" in err["reason"], (op, name, err)
    assert d.proc.poll() is None


@pytest.mark.rules("L2-4")
async def test_wire_review_L1_L6_shapes_are_bad_request_with_short_reasons(make_daemon):
    d = make_daemon(CONFIG, name="shapes")
    _, key = await register(d.url, "shaper")
    long_name = "A" * 500_000
    async with await Raw.connect(d.url) as anon, await Raw.connect(d.url, key) as r:
        # L6 before authentication: the 500 KB unknown field name came back whole.
        text = await anon.call_text({"id": 1, "op": "agent.register", "key": new_key(), "args": {long_name: 1}})
        reply = json.loads(text)
        assert reply["error"]["code"] == "bad_request" and len(text) < 400, text[:400]
        th = (await r.req("thread.create", {"content": {"t": 1}}, key=new_key()))["result"]["thread"]
        shapes = [
            ("thread.entries", {"thread": th, "cursor": "²"}, "cursor"),
            ("thread.entries", {"thread": th, "cursor": "①"}, "cursor"),
            ("thread.entries", {"thread": th, "cursor": "١"}, "cursor"),
            ("subscribe", {"since": 2**64 - 1}, "since"),
            ("subscribe", {"since": 10**30}, "since"),
            ("memory.get", {"memory": "me_x", "version": 2**64}, "version"),
            ("task.get", {"task": "tk_x", "contract_version": 2**64 - 1}, "contract_version"),
            ("turn", {"cursor": "zz"}, "cursor"),
            ("memory.create", {"content": {}, long_name: 1}, "args"),
            ("thread.admit", {"thread": th, "role": long_name}, "role"),
        ]
        for op, args, field in shapes:
            text = await r.call_text({"id": r.next_id(), "op": op, "args": args,
                                      **({"key": new_key()} if OPS[op].kind == "A" else {})})
            err = check_error(json.loads(text)["error"])
            assert err["code"] == "bad_request" and field in err["reason"] and len(text) < 400, (op, text[:400])
        assert (await r.req("agent.whoami"))["ok"] is True
    assert d.proc.poll() is None
