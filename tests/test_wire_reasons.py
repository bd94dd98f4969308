"""Every bad_request for args says what is accepted, in words (issue 26 item 2,
docs/decisions.md D250): swept over every op's every argument — a value of the
wrong type, an unknown field beside it, a required field left out — the reason
names the argument by its path in args and never carries msgspec's ``$.args``
path, its ``Expected `…``` phrasing or a regular expression."""

from __future__ import annotations

import json
from typing import Any, Iterator

import msgspec.inspect as mi
import pytest

from kungfud import wire
from kungfud.wire.reasons import shape, teach
from tests.wording import check_wording


def _structs(t: Any, path: tuple = ()) -> Iterator[tuple[tuple, mi.StructType]]:
    for a in (t.types if isinstance(t, mi.UnionType) else (t,)):
        if isinstance(a, mi.StructType):
            yield path, a
            for f in a.fields:
                yield from _structs(f.type, path + (f.encode_name,))
        elif isinstance(a, mi.ListType):
            yield from _structs(a.item_type, path + (0,))


def _at(path: tuple, value: Any, base: dict | None = None) -> Any:
    for step in reversed(path):
        value = [value] if step == 0 else {step: value}
    return value


def _text(path: tuple) -> str:
    return "".join(f"[{s}]" if s == 0 else f".{s}" for s in path).lstrip(".")


def _refused(op: str, args: Any) -> str:
    frame = {"id": 1, "op": op, "args": args}
    if wire.OPS[op].kind == "A":
        frame["key"] = "k"
    with pytest.raises(wire.FrameError) as e:
        wire.decode_args(wire.decode_envelope(json.dumps(frame)))
    return e.value.reason


def _plain(reason: str) -> None:
    check_wording(reason)
    for bad in ("$", "regex", "(?!", "Expected `", "Object contains", "Object missing"):
        assert bad not in reason, reason


CASES = [(op, path, s) for op, spec in wire.OPS.items() for path, s in _structs(mi.type_info(spec.args))]


@pytest.mark.rules("L2-4")
@pytest.mark.parametrize("op,path,struct", CASES, ids=[f"{o}:{_text(p) or '-'}" for o, p, _ in CASES])
def test_L2_4_every_field_of_every_op_is_taught_by_name(op, path, struct):
    # an unknown field beside the object's own: the reason lists what the object takes
    reason = _refused(op, _at(path, {"no_such_field": 1}))
    _plain(reason)
    assert "unknown field `no_such_field`" in reason, reason
    for f in struct.fields:
        assert f"`{f.encode_name}`" in reason, (f.encode_name, reason)
    for f in struct.fields:
        where = _text(path + (f.encode_name,))
        # a wrong type: named by its path, with what is accepted
        wrong = [1, 2] if not isinstance(f.type, mi.ListType) else "x"
        reason = _refused(op, _at(path, {f.encode_name: wrong}))
        _plain(reason)
        assert f"`{where}`" in reason or f"`{where}[" in reason or "needs `" in reason or "the args need `" in reason, (where, reason)


@pytest.mark.rules("L2-4")
def test_L2_4_shapes_are_derived_from_the_types():
    assert shape(mi.type_info(wire.TaskCreateArgs).fields[0].type) == '"open" or {"agents": ["ag_…", …]}'
    assert shape(mi.type_info(wire.AssignArgs)) == '{"to": "ag_…", "content": {…}}'
    assert teach(wire.PostArgs, "Object contains unknown field `deadline` - at `$.assign`").startswith(
        "unknown field `deadline` in `assign`; a deadline is a number of seconds, 1…31536000: `deliver_within_s`"
    )
    # an unknown message shape keeps msgspec's words, located by our path
    assert teach(wire.PostArgs, "Something new - at `$.assign.to`") == "Something new (in `assign.to`)"
