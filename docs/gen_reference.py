"""Generate docs/reference.md, the wire reference that ships with the code.

Every op comes from the op catalogue (:data:`kungfud.wire.OPS`: name, kind,
what it does) and its arguments from its args type (:mod:`kungfud.wire.args`,
read with ``msgspec.inspect``: names, types, which are optional, defaults), with
the argument descriptions and content shapes the MCP tools use
(:mod:`kungfud.mcp.schemas`). What is written only in docs/reference_data.py:
each op's result and one example reply (``RESULTS``), the event frames
(``EVENTS``) and what each error code means (``CODES``). An op without a row
in ``RESULTS`` is still listed, with an example request made from its args type.
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
sys.path.insert(0, str(ROOT / "docs"))

from reference_data import CODES, CONTRACT, EVENTS, NEXT, RESULTS, A, AS, EN, ME, TH, TK  # noqa: E402,F401
from generated import write_or_check  # noqa: E402 — docs/generated.py


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
    return write_or_check(OUT, render)

if __name__ == "__main__":
    sys.exit(main())
