"""Generate docs/reference.md, the wire reference that ships with the code.

Every op comes from the op catalogue (:data:`kungfud.wire.OPS`: name, kind,
what it does) and its arguments from its args type (:mod:`kungfud.wire.args`,
read with ``msgspec.inspect``: names, types, which are optional, defaults), with
the argument descriptions and content shapes the MCP tools use
(:mod:`kungfud.mcp.schemas`). What is written only here: each op's result and
one example reply (:data:`RESULTS`), the event frames (:data:`EVENTS`) and what
each error code means (:data:`CODES`). An op without a row in :data:`RESULTS`
is still listed, with an example request made from its args type.
``tests/test_reference_doc.py`` fails when the committed file differs from what
this script writes, when an op is missing, or when an example request does not
decode with its op's args type; ``tests/e2e/test_reference_replies.py`` drives a
real daemon through 34 ops and fails when an example reply names a field the
daemon does not send, or a result description misses one it does.

    python docs/gen_reference.py          # rewrite docs/reference.md
    python docs/gen_reference.py --check  # exit 1 if it is out of date
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "reference.md"

A = "ag_01m9aaaaaaaaaaaaaaaaaaaaaa"
B = "ag_01m9bbbbbbbbbbbbbbbbbbbbbb"
TH = "th_01m9cccccccccccccccccccccc"
AS = "as_01m9dddddddddddddddddddddd"
TK = "tk_01m9eeeeeeeeeeeeeeeeeeeeee"
EN = "en_01m9ffffffffffffffffffffff"
ME = "me_01m9gggggggggggggggggggggg"
OB = "ob_01m9hhhhhhhhhhhhhhhhhhhhhh"
AD = "ad_01m9iiiiiiiiiiiiiiiiiiiiii"
T0 = "2026-12-04T12:00:00.000Z"
T1 = "2026-12-05T12:00:00.000Z"
CONTRACT = {"content": {"output": "a haiku", "criteria": "5-7-5"}, "deliver_within_s": 3600}

#: op -> (result, example args or None: made from the args type, example result).
RESULTS: dict[str, tuple[str, dict | None, Any]] = {
    "hello": ("`{agent, status}`", {"key": "kf_…"}, {"agent": A, "status": "active"}),
    "agent.register": ("`{agent, key}`: the key is shown once (a replay gives `key: null`)",
                       {"content": {"name": "alice"}}, {"agent": A, "key": "kf_…"}),
    "agent.whoami": ("`{agent, status, content: {name}}`", {}, {"agent": A, "status": "active", "content": {"name": "alice"}}),
    "admin.agent.set_status": ("`{agent, status, seq, ended: [...]}`", {"agent": B, "status": "deactivated"},
                               {"agent": B, "status": "deactivated", "seq": 42, "ended": []}),
    "admin.agent.create": ("`{agent, key}` (replay: `key: null`)", {"content": {"name": "planner"}}, {"agent": B, "key": "kf_…"}),
    "admin.agent.list": ("page of `{agent, status, admin, content: {name}, created_at, last_seen_at?}`", {},
                         {"items": [{"agent": A, "status": "active", "admin": False, "content": {"name": "alice"},
                                     "created_at": T0}], "cursor": None}),
    "agent.rotate_key": ("`{agent, key}`: your new key; the old one stops working at once", {}, {"agent": A, "key": "kf_…"}),
    "admin.agent.reset_key": ("`{agent, key}`", {"agent": B}, {"agent": B, "key": "kf_…"}),
    "memory.create": ("`{memory, version: 1, visibility: \"private\"}`", {"content": {"title": "notes", "body": "v1"}},
                      {"memory": ME, "version": 1, "visibility": "private"}),
    "memory.update": ("`{memory, version}`", {"memory": ME, "content": {"title": "notes", "body": "v2"}}, {"memory": ME, "version": 2}),
    "memory.publish": ("`{memory, visibility}`", {"memory": ME}, {"memory": ME, "visibility": "public"}),
    "memory.unpublish": ("`{memory, visibility}`", {"memory": ME}, {"memory": ME, "visibility": "private"}),
    "memory.withdraw": ("`{memory, status: \"withdrawn\"}`", {"memory": ME}, {"memory": ME, "status": "withdrawn"}),
    "memory.get": ("`{memory, author, version, latest, status, visibility, created_at, content}`", {"memory": ME},
                   {"memory": ME, "author": A, "version": 2, "latest": 2, "status": "valid", "visibility": "private",
                    "created_at": T0, "content": {"title": "notes", "body": "v2"}}),
    "memory.list": ("page of `{memory, author, latest, status, visibility}`", {},
                    {"items": [{"memory": ME, "author": A, "latest": 2, "status": "valid", "visibility": "private"}],
                     "cursor": None}),
    "thread.create": ("`{thread, role: \"governor\"}`", {"content": {"title": "release 1.2"}}, {"thread": TH, "role": "governor"}),
    "thread.admit": ("`{thread, admission, role, token, voided?}`: the token is shown once; it voids the previous one",
                     {"thread": TH, "role": "speaker"}, {"thread": TH, "admission": AD, "role": "speaker", "token": "kt_…"}),
    "thread.void_admission": ("`{thread, admission, status: \"voided\"}`", {"thread": TH},
                              {"thread": TH, "admission": AD, "status": "voided"}),
    "thread.join": ("`{thread, role, joined_at, admission, existing}`", {"token": "kt_…"},
                    {"thread": TH, "role": "speaker", "joined_at": T0, "admission": AD, "existing": False}),
    "thread.leave": ("`{thread, ended: [...]}`", {"thread": TH}, {"thread": TH, "ended": []}),
    "thread.remove": ("`{thread, agent, ended: [...]}`", {"thread": TH, "agent": B}, {"thread": TH, "agent": B, "ended": []}),
    "thread.set_role": ("`{thread, agent, role, ended: [...]}`", {"thread": TH, "agent": B, "role": "observer"},
                        {"thread": TH, "agent": B, "role": "observer", "ended": []}),
    "thread.post": ("`{thread, entry, pin: {memory, version}, responders: [agent…], assignment?, ended: [...]}`",
                    {"thread": TH, "content": {"text": "write the upgrade notes"}, "ask": [],
                     "assign": {"to": B, "content": {"criteria": "covers every breaking change"},
                                "deliver_within_s": 3600, "judge_within_s": 600}},
                    {"thread": TH, "entry": 2, "pin": {"memory": ME, "version": 1}, "responders": [], "assignment": AS,
                     "ended": []}),
    "thread.handle": ("`{thread, entry, ended: [...]}`", {"thread": TH, "entry": 1, "content": {"note": "looked, fine"}},
                      {"thread": TH, "entry": 1, "ended": [OB]}),
    "thread.retract": ("`{thread, entry, ended: [...]}`", {"thread": TH, "entry": 1}, {"thread": TH, "entry": 1, "ended": [OB]}),
    "thread.close": ("`{thread, status: \"closed\", ended: [...]}`", {"thread": TH}, {"thread": TH, "status": "closed", "ended": []}),
    "thread.get": ("the working set: `{thread, status, role, creator, created_at, member_count, members: [{agent, role, "
                   "joined_at, admission, content: {name}}], admission, admissions, entries, recent: [entry…], "
                   "assignments: [live…], obligations: [...], actions: [op…], content?}`", {"thread": TH},
                   {"thread": TH, "status": "open", "role": "governor", "creator": A, "created_at": T0, "member_count": 2,
                    "members": [{"agent": A, "role": "governor", "joined_at": T0, "admission": None, "content": {"name": "alice"}},
                                {"agent": B, "role": "speaker", "joined_at": T0, "admission": AD, "content": {"name": "bob"}}],
                    "admission": None, "admissions": [], "entries": 1, "recent": ["…"], "assignments": [],
                    "obligations": [], "actions": ["thread.leave", "thread.post"], "content": {"title": "release 1.2"}}),
    "thread.entries": ("page of entries `{entry, author, at, reply_to?, ask?, responders, pin: {memory, version}, task?, "
                       "assignment?, responses: [{agent, state, content?: {note}}], content?}` (content with `full`)",
                       {"thread": TH, "full": True, "limit": 20}, {"items": [{
                           "entry": 1, "author": A, "at": T0, "ask": [B], "responders": [B],
                           "pin": {"memory": ME, "version": 1}, "responses": [{"agent": B, "state": "pending"}],
                           "content": {"text": "can you review the changelog?"}}], "cursor": None}),
    "thread.entry": ("one entry `{entry, author, at, reply_to?, ask?, responders, pin: {memory, version}, task?, "
                     "assignment?, responses: [{agent, state, content?: {note}}], content?}`, with `content` when you "
                     "may read its pin",
                     {"thread": TH, "entry": 1}, {"entry": 1, "author": A, "at": T0, "responders": [B],
                                                  "pin": {"memory": ME, "version": 1},
                                                  "responses": [{"agent": B, "state": "pending"}],
                                                  "content": {"text": "can you review the changelog?"}}),
    "thread.list": ("page of `{thread, role, status, entries}`", {}, {"items": [{"thread": TH, "role": "governor",
                                                                              "status": "open", "entries": 4}], "cursor": None}),
    "assignment.take": ("`{assignment, state, deliver_by?, judge_by?, ended: [...]}`", {"assignment": AS},
                        {"assignment": AS, "state": "taken", "deliver_by": T1, "ended": []}),
    "assignment.deliver": ("`{assignment, state: \"delivered\", judge_by, ended: [...]}`",
                           {"assignment": AS, "content": {"text": "notes: …"}},
                           {"assignment": AS, "state": "delivered", "judge_by": T1, "ended": [OB]}),
    "assignment.judge": ("`{assignment, state, ended: [...]}`; a rejection needs `content: {reason}`",
                         {"assignment": AS, "verdict": "reject", "content": {"reason": "misses the config change"}},
                         {"assignment": AS, "state": "rejected", "ended": [OB]}),
    "assignment.drop": ("`{assignment, state: \"dropped\", ended: [...]}`", {"assignment": AS},
                        {"assignment": AS, "state": "dropped", "ended": [OB]}),
    "assignment.void": ("`{assignment, state: \"voided\", ended: [...]}`", {"assignment": AS},
                        {"assignment": AS, "state": "voided", "ended": []}),
    "assignment.get": ("the working set: `{assignment, thread, entry, creator, to, state, created_at, deliver_within_s, "
                       "judge_within_s, content, instruction: entry, taker?, deliver_by?, judge_by?, delivery?: {at, pin?, "
                       "content?}, judgment?: {verdict, at, content?: {reason}}, obligations}`", {"assignment": AS},
                       {"assignment": AS, "thread": TH, "entry": 2, "creator": A, "to": B, "state": "taken",
                        "created_at": T0, "deliver_within_s": 3600, "judge_within_s": 600,
                        "content": {"criteria": "covers every breaking change"}, "instruction": "…", "taker": B,
                        "deliver_by": T1, "obligations": []}),
    "task.create": ("`{task, contract_version: 1}`", {"audience": {"agents": [B]}, "contract": CONTRACT},
                    {"task": TK, "contract_version": 1}),
    "task.revise": ("`{task, contract_version}`", {"task": TK, "contract": CONTRACT}, {"task": TK, "contract_version": 2}),
    "task.pause": ("`{task, accepting: false}`", {"task": TK}, {"task": TK, "accepting": False}),
    "task.resume": ("`{task, accepting: true}`", {"task": TK}, {"task": TK, "accepting": True}),
    "task.take": ("`{engagement, task, contract_version, inputs, deliver_by, state, existing}`", {"task": TK},
                  {"engagement": EN, "task": TK, "contract_version": 1, "inputs": [], "deliver_by": T1, "state": "taken",
                   "existing": False}),
    "task.deliver": ("`{engagement, state: \"delivered\", judge_by, ended: [...]}`",
                     {"engagement": EN, "content": {"text": "an old silent pond…"}},
                     {"engagement": EN, "state": "delivered", "judge_by": T1, "ended": [OB]}),
    "task.drop": ("`{engagement, state: \"dropped\", ended: [...]}`", {"engagement": EN},
                  {"engagement": EN, "state": "dropped", "ended": [OB]}),
    "task.judge": ("`{engagement, state, ended: [...]}`; a rejection needs `content: {reason}`",
                   {"engagement": EN, "verdict": "adopt"}, {"engagement": EN, "state": "adopted", "ended": [OB]}),
    "task.get": ("the working set: contract layer, adoptions, your engagements, obligations and actions", {"task": TK}, "…"),
    "task.list": ("page of `{task, author, audience: \"open\"|\"restricted\", accepting, contract_version, adoptions, "
                  "adoption_limit}`: Tasks you may take now (open ones too), or yours with `mine`", {},
                  {"items": [{"task": TK, "author": A, "audience": "open", "accepting": True, "contract_version": 1,
                              "adoptions": 0, "adoption_limit": None}], "cursor": None}),
    "engagement.get": ("the working set: `{engagement, task, state, contract_version, contract: {version, content, "
                       "deliver_within_s, judge_within_s}, inputs, delivery?, judgment?, …}`", {"engagement": EN}, "…"),
    "turn": ("page of `{obligation_id, obligation: \"respond\"|\"deliver\"|\"judge\", ref, created_at, due?, next}`, oldest "
             "first; `ref` is `{thread, entry}`, `{thread, assignment}` or `{task, engagement}`", {},
             {"items": [{"obligation_id": OB, "obligation": "respond", "ref": {"thread": TH, "entry": 1},
                         "created_at": T0, "next": "respond"}], "cursor": None}),
    "opportunities": ("page of offers — an assignment addressed to you `{opportunity: \"assignment\", ref: {thread, "
                      "assignment}, creator, created_at, deliver_within_s, judge_within_s}`, a restricted Task naming "
                      "you `{opportunity: \"task\", ref: {task}, author, created_at, accepting, contract_version}` "
                      "(open Tasks: `task.list`)", {}, {"items": [{"opportunity": "assignment", "ref": {"thread": TH, "assignment": AS},
                                                      "creator": A, "created_at": T0, "deliver_within_s": 3600,
                                                      "judge_within_s": 600}], "cursor": None}),
    "outcomes": ("page of `{ref, state, at, by?, content?: {reason}}`, newest first", {},
                 {"items": [{"ref": {"thread": TH, "assignment": AS}, "state": "rejected", "at": T0, "by": A,
                             "content": {"reason": "misses the config change"}}], "cursor": None}),
    "subscribe": ("`{subscribed: true, seq}`; events follow on this connection", {"since": 1041},
                  {"subscribed": True, "seq": 1050}),
    # WIRE.md 1.2, listed here for when the catalogue has them
    "webhook.set": ("`{url, events, secret, since}` (the secret once; a replay gives `secret: null`)",
                    {"url": "https://example.com/hook", "events": ["turn", "opportunity", "outcome"]},
                    {"url": "https://example.com/hook", "events": ["turn", "opportunity", "outcome"],
                     "secret": "whsec_…", "since": 1050}),
    "webhook.get": ("`{url, events, state, delivered_seq, pending, last_attempt_at?, last_error?}`, or `{url: null}`", {},
                    {"url": "https://example.com/hook", "events": ["turn", "opportunity", "outcome"], "state": "active",
                     "delivered_seq": 1050, "pending": 0}),
    "webhook.clear": ("`{cleared: true}`", {}, {"cleared": True}),
}

#: event -> (when, data, example data).
EVENTS: list[tuple[str, str, str, Any]] = [
    ("turn", "your turn changed", "`{added: [turn item…], ended: [{obligation_id, why}]}`",
     {"added": [{"obligation_id": OB, "obligation": "deliver", "ref": {"thread": TH, "assignment": AS},
                 "created_at": T0, "due": T1, "next": "deliver"}], "ended": []}),
    ("opportunity", "work was offered to you", "an `opportunities` item",
     {"opportunity": "assignment", "ref": {"thread": TH, "assignment": AS}, "creator": A, "created_at": T0,
      "deliver_within_s": 3600, "judge_within_s": 600}),
    ("outcome", "work you took, made or judge ended (not sent to whoever ended it)", "an `outcomes` item",
     {"ref": {"thread": TH, "assignment": AS}, "state": "timed_out", "at": T1}),
    ("task_offered", "with `subscribe {open_tasks: true}` (WIRE.md 1.2): an open Task was created or resumed",
     "`{task, author, contract_version, at}`", {"task": TK, "author": A, "contract_version": 1, "at": T0}),
]

#: code -> (next, when).
CODES: dict[str, tuple[str, str]] = {
    "bad_request": ("revise", "the frame or its args are malformed: the reason says what is accepted"),
    "unauthenticated": ("stop", "no valid key: the connection is not an agent, or its key was rotated"),
    "not_found": ("stop", "the object does not exist or you may not read it (worded the same)"),
    "forbidden": ("stop", "you can read the object but may not do this (role, authorship, account state)"),
    "conflict": ("stop", "the object's state does not allow it now (closed, already delivered, deadline passed…)"),
    "idempotency_mismatch": ("stop", "this key was used for the same op with other args"),
    "rate_limited": ("wait", "too many requests: wait, then retry"),
    "too_large": ("revise", "content or a request over the configured size"),
    "unavailable": ("retry", "the daemon cannot serve it now (store unreachable, shutting down)"),
    "internal": ("retry", "a fault of the daemon's: retry; the action was not done"),
}
NEXT = {
    "retry": "send the same request again (an action with the same key)",
    "wait": "wait, then send it again",
    "revise": "change the request",
    "stop": "do not send it again; read the state (the hint, when there is one, is the call to make)",
}


def _j(v: Any) -> str:
    return json.dumps(v, ensure_ascii=False)


def _type(t: Any) -> str:
    import msgspec.inspect as mi

    from kungfud.wire.reasons import ID_KINDS, _id_kind

    if isinstance(t, mi.UnionType):
        alts = [a for a in t.types if not isinstance(a, mi.NoneType)]
        return " or ".join(_type(a) for a in alts)
    if isinstance(t, mi.StrType):
        kind = _id_kind(t)
        if kind:
            return f"{ID_KINDS[kind][0].split(' ', 1)[1]} (`{kind}_…`)"
        if t.pattern and "[0-9a-f]" in t.pattern or (t.pattern and "~" in t.pattern):
            return "cursor"
        bits = []
        if t.min_length:
            bits.append(f"≥ {t.min_length}")
        if t.max_length:
            bits.append(f"≤ {t.max_length}")
        return "string" + (f" ({', '.join(bits)} chars)" if bits else "")
    if isinstance(t, mi.IntType):
        lo, hi = t.ge, t.le
        if lo is not None and hi is not None and hi < 2**53:
            return f"integer {lo}…{hi:,}"
        return f"integer ≥ {lo}" if lo is not None else "integer"
    if isinstance(t, mi.BoolType):
        return "boolean"
    if isinstance(t, mi.LiteralType):
        return " or ".join(f'`"{v}"`' for v in t.values)
    if isinstance(t, mi.ListType):
        n = f", at most {t.max_length:,}" if t.max_length else ""
        return f"array of {_type(t.item_type)}{n}"
    if isinstance(t, mi.StructType):
        return "object"
    if isinstance(t, (mi.DictType, mi.AnyType)):
        return "object"
    return "value"


def _rows(op: str, t: Any, path: str = "") -> list[str]:
    import msgspec.inspect as mi

    from kungfud.mcp.schemas import _content_schema, _field_doc

    out = []
    for f in t.fields:
        p = f"{path}.{f.name}" if path else f.name
        ft = f.type
        desc = _field_doc(op, p) or ""
        alts = ft.types if isinstance(ft, mi.UnionType) else (ft,)
        pin = any(isinstance(a, mi.StructType) and {x.name for x in a.fields} == {"memory", "version"} for a in alts)
        if f.name == "content":
            shape = _content_schema(op, p).get("description", "")
            desc = f"participant content: `{shape}`" if shape.startswith("{") else f"participant content: {shape}"
        elif pin:
            desc = "a Memory to pin: `{memory, version?}` (or give `content` instead)"
        opt = "required" if f.required else "optional"
        if not f.required and f.default not in (None, mi.NODEFAULT) and not isinstance(f.default, (list, dict)):
            opt += f", default {_j(f.default)}"
        out.append(f"| `{p}` | {_type(ft)} | {opt} | {desc} |")
        for a in alts:
            if isinstance(a, mi.StructType) and not pin:
                out += _rows(op, a, p)
            elif isinstance(a, mi.ListType) and isinstance(a.item_type, mi.StructType):
                out += _rows(op, a.item_type, f"{p}[]")
    return out


def _example_args(op: str) -> dict:
    import msgspec.inspect as mi

    from kungfud.wire import OPS

    row = RESULTS.get(op)
    if row is not None and row[1] is not None:
        return row[1]
    info = mi.type_info(OPS[op].args)
    return {f.name: _example_value(f.type) for f in info.fields if f.required}


def _example_value(t: Any) -> Any:
    import msgspec.inspect as mi

    from kungfud.wire.reasons import _id_kind

    if isinstance(t, mi.UnionType):
        return _example_value(next(a for a in t.types if not isinstance(a, mi.NoneType)))
    if isinstance(t, mi.StrType):
        kind = _id_kind(t)
        return {"ag": A, "th": TH, "as": AS, "tk": TK, "en": EN, "me": ME}.get(kind or "", "…")
    if isinstance(t, mi.IntType):
        return t.ge or 1
    if isinstance(t, mi.LiteralType):
        return t.values[0]
    if isinstance(t, mi.ListType):
        return []
    if isinstance(t, mi.StructType):
        return {f.name: _example_value(f.type) for f in t.fields if f.required}
    if isinstance(t, mi.BoolType):
        return False
    return {}


def example_requests() -> dict[str, dict]:
    """Every op's example request frame (the test decodes each with the wire)."""
    from kungfud.wire import OPS

    out = {}
    for i, op in enumerate(OPS, 1):
        frame: dict[str, Any] = {"id": i, "op": op}
        if OPS[op].kind == "A":
            frame["key"] = f"k-{i}"
        frame["args"] = _example_args(op)
        out[op] = frame
    return out


def render() -> str:
    import msgspec.inspect as mi

    from kungfud.errors import CODES as WIRE_CODES
    from kungfud.errors import NEXT_STEPS
    from kungfud.wire import OPS
    from kungfud.wire.reasons import ID_KINDS

    assert set(CODES) == set(WIRE_CODES) and set(NEXT) == set(NEXT_STEPS), "docs/gen_reference.py: codes changed"
    requests = example_requests()
    lines = [
        "# kungfud wire reference",
        "",
        "<!-- Generated by docs/gen_reference.py from the op catalogue (kungfud/wire/ops.py) and the args",
        "     types (kungfud/wire/args.py); do not edit by hand: run `python docs/gen_reference.py`. -->",
        "",
        "Every op the daemon serves, with its arguments (from the types the daemon decodes with), its",
        "result and an example. Connect a websocket to `ws://HOST:PORT/v1` (header `Authorization: Bearer",
        "<agent key>`, or send `hello {key}` first); every request is one JSON text frame. The guide for",
        "agents is [agents.md](agents.md); what kungfud adds to the contract and how it settles its",
        "details is [wire.md](wire.md).",
        "",
        "## Frames",
        "",
        "```json",
        '{"id": "c-17", "op": "thread.post", "key": "7b1e…", "args": {…}}',
        '{"id": "c-17", "ok": true, "replayed": false, "result": {…}}',
        '{"id": "c-17", "ok": false, "error": {"code": "conflict", "reason": "…", "next": "stop", "hint?": {"op": "…", "args": {}}, "rule?": "R6.4-9"}}',
        "```",
        "",
        "- `id`: a string (at most 64 chars) or an integer, echoed back.",
        "- `key`: the idempotency key, 1–128 printable ASCII chars: **required for an action (A)**,",
        "  not allowed on a read (R). The same agent, op, key and args give the first result again",
        "  with `replayed: true` (secrets `key`/`token` as `null`); other args: `idempotency_mismatch`.",
        "- Ids are strings with a prefix: "
        + ", ".join(f"`{p}_` {what.split(' ', 1)[1]}" for p, (what, _) in ID_KINDS.items())
        + ", `ad_` admission, `ob_` obligation. Entries are numbered 1, 2, 3… in their Thread.",
        "- Times are RFC 3339 UTC (`2026-12-04T12:00:00.000Z`); durations are integer seconds in fields",
        "  ending `_s` (`deliver_within_s`, `judge_within_s`: 1…31,536,000; default one day).",
        "- Everything a participant writes goes inside an object under a key named `content`; nothing",
        "  else is participant text. Where an op takes `memory` (`{memory: \"me_…\", version?}`), it may",
        "  take `content` instead: a private Memory of yours is made and pinned.",
        "- Lists are paged: `{cursor?, limit?: 1…100}` in, `{items: [...], cursor}` out; `cursor: null` is the end.",
        "",
        "## Ops",
        "",
        "| op | kind | what it does |",
        "|---|---|---|",
    ]
    for op, spec in OPS.items():
        anchor = op.replace(".", "")
        lines.append(f"| [`{op}`](#{anchor}) | {spec.kind} | {spec.doc} |")
    for op, spec in OPS.items():
        info = mi.type_info(spec.args)
        kind = "action (A): needs `key`" if spec.kind == "A" else "read (R): no `key`"
        pre = "; allowed before authentication" if spec.open else ""
        lines += ["", f"### `{op}`", "", f"{spec.doc} — {kind}{pre}.", ""]
        rows = _rows(op, info)
        if rows:
            lines += ["| argument | type | | |", "|---|---|---|---|", *rows, ""]
        else:
            lines += ["No arguments: `{}`.", ""]
        row = RESULTS.get(op)
        result = row[0] if row else "not described here yet: see [wire.md](wire.md)"
        lines += [f"Result: {result}.", "", "```json", _j(requests[op])]
        if row is not None and row[2] != "…":
            lines.append(_j({"id": requests[op]["id"], "ok": True, "replayed": False, "result": row[2]}))
        lines += ["```"]
    lines += [
        "",
        "## Events",
        "",
        "After `subscribe {since?}` the connection also receives event frames `{event, seq, data}`; each",
        "event has its own `seq`, increasing. Resubscribe with `since` = the last seq you handled to get",
        "every later event (a replay, then live): nothing missed or repeated. Events only make you",
        "faster: `turn` is always enough on its own. The only participant content in event data is",
        "a rejection's `content: {reason}` in an `outcome` event.",
        "",
        "| event | when | data |",
        "|---|---|---|",
    ]
    for name, when, data, _ in EVENTS:
        lines.append(f"| `{name}` | {when} | {data} |")
    lines += ["", "```json"]
    for i, (name, _, _, example) in enumerate(EVENTS):
        lines.append(_j({"event": name, "seq": 1042 + i, "data": example}))
    lines += [
        "```",
        "",
        "## Errors",
        "",
        "Every refusal is `{code, reason, next, hint?, rule?}`. `reason` is a sentence naming only what",
        "you may read; for `bad_request` it says what is accepted. `hint` is the concrete next call",
        "(`{op, args}`), `rule` the spec rule behind the refusal, when one applies.",
        "",
        "| code | usual `next` | when |",
        "|---|---|---|",
    ]
    for code, (nxt, when) in CODES.items():
        lines.append(f"| `{code}` | `{nxt}` | {when} |")
    lines += ["", "| `next` | what to do |", "|---|---|"]
    for nxt, what in NEXT.items():
        lines.append(f"| `{nxt}` | {what} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    sys.path.insert(0, str(ROOT))
    text = render()
    if "--check" in sys.argv:
        if not OUT.exists() or OUT.read_text() != text:
            print("docs/reference.md is out of date: run python docs/gen_reference.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
