"""The reason of a ``bad_request`` for args that do not fit their op: what is
wrong, where, and what is accepted there (WIRE.md 1.1 "Wording of rejections").

msgspec stops at the first problem and says it in its own terms ("Object
contains unknown field `text` - at `$.args`", "Expected `str` matching regex
'^ag_…'"). :func:`teach` turns that into a sentence a person or a model can act
on, derived from the args type at the failing path (one fact, one place: the
types in :mod:`.args`), so a new op or field is taught without a line here:

- an unknown field names the fields the object takes; a participant value sent
  beside ``content`` is told to go inside it (``content: {"reason": …}``); a
  deadline-like name is told ``deliver_within_s`` / ``judge_within_s``;
- a missing field shows the object's shape;
- a wrongly typed or formatted value shows the accepted shape
  (``"open" or {"agents": ["ag_…"]}``); an id of the wrong format says which
  kind of id is expected and where one is found.

No reason carries a ``$.args`` path or a regular expression: a location is the
argument's own name (``assign.to``, ``ask[0]``). Client text quoted is cut
(:func:`~kungfud.errors.echo`).
"""

from __future__ import annotations

import difflib
import re

import msgspec.inspect as mi

from ..errors import echo

__all__ = ["teach", "shape", "ID_KINDS", "DEADLINE_WORDS"]

#: Id prefix -> (what it names, where a caller finds one).
ID_KINDS: dict[str, tuple[str, str]] = {
    "ag": ("an agent id", (
        "an agent gets its own id from `agent.whoami`; `thread.get` lists a Thread's members with their "
        "names; an admin lists every agent with `admin.agent.list`"
    )),
    "me": ("a Memory id", "`memory.list` lists Memories"),
    "th": ("a Thread id", "`thread.list` lists your Threads"),
    "as": ("an assignment id", "`turn`, `opportunities` and `thread.get` name assignments"),
    "tk": ("a Task id", "`task.list` lists Tasks"),
    "en": ("an engagement id", "`task.take` returns yours; `turn` and `task.get` name engagements"),
    "ky": ("a scoped key id", "`agent.key.list` lists your live scoped keys"),
}
_ID_PATTERN = re.compile(r"^\^([a-z]{2})_\[")

#: Names a newcomer tries for a deadline, where the op takes ``deliver_within_s``.
DEADLINE_WORDS = frozenset(
    {"deadline", "deliver_by", "delivery_deadline", "due", "due_at", "timeout", "deadline_s", "within_s",
     "deliver_within", "due_in_s", "expires", "expires_at", "judge_by", "ttl"}
)

_MSG = re.compile(r"^(.*?)(?: - at `\$([^`]*)`)?$", re.S)
_UNKNOWN = re.compile(r"^Object contains unknown field `(.*)`$", re.S)
_MISSING = re.compile(r"^Object missing required field `(.*)`$", re.S)
_GOT = re.compile(r"^Expected `([^`]*)`, got `([^`]*)`$")
_RANGE = re.compile(r"^Expected `(int|float)` (>=|<=|>|<) (-?[0-9.]+)$")
_LENGTH = re.compile(r"^Expected `(str|array|object)` of length (>=|<=) ([0-9]+)$")
_REGEX = re.compile(r"^Expected `str` matching regex '(.*)'$", re.S)
_ENUM = re.compile(r"^Invalid enum value [`'](.*)[`']$", re.S)  # frames.why puts it in backticks
_SEGMENT = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]|\[\.\.\.\]")

_ARTICLE = {"array": "an array", "object": "an object", "str": "a string", "int": "an integer",
            "float": "a number with a fraction", "bool": "true or false", "null": "null"}


def _plain(t: mi.Type) -> mi.Type:
    """The type without its ``null`` alternative (null is the same as absent)."""
    if isinstance(t, mi.UnionType):
        rest = [u for u in t.types if not isinstance(u, mi.NoneType)]
        if len(rest) == 1:
            return rest[0]
        return mi.UnionType(tuple(rest))
    return t


def _alternatives(t: mi.Type) -> list[mi.Type]:
    t = _plain(t)
    return list(t.types) if isinstance(t, mi.UnionType) else [t]


def _at(root: mi.Type, path: list[str | int]) -> mi.Type | None:
    """The type at ``path`` below ``root`` (None where the args stop being typed)."""
    t: mi.Type | None = root
    for step in path:
        if t is None:
            return None
        alts = _alternatives(t)
        nxt: mi.Type | None = None
        for a in alts:
            if isinstance(step, int) and isinstance(a, mi.ListType):
                nxt = a.item_type
            elif isinstance(step, str) and isinstance(a, mi.StructType):
                nxt = next((f.type for f in a.fields if f.encode_name == step), None)
            if nxt is not None:
                break
        t = nxt
    return t


def _struct(t: mi.Type | None) -> mi.StructType | None:
    for a in _alternatives(t) if t is not None else []:
        if isinstance(a, mi.StructType):
            return a
    return None


def _id_kind(t: mi.Type) -> str | None:
    for a in _alternatives(t):
        if isinstance(a, mi.StrType) and a.pattern and (m := _ID_PATTERN.match(a.pattern)):
            return m.group(1)
    return None


def shape(t: mi.Type, depth: int = 0) -> str:
    """An example of a value of type ``t``, in JSON-ish text: what is accepted."""
    alts = _alternatives(t)
    if len(alts) > 1:
        return " or ".join(shape(a, depth) for a in alts)
    t = alts[0]
    if isinstance(t, mi.StructType):
        if depth > 1:
            return "{…}"
        req = [f for f in t.fields if f.required]
        inner = ", ".join(f'"{f.encode_name}": {shape(f.type, depth + 1)}' for f in req)
        return "{" + (inner or "…") + "}"
    if isinstance(t, mi.LiteralType):
        return " or ".join(f'"{v}"' if isinstance(v, str) else str(v) for v in t.values)
    if isinstance(t, mi.ListType):
        return f"[{shape(t.item_type, depth + 1)}, …]"
    if isinstance(t, mi.DictType):
        return "{…}"
    if isinstance(t, mi.AnyType):
        return '"…"'
    if isinstance(t, mi.StrType):
        kind = _id_kind(t)
        return f'"{kind}_…"' if kind else '"…"'
    if isinstance(t, mi.IntType):
        lo = t.ge if t.ge is not None else None
        hi = t.le if t.le is not None else None
        if lo is not None and hi is not None and hi < 10**9:
            return f"an integer {lo}…{hi}"
        if lo is not None:
            return f"an integer ≥ {lo}"
        return "an integer"
    if isinstance(t, mi.BoolType):
        return "true or false"
    if isinstance(t, mi.NoneType):
        return "null"
    return "a value"


#: Optional fields of which the op needs exactly one (a pin: kungfud/actors/ops.py ``_pin``).
_ONE_OF = ("memory", "content")


def _takes(s: mi.StructType) -> str:
    one_of = all(any(f.encode_name == n and not f.required for f in s.fields) for n in _ONE_OF)
    req = [f"`{f.encode_name}`" for f in s.fields if f.required]
    opt = [f"`{f.encode_name}`" for f in s.fields if not f.required and not (one_of and f.encode_name in _ONE_OF)]
    if one_of:
        req.append("exactly one of " + " or ".join(f"`{n}`" for n in _ONE_OF))
    parts = ", ".join(req)
    if opt:
        parts = f"{parts}, and optionally {', '.join(opt)}" if parts else f"optionally {', '.join(opt)}"
    return parts or "no fields"


def _where(path: str) -> str:
    return f"`{path}`" if path else "the args"


def _path_text(base: str, raw: str) -> tuple[str, list[str | int]]:
    """msgspec's ``$.assign.to`` / ``$.ask[0]`` as ``assign.to`` / ``ask[0]`` and
    as steps; ``[...]`` (a key inside an open object) ends the typed path."""
    steps: list[str | int] = []
    text = base
    for m in _SEGMENT.finditer(raw or ""):
        if m.group(1) is not None:
            steps.append(m.group(1))
            text = f"{text}.{m.group(1)}" if text else m.group(1)
        elif m.group(2) is not None:
            steps.append(int(m.group(2)))
            text += f"[{m.group(2)}]"
        else:
            break
    return text, steps


def _unknown(field: str, s: mi.StructType | None, where: str) -> str:
    said = f"unknown field `{echo(field)}`" + (f" in {_where(where)}" if where else "")
    if s is None:
        return said
    names = [f.encode_name for f in s.fields]
    advice = ""
    close = difflib.get_close_matches(field, names, n=1, cutoff=0.75)
    if field.lower() in DEADLINE_WORDS and "deliver_within_s" in names:
        advice = (
            "; a deadline is a number of seconds, 1…31536000: `deliver_within_s` (from the take) "
            "and `judge_within_s` (from the delivery)"
        )
    elif close:
        advice = f"; did you mean `{close[0]}`?"
    elif "content" in names and field != "content":
        key = field if len(field) <= 32 else "…"  # client text: quoted once in full at most
        advice = f"; what you write goes inside `content`, as `\"content\": {{\"{key}\": …}}`"
    elif field in ("agents", "agent") and any(n == "audience" for n in names):
        advice = '; a restricted audience is `"audience": {"agents": ["ag_…"]}`'
    if not names:
        return f"{said}; {_where(where)} take nothing: send {{}}"
    fields = f"`{where}` takes" if where else "the args are"
    return f"{said}{advice} ({fields} {_takes(s)})"


def _got(expected: str, got: str, t: mi.Type | None, where: str) -> str:
    got_s = _ARTICLE.get(got, f"`{got}`")
    if t is None:
        return f"{_where(where)} must be `{expected}`, not {got_s}"
    kind = _id_kind(t)
    if kind is not None and got != "str":
        return f"{_where(where)} must be {ID_KINDS[kind][0]} (a string \"{kind}_…\"), not {got_s}"
    accepted = shape(t)
    extra = ""
    if where.rsplit(".", 1)[-1] == "audience" and got == "array":
        extra = '; a list of agents goes in `{"agents": [...]}`'
    if where.rsplit(".", 1)[-1] == "content" and got != "object":
        extra = '; put what you write inside an object, e.g. `{"text": "…"}`'
    return f"{_where(where)} must be {accepted}, not {got_s}{extra}"


def _regex(pattern: str, t: mi.Type | None, where: str) -> str:
    m = _ID_PATTERN.match(pattern)
    if m is not None and m.group(1) in ID_KINDS:
        what, find = ID_KINDS[m.group(1)]
        return f"{_where(where)} must be {what} (\"{m.group(1)}_…\", not a name); {find}"
    leaf = where.rsplit(".", 1)[-1]
    if leaf == "cursor":
        return f"`{where}` is not a cursor this daemon returned: pass the previous page's `cursor`, or leave it out"
    if leaf == "note":
        return f"{_where(where)} must be one line (no line breaks)"
    return f"{_where(where)} is not in the accepted format"


def _enum(value: str, t: mi.Type | None, where: str) -> str:
    accepted = shape(t) if t is not None else ""
    said = f"{_where(where)} may not be `{echo(value)}`"
    return f"{said}; it must be {accepted}" if accepted else said


def teach(root: type, message: str, base: str = "") -> str:
    """A msgspec validation message about args of type ``root`` (or, with
    ``base``, about the object at that argument, e.g. ``assign.content``) as a
    reason that says what is accepted."""
    m = _MSG.match(message)
    what, raw_path = (m.group(1), m.group(2)) if m else (message, "")
    where, steps = _path_text(base, raw_path or "")
    info = mi.type_info(root)
    here = _at(info, steps)
    if (u := _UNKNOWN.match(what)) is not None:
        return _unknown(u.group(1), _struct(here), where)
    if (u := _MISSING.match(what)) is not None:
        s = _struct(here)
        need = f"`{where}` needs `{u.group(1)}`" if where else f"the args need `{u.group(1)}`"
        return f"{need}: e.g. {shape(s)}" if s is not None else need
    if (u := _GOT.match(what)) is not None:
        return _got(u.group(1), u.group(2), here, where)
    if (u := _RANGE.match(what)) is not None:
        word = {">=": "at least", "<=": "at most", ">": "more than", "<": "less than"}[u.group(2)]
        return f"{_where(where)} must be {word} {u.group(3)}"
    if (u := _LENGTH.match(what)) is not None:
        n = int(u.group(3))
        if u.group(1) == "str":
            if u.group(2) == ">=" and n == 1:
                return f"{_where(where)} must not be empty"
            return f"{_where(where)} must be {'at least' if u.group(2) == '>=' else 'at most'} {n} characters"
        unit = "item" if n == 1 else "items"
        return f"{_where(where)} must hold {'at least' if u.group(2) == '>=' else 'at most'} {n} {unit}"
    if (u := _REGEX.match(what)) is not None:
        return _regex(u.group(1), here, where)
    if (u := _ENUM.match(what)) is not None:
        return _enum(u.group(1), here, where)
    # A message of a shape not known above: msgspec's words, with the location ours.
    what = echo(what) if len(what) > 2 * 64 + 60 else what
    return f"{what} (in {_where(where)})" if where else what
