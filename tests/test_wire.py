"""Issue 12 at the wire, for every op at once: every integer arg has a range and
every cursor a format, so a value the daemon cannot use is ``bad_request`` naming
the field (L1); client text a reason quotes is cut to 64 characters (L6); the
nesting limit is measured in C and agrees with a plain count (H2); a lone
surrogate escape is named as such and the id before it is echoed."""

from __future__ import annotations

import json
from typing import Any, Iterator

import msgspec
import msgspec.inspect as mi
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kungfud import wire
ECHO_CHARS = 64  # WIRE.md "Additions in 1.1"
from kungfud.actors.ops import to_command

# --- walking the args types ---------------------------------------------------------


def _paths(t: mi.Type, path: tuple) -> Iterator[tuple[tuple, mi.Type]]:
    """(path, type) of every int and str field reachable inside args; a path item
    is a field name, or 0 for "the first element of this list"."""
    if isinstance(t, mi.UnionType):
        for u in t.types:
            yield from _paths(u, path)
    elif isinstance(t, (mi.StructType,)):
        for f in t.fields:
            yield from _paths(f.type, path + (f.name,))
    elif isinstance(t, mi.ListType):
        yield from _paths(t.item_type, path + (0,))
    elif isinstance(t, (mi.IntType, mi.StrType)):
        yield path, t


def _fields(kind: type) -> list[tuple[str, tuple]]:
    out = []
    for op, spec in wire.OPS.items():
        for path, t in _paths(mi.type_info(spec.args), ()):
            if isinstance(t, kind):
                out.append((op, path))
    return sorted(set(out))


def _args_at(path: tuple, value: Any) -> Any:
    for step in reversed(path):
        value = [value] if step == 0 else {step: value}
    return value


def _json_path(path: tuple) -> str:
    return "".join(f"[{s}]" if s == 0 else f".{s}" for s in path).lstrip(".")


def _refused(op: str, args: Any) -> str:
    frame = {"id": 1, "op": op, "args": args}
    if wire.OPS[op].kind == "A":
        frame["key"] = "k"
    with pytest.raises(wire.FrameError) as e:
        wire.decode_args(wire.decode_envelope(json.dumps(frame)))
    assert e.value.req_id == 1
    return e.value.reason


INT_FIELDS = _fields(mi.IntType)
CURSOR_FIELDS = [(op, path) for op, path in _fields(mi.StrType) if path[-1] == "cursor"]


def test_the_walk_finds_the_fields_the_review_named():
    assert ("subscribe", ("since",)) in INT_FIELDS
    assert ("task.create", ("contract", "adoption_limit")) in INT_FIELDS
    assert ("task.create", ("contract", "inputs", 0, "version")) in INT_FIELDS
    assert ("thread.entries", ("cursor",)) in CURSOR_FIELDS
    assert {op for op, _ in CURSOR_FIELDS} >= {"memory.list", "thread.entries", "thread.list", "task.list", "turn"}


@pytest.mark.rules("L2-4")
@pytest.mark.parametrize("op,path", INT_FIELDS, ids=[f"{o}:{'.'.join(map(str, p))}" for o, p in INT_FIELDS])
def test_L2_4_every_integer_arg_out_of_range_is_bad_request_naming_it(op, path):
    # 2^64-1 overflowed the store's u64 keys (subscribe → internal); 2^53+1 is
    # past what every JSON client reads exactly; a negative never counts anything.
    for value in (2**64 - 1, 2**64, 2**53 + 1, -1):
        reason = _refused(op, _args_at(path, value))
        assert f"`{_json_path(path)}`" in reason, (value, reason)


MALFORMED_CURSORS = ["²", "①", "١", "٣٤", "１", "-1", "1.5", " 1", "1\n", "0x1f", "x" * 257, "me_ABC", "th_\u0131"]


@pytest.mark.rules("L2-4")
@pytest.mark.parametrize("op,path", CURSOR_FIELDS, ids=[o for o, _ in CURSOR_FIELDS])
def test_L2_4_every_cursor_not_of_its_reads_format_is_bad_request_naming_it(op, path):
    base = {"thread": "th_x"} if op == "thread.entries" else {}
    for cursor in MALFORMED_CURSORS:
        reason = _refused(op, {**base, "cursor": cursor})
        assert "`cursor`" in reason and "$" not in reason, (cursor, reason)


# --- echoed client text ------------------------------------------------------------------


LONG = "A" * 500_000


@pytest.mark.rules("L2-4")
@pytest.mark.parametrize(
    "op,args,echoed",
    [
        ("agent.register", {LONG: 1}, "unknown field"),  # the review's 500 KB reply, before authentication
        ("memory.create", {"content": {}, "x" + LONG: 1}, "unknown field"),
        ("thread.admit", {"thread": "th_x", "role": LONG}, "may not be"),
        ("task.create", {"audience": LONG, "contract": {}}, ""),
        ("thread.post", {"thread": "th_x", "assign": {"to": "ag_x", "content": {}, LONG: 1}}, "unknown field"),
    ],
)
def test_L2_4_client_text_in_a_reason_is_cut_to_64_characters(op, args, echoed):
    reason = _refused(op, args)
    assert len(reason) < 300, reason[:400]
    assert echoed in reason
    assert "A" * ECHO_CHARS not in reason, reason


@pytest.mark.rules("L2-4")
def test_L2_4_unknown_op_and_content_shape_errors_cut_client_text_too():
    with pytest.raises(wire.FrameError) as e:
        wire.decode_envelope(json.dumps({"id": 1, "op": LONG}))
    assert len(e.value.reason) < 100
    args = wire.decode_args(
        wire.decode_envelope(
            json.dumps({"id": 1, "op": "thread.handle", "key": "k",
                        "args": {"thread": "th_x", "entry": 1, "content": {"note": "n", LONG: 1}}})
        )
    )
    with pytest.raises(wire.FrameError) as e:
        to_command("thread.handle", args)
    assert len(e.value.reason) < 300 and "A" * ECHO_CHARS not in e.value.reason, e.value.reason[:400]


# --- nesting, measured in C ---------------------------------------------------------------


def _depth(raw: bytes) -> int:
    """A plain count: the deepest array/object nesting of JSON text."""
    depth = deepest = 0
    in_string = escaped = False
    for byte in raw:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:
                escaped = True
            elif byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):
            depth += 1
            deepest = max(deepest, depth)
        elif byte in (0x5D, 0x7D):
            depth -= 1
    return deepest


_tricky_text = st.text(alphabet='[]{}"\\/u0aé\n', max_size=8)
_json = st.recursive(
    st.none() | st.integers() | _tricky_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_tricky_text, inner, max_size=3),
    max_leaves=30,
)


@pytest.mark.rules("L3-2")
@settings(max_examples=500, derandomize=True, deadline=None)
@given(value=_json, wrap=st.lists(st.booleans(), max_size=80))
def test_L3_2_nesting_limit_agrees_with_a_plain_count(value, wrap):
    for as_list in wrap:
        value = [value] if as_list else {"k[": value}
    raw = json.dumps({"content": {"v": value}}).encode()
    assert wire.limits.too_deep(raw) == (_depth(raw) > wire.MAX_DEPTH)


@pytest.mark.rules("L3-2")
def test_L3_2_exactly_the_limit_passes_and_one_more_is_refused_in_every_content_position():
    # args {} is level 1, so content at args.content holds 62 more levels.
    for depth, refused in ((62, False), (63, True)):
        frame = '{"id":1,"op":"memory.create","key":"k","args":{"content":{"x":%s}}}' % ("[" * depth + "]" * depth)
        env = wire.decode_envelope(frame)
        if refused:
            with pytest.raises(wire.FrameError, match="deeper than 64 levels"):
                wire.decode_args(env)
        else:
            wire.decode_args(env)


# --- a lone surrogate ----------------------------------------------------------------------


@pytest.mark.rules("L2-4")
def test_L2_4_lone_surrogate_escape_is_named_and_the_id_before_it_echoed():
    for esc in ("\\ud800", "\\udfff", "\\ud83d\\u0041"):
        frame = '{"id":1,"op":"hello","args":{"key":"%s"}}' % esc
        with pytest.raises(wire.FrameError) as e:
            wire.decode_envelope(frame)
        assert e.value.req_id == 1 and "surrogate" in e.value.reason, (esc, e.value.reason)
    # A proper pair, and an escaped backslash before "u", are fine.
    assert wire.decode_args(wire.decode_envelope('{"id":1,"op":"hello","args":{"key":"\\ud83d\\ude00"}}')).key == "😀"
    assert wire.decode_args(wire.decode_envelope('{"id":1,"op":"hello","args":{"key":"\\\\ud800"}}')).key == "\\ud800"


@pytest.mark.rules("L2-4")
def test_L2_4_a_valid_id_is_echoed_even_with_every_character_escaped():
    """WIRE.md "Transport": a frame that is not a request gets `bad_request` with
    its `id` whenever one can be read. An id of 64 astral characters, each written
    as an escaped surrogate pair, is 770 bytes of JSON and still a valid id."""
    rid = "\U0001F600" * 64
    frame = '{"id":"' + "\\ud83d\\ude00" * 64 + '","args":{}}'  # no op
    with pytest.raises(wire.FrameError) as e:
        wire.decode_envelope(frame)
    assert e.value.req_id == rid


# --- how many arrays, objects and values, counted in C (H2, D62) -------------------------


def _plain_count(value: Any) -> tuple[int, int]:
    """A plain count over decoded JSON: (arrays and objects, values), an empty
    array or object counting as two values (docs/wire.md, D62)."""
    if isinstance(value, (list, dict)):
        members = list(value.values() if isinstance(value, dict) else value)
        counts = [_plain_count(v) for v in members]
        return 1 + sum(c for c, _ in counts), 1 + sum(v for _, v in counts) + (not members)
    return 0, 1


_count_text = st.text(alphabet='[]{}",: \\/u0aé\n', max_size=8)
_count_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | _count_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_count_text, inner, max_size=4),
    max_leaves=40,
)


@pytest.mark.rules("R12-11", "L4-5")
@settings(max_examples=500, derandomize=True, deadline=None)
@given(value=_count_json, indent=st.sampled_from([None, 0, 1]), ascii_only=st.booleans())
def test_R12_11_counts_measured_in_c_agree_with_a_plain_count(value, indent, ascii_only):
    raw = json.dumps({"content": {"v": value}}, indent=indent, ensure_ascii=ascii_only).encode()
    assert wire.limits.count_values(raw) == _plain_count(json.loads(raw))


def _content_paths() -> list[tuple[str, tuple]]:
    """(op, path) of every `content` field any op's args have (participant data)."""

    def walk(t: mi.Type, path: tuple) -> Iterator[tuple]:
        if isinstance(t, mi.UnionType):
            for u in t.types:
                yield from walk(u, path)
        elif isinstance(t, mi.StructType):
            for f in t.fields:
                if f.name == "content" and any(
                    isinstance(u, mi.DictType) for u in (f.type.types if isinstance(f.type, mi.UnionType) else [f.type])
                ):
                    yield path + ("content",)
                else:
                    yield from walk(f.type, path + (f.name,))
        elif isinstance(t, mi.ListType):
            yield from walk(t.item_type, path + (0,))

    return sorted({(op, p) for op, spec in wire.OPS.items() for p in walk(mi.type_info(spec.args), ())})


CONTENT_PATHS = _content_paths()


def _args_with(path: tuple, item: Any, count: int, which: int) -> tuple[dict, str]:
    """args with content at ``path`` holding ``item`` repeated so that count
    number ``which`` (0: arrays and objects, 1: values) is exactly ``count``."""
    one, two = (_plain_count(_args_at(path, {"x": [item] * n}))[which] for n in (1, 2))
    assert (count - one) % (two - one) == 0
    args = _args_at(path, {"x": [item] * (1 + (count - one) // (two - one))})
    assert _plain_count(args)[which] == count
    return args, json.dumps(args, separators=(",", ":"))


@pytest.mark.rules("R12-11", "L4-5")
def test_R12_11_exactly_the_count_limits_pass_and_one_more_is_refused_in_every_content_position():
    assert len(CONTENT_PATHS) >= 14, CONTENT_PATHS  # register, memory, pins, threads, tasks, assignments…
    for limit, item, which, what in (
        (wire.MAX_CONTAINERS, [], 0, f"more than {wire.MAX_CONTAINERS} arrays and objects"),
        (wire.MAX_VALUES, 0, 1, f"more than {wire.MAX_VALUES} values"),
    ):
        for op, path in CONTENT_PATHS:
            key = ',"key":"k"' if wire.OPS[op].kind == "A" else ""
            for count in (limit, limit + 1):
                args, text = _args_with(path, item, count, which)
                env = wire.decode_envelope('{"id":1,"op":"%s"%s,"args":%s}' % (op, key, text))
                if count > limit:
                    with pytest.raises(wire.FrameError) as e:
                        wire.decode_args(env)
                    assert e.value.req_id == 1 and what in e.value.reason, (op, path, e.value.reason)
                else:  # other fields the op needs may be missing; the count is not what refuses it
                    try:
                        wire.decode_args(env)
                    except wire.FrameError as e:
                        assert "the limit per request" not in e.reason and " need" in e.reason, (op, path, e.reason)
    # Whole requests at the limits decode (content whose only need is to be an object).
    for limit, item, which in ((wire.MAX_CONTAINERS, [], 0), (wire.MAX_VALUES, 0, 1)):
        _, text = _args_with(("content",), item, limit, which)
        args = wire.decode_args(wire.decode_envelope('{"id":1,"op":"memory.create","key":"k","args":%s}' % text))
        assert len(args.content["x"]) == limit - 3  # args, content and x count too
