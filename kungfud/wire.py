"""WIRE.md as types: the request envelope, the args of every op, and responses.

Args are frozen msgspec Structs that forbid unknown fields, so a typo or a wrongly
typed value is a ``bad_request`` naming the field (WIRE.md "Frames"). Participant
values are accepted only inside ``content`` objects (L6). Encoders and decoders are
built once.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from typing import Annotated, Any, Literal, NamedTuple

import msgspec

from .errors import ECHO_CHARS, echo

__all__ = [
    "Envelope",
    "OpSpec",
    "OPS",
    "ACTION_OPS",
    "READ_OPS",
    "decode_envelope",
    "decode_args",
    "encode_ok",
    "encode_error",
    "canonical_hash",
    "FrameError",
    "why",
]

# --- shared field types ----------------------------------------------------

ReqId = str | int
IdemKey = Annotated[str, msgspec.Meta(min_length=1, max_length=128, pattern=r"^[\x20-\x7e]+$(?!\n)")]


# Patterns end in `$(?!\n)`: Python's `$` also matches before a final newline, and
# the lookahead refuses that while reading the same in JSON Schema (ECMA-262) regexes.


def _id(prefix: str) -> Any:
    return Annotated[str, msgspec.Meta(pattern=rf"^{prefix}[0-9a-z_]{{1,60}}$(?!\n)")]


AgentId = _id("ag_")
MemoryId = _id("me_")
ThreadId = _id("th_")
AssignmentId = _id("as_")
TaskId = _id("tk_")
RoleName = Literal["observer", "speaker", "governor"]
# Every integer arg has a range and every cursor a format, so a value the daemon
# cannot use is `bad_request` naming the field at the wire, never a failure deeper
# in (an integer too large to store, a cursor `int()` cannot read). 2^53 is the
# largest integer below which doubles (how most JSON clients read numbers) are exact.
MAX_INT = 2**53
EntryNo = Annotated[int, msgspec.Meta(ge=1, le=MAX_INT)]
Version = Annotated[int, msgspec.Meta(ge=1, le=MAX_INT)]
WithinS = Annotated[int, msgspec.Meta(ge=1, le=31_536_000)]
Content = dict[str, Any]  # participant data, opaque to the daemon (L6)
Cursor = Annotated[str, msgspec.Meta(max_length=256)] | None  # prefer a format below
Limit = Annotated[int, msgspec.Meta(ge=1, le=100)]
# The cursor each list read returns, and so the only ones it accepts.
EntryCursor = Annotated[str, msgspec.Meta(pattern=r"^[0-9]{1,16}$(?!\n)")] | None  # an entry number
# A sealed cursor (docs/decisions.md D44: a page that stopped on a row the caller
# may not read) is `~` + URL-safe base64, within WIRE.md's 256 characters.
_SEALED = r"~[A-Za-z0-9_-]{1,255}"
MemoryCursor = Annotated[str, msgspec.Meta(pattern=rf"^(?:me_[0-9a-z_]{{1,60}}|{_SEALED})$(?!\n)")] | None
ThreadCursor = ThreadId | None
TaskCursor = TaskId | None
AgentCursor = AgentId | None
PositionCursor = (
    Annotated[str, msgspec.Meta(pattern=rf"^(?:(?:[0-9a-f]{{2}}){{1,200}}|{_SEALED})$(?!\n)")] | None
)  # an index position, in the clear or sealed


class _Args(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    pass


# --- account (§4) ------------------------------------------------------------


class HelloArgs(_Args, frozen=True):
    key: Annotated[str, msgspec.Meta(min_length=1, max_length=256)]


class NameContent(msgspec.Struct, frozen=True):
    """``agent.register`` content must carry a ``name`` string; any other content
    fields are kept as given."""

    name: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]


class RegisterArgs(_Args, frozen=True):
    content: Content


class WhoamiArgs(_Args, frozen=True):
    pass


class SetStatusArgs(_Args, frozen=True):
    agent: AgentId
    status: Literal["active", "deactivated"]


# --- operating a deployment (WIRE.md "Additions in 1.1") ----------------------


class AdminCreateArgs(_Args, frozen=True):
    content: Content  # {"name": …}, as agent.register


class AgentListArgs(_Args, frozen=True):
    status: Literal["active", "deactivated"] | None = None
    cursor: AgentCursor = None
    limit: Limit = 50


class RotateKeyArgs(_Args, frozen=True):
    pass


class ResetKeyArgs(_Args, frozen=True):
    agent: AgentId


# --- memory (§5) -------------------------------------------------------------


class MemoryCreateArgs(_Args, frozen=True):
    content: Content


class MemoryUpdateArgs(_Args, frozen=True):
    memory: MemoryId
    content: Content


class MemoryRefArgs(_Args, frozen=True):
    memory: MemoryId


class MemoryGetArgs(_Args, frozen=True):
    memory: MemoryId
    version: Version | None = None


class MemoryListArgs(_Args, frozen=True):
    author: AgentId | None = None
    cursor: MemoryCursor = None
    limit: Limit = 50


# --- thread (§6) -------------------------------------------------------------


class MemoryRef(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``{"memory": "me_…", "version": 3}``; without ``version``, the current one."""

    memory: MemoryId
    version: Version | None = None


class PinArgs(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``{memory|content}``: a Memory reference, or content for a new private Memory."""

    memory: MemoryRef | None = None
    content: Content | None = None


class AssignContent(msgspec.Struct, frozen=True):
    """Shape check only: an assignment's content names its acceptance criteria."""

    criteria: Any


class NoteContent(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """B10: a handle note is one line of at most 1,000 characters: no character that
    ends a line (``str.splitlines``: LF, VT, FF, CR, FS, GS, RS, NEL, U+2028, U+2029)."""

    note: Annotated[str, msgspec.Meta(max_length=1000, pattern=r"^[^\n\x0b\x0c\r\x1c-\x1e\x85\u2028\u2029]*$(?!\n)")]


class ReasonContent(msgspec.Struct, frozen=True):
    reason: Annotated[str, msgspec.Meta(min_length=1)]


class AssignArgs(_Args, frozen=True):
    to: AgentId
    content: Content
    deliver_within_s: WithinS | None = None
    judge_within_s: WithinS | None = None
    redoes: AssignmentId | None = None


class ThreadCreateArgs(_Args, frozen=True):
    content: Content | None = None


class ThreadRefArgs(_Args, frozen=True):
    thread: ThreadId


class AdmitArgs(_Args, frozen=True):
    thread: ThreadId
    role: RoleName = "speaker"


class JoinArgs(_Args, frozen=True):
    token: Annotated[str, msgspec.Meta(min_length=1, max_length=256)]


class RemoveArgs(_Args, frozen=True):
    thread: ThreadId
    agent: AgentId


class SetRoleArgs(_Args, frozen=True):
    thread: ThreadId
    agent: AgentId
    role: RoleName


class PostArgs(_Args, frozen=True):
    thread: ThreadId
    memory: MemoryRef | None = None
    content: Content | None = None
    reply_to: EntryNo | None = None
    ask: Annotated[list[AgentId], msgspec.Meta(max_length=1000)] | None = None
    task: TaskId | None = None
    assign: AssignArgs | None = None


class HandleArgs(_Args, frozen=True):
    thread: ThreadId
    entry: EntryNo
    content: Content | None = None


class EntryRefArgs(_Args, frozen=True):
    thread: ThreadId
    entry: EntryNo


class EntriesArgs(_Args, frozen=True):
    thread: ThreadId
    cursor: EntryCursor = None
    limit: Limit = 50
    full: bool = False
    newest_first: bool = False  # WIRE.md 1.1 "Reading the work itself"


class ThreadPageArgs(_Args, frozen=True):
    cursor: ThreadCursor = None
    limit: Limit = 50


class PageArgs(_Args, frozen=True):
    """``turn`` and ``opportunities``: paged by index position."""

    cursor: PositionCursor = None
    limit: Limit = 50


# --- assignment (§6.4) ----------------------------------------------------------


class TakeArgs(_Args, frozen=True):
    assignment: AssignmentId
    deliver: PinArgs | None = None


class DeliverArgs(_Args, frozen=True):
    assignment: AssignmentId
    memory: MemoryRef | None = None
    content: Content | None = None


class JudgeArgs(_Args, frozen=True):
    assignment: AssignmentId
    verdict: Literal["adopt", "reject"]
    content: Content | None = None


class AssignmentRefArgs(_Args, frozen=True):
    assignment: AssignmentId


# --- task (§7) -------------------------------------------------------------------

EngagementId = _id("en_")


class AgentList(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    agents: Annotated[list[AgentId], msgspec.Meta(min_length=1, max_length=1000)]


class InputRef(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    memory: MemoryId
    version: Version


class ContractContent(msgspec.Struct, frozen=True):
    """Shape check only: a contract's content states output and criteria (R7.1-1)."""

    output: Any
    criteria: Any


class ContractArgs(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    content: Content
    inputs: Annotated[list[InputRef], msgspec.Meta(max_length=100)] = []
    deliver_within_s: WithinS | None = None
    judge_within_s: WithinS | None = None
    on_no_judgment: Literal["undecided", "adopt"] = "undecided"
    adoption_limit: Version | None = None
    judge: AgentId | None = None
    eligibility: AgentList | None = None
    readers: Literal["parties", "public"] = "parties"


class TaskCreateArgs(_Args, frozen=True):
    audience: Literal["open"] | AgentList
    contract: ContractArgs


class TaskReviseArgs(_Args, frozen=True):
    task: TaskId
    contract: ContractArgs


class TaskRefArgs(_Args, frozen=True):
    task: TaskId


class TaskTakeArgs(_Args, frozen=True):
    task: TaskId
    deliver: PinArgs | None = None


class TaskDeliverArgs(_Args, frozen=True):
    engagement: EngagementId
    memory: MemoryRef | None = None
    content: Content | None = None


class EngagementRefArgs(_Args, frozen=True):
    engagement: EngagementId


class TaskJudgeArgs(_Args, frozen=True):
    engagement: EngagementId
    verdict: Literal["adopt", "reject"]
    content: Content | None = None


class TaskGetArgs(_Args, frozen=True):
    task: TaskId
    contract_version: Version | None = None
    adopted_after: EngagementId | None = None  # continue `adopted` after this item (its `adopted_cursor`)


class EngagementGetArgs(_Args, frozen=True):
    engagement: EngagementId
    inputs_after: Annotated[int, msgspec.Meta(ge=0, le=100)] = 0  # inputs whose content an earlier page gave


class SubscribeArgs(_Args, frozen=True):
    since: Annotated[int, msgspec.Meta(ge=0, le=MAX_INT)] | None = None


class TaskListArgs(_Args, frozen=True):
    cursor: TaskCursor = None
    limit: Limit = 50
    mine: bool = False


# --- catalogue ---------------------------------------------------------------


class OpSpec(NamedTuple):
    kind: Literal["A", "R"]  # action (needs a key) or read (must not have one)
    args: type
    open: bool = False  # allowed before authentication


OPS: dict[str, OpSpec] = {
    "hello": OpSpec("R", HelloArgs, open=True),
    "agent.register": OpSpec("A", RegisterArgs, open=True),
    "agent.whoami": OpSpec("R", WhoamiArgs),
    "admin.agent.set_status": OpSpec("A", SetStatusArgs),
    "admin.agent.create": OpSpec("A", AdminCreateArgs),
    "admin.agent.list": OpSpec("R", AgentListArgs),
    "agent.rotate_key": OpSpec("A", RotateKeyArgs),
    "admin.agent.reset_key": OpSpec("A", ResetKeyArgs),
    "memory.create": OpSpec("A", MemoryCreateArgs),
    "memory.update": OpSpec("A", MemoryUpdateArgs),
    "memory.publish": OpSpec("A", MemoryRefArgs),
    "memory.unpublish": OpSpec("A", MemoryRefArgs),
    "memory.withdraw": OpSpec("A", MemoryRefArgs),
    "memory.get": OpSpec("R", MemoryGetArgs),
    "memory.list": OpSpec("R", MemoryListArgs),
    "thread.create": OpSpec("A", ThreadCreateArgs),
    "thread.admit": OpSpec("A", AdmitArgs),
    "thread.void_admission": OpSpec("A", ThreadRefArgs),
    "thread.join": OpSpec("A", JoinArgs),
    "thread.leave": OpSpec("A", ThreadRefArgs),
    "thread.remove": OpSpec("A", RemoveArgs),
    "thread.set_role": OpSpec("A", SetRoleArgs),
    "thread.post": OpSpec("A", PostArgs),
    "thread.handle": OpSpec("A", HandleArgs),
    "thread.retract": OpSpec("A", EntryRefArgs),
    "thread.close": OpSpec("A", ThreadRefArgs),
    "thread.get": OpSpec("R", ThreadRefArgs),
    "thread.entries": OpSpec("R", EntriesArgs),
    "thread.entry": OpSpec("R", EntryRefArgs),
    "thread.list": OpSpec("R", ThreadPageArgs),
    "assignment.take": OpSpec("A", TakeArgs),
    "assignment.deliver": OpSpec("A", DeliverArgs),
    "assignment.judge": OpSpec("A", JudgeArgs),
    "assignment.drop": OpSpec("A", AssignmentRefArgs),
    "assignment.void": OpSpec("A", AssignmentRefArgs),
    "assignment.get": OpSpec("R", AssignmentRefArgs),
    "task.create": OpSpec("A", TaskCreateArgs),
    "task.revise": OpSpec("A", TaskReviseArgs),
    "task.pause": OpSpec("A", TaskRefArgs),
    "task.resume": OpSpec("A", TaskRefArgs),
    "task.take": OpSpec("A", TaskTakeArgs),
    "task.deliver": OpSpec("A", TaskDeliverArgs),
    "task.drop": OpSpec("A", EngagementRefArgs),
    "task.judge": OpSpec("A", TaskJudgeArgs),
    "task.get": OpSpec("R", TaskGetArgs),
    "task.list": OpSpec("R", TaskListArgs),
    "engagement.get": OpSpec("R", EngagementGetArgs),
    "turn": OpSpec("R", PageArgs),
    "opportunities": OpSpec("R", PageArgs),
    "outcomes": OpSpec("R", PageArgs),
    "subscribe": OpSpec("R", SubscribeArgs),
}
ACTION_OPS = frozenset(op for op, s in OPS.items() if s.kind == "A")
READ_OPS = frozenset(op for op, s in OPS.items() if s.kind == "R")


# --- frames --------------------------------------------------------------------


class Envelope(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    id: ReqId
    op: str
    args: msgspec.Raw = msgspec.Raw(b"{}")
    # Validated per op kind below, so the error can name it; UNSET tells a read
    # that carries `"key": null` (bad_request) from one without the field.
    key: Any = msgspec.UNSET


class FrameError(Exception):
    """A frame that is not a valid request. ``req_id`` is the id when one could be read."""

    def __init__(self, reason: str, req_id: ReqId | None = None):
        super().__init__(reason)
        self.reason = reason
        self.req_id = req_id


_envelope_dec = msgspec.json.Decoder(Envelope)
_loose_dec = msgspec.json.Decoder()
_args_decs = {op: msgspec.json.Decoder(spec.args) for op, spec in OPS.items()}
_key_dec = msgspec.json.Decoder(IdemKey)


_LEADING_ID = re.compile(r'^\s*\{\s*"id"\s*:\s*("(?:[^"\\\x00-\x1f]|\\.){0,64}"|-?[0-9]{1,18})\s*[,}]')


_ESCAPE_HIGH = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}")
_ESCAPE_PAIR = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}")
_ESCAPE_LOW = re.compile(r"\\u[dD][c-fC-F][0-9a-fA-F]{2}")


def _lone_surrogate(text: str | bytes) -> bool:
    """Whether a frame escapes half of a UTF-16 surrogate pair on its own (RFC 8259
    §8.2: not a character). msgspec says "Input data was truncated" for that."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if "\\u" not in text:
        return False
    rest = _ESCAPE_PAIR.sub("", text.replace("\\\\", ""))  # an escaped backslash escapes nothing
    return bool(_ESCAPE_HIGH.search(rest) or _ESCAPE_LOW.search(rest))


def _leading_id(text: str | bytes) -> ReqId | None:
    """The id of a frame that cannot be decoded as a whole, when it is written first."""
    head = text[:200] if isinstance(text, str) else text[:200].decode("utf-8", "replace")
    m = _LEADING_ID.match(head)
    if m is None:
        return None
    try:
        rid = _loose_dec.decode(m.group(1))
    except (msgspec.DecodeError, ValueError):
        return None
    return rid if isinstance(rid, (int, str)) and not isinstance(rid, bool) else None


class _IdOnly(msgspec.Struct):
    """A frame's id, everything else skipped over in C (never built as objects)."""

    id: msgspec.Raw = msgspec.Raw(b"null")


_id_dec = msgspec.json.Decoder(_IdOnly)


def _readable_id(text: str | bytes) -> ReqId | None:
    """Best effort: the request id of a frame that failed to decode."""
    try:
        raw = _id_dec.decode(text).id
    except RecursionError:
        return _leading_id(text)  # too deep to decode at all
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError):
        return None
    if len(raw) > 64 * 12 + 2:  # longer than any valid id: 64 astral characters as escaped surrogate pairs, quoted
        return None
    try:
        rid = _loose_dec.decode(raw)
    except (msgspec.DecodeError, ValueError, RecursionError):
        return None
    if isinstance(rid, bool):
        return None
    if (isinstance(rid, int) and -(2**63) <= rid < 2**63) or (isinstance(rid, str) and len(rid) <= 64):
        return rid
    return None


# msgspec's messages quote client text in these places: unknown field names, enum
# and tag values. Paths name only our fields, indices and "[...]" for dict keys.
_QUOTED_BY_MSGSPEC = re.compile(r"^(Object contains unknown field `|Invalid (?:enum |tag )?value ')(.*)([`'])$", re.S)


def why(e: Exception) -> str:
    """The reason for a msgspec error, with any client text it quotes cut (every
    msgspec message that reaches a client goes through here)."""
    why = str(e) or "malformed frame"
    what, sep, path = why.rpartition(" - at `$")
    if not sep:
        what, path = why, ""
    m = _QUOTED_BY_MSGSPEC.match(what)
    if m is not None:
        what = m.group(1) + echo(m.group(2)) + m.group(3)
    elif len(what) > 2 * ECHO_CHARS + 60:  # a message of a shape not known above
        what = echo(what)
    return what + (sep + path if sep else "")


def decode_envelope(text: str | bytes) -> Envelope:
    """Decode a request frame; raise :class:`FrameError` naming the problem. Only
    the envelope is read: ``args`` is skipped over (in C) until the op is known
    and the caller may use it."""
    try:
        env = _envelope_dec.decode(text)
    except RecursionError:
        raise FrameError("frame is nested too deeply", _readable_id(text)) from None
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        if isinstance(e, msgspec.DecodeError) and _lone_surrogate(text):
            # JSON but for one escape: the id is as readable as in a whole frame.
            raise FrameError(
                "invalid request frame: a \\u escape names half of a surrogate pair, which is not a character",
                _leading_id(text),
            ) from None
        raise FrameError(f"invalid request frame: {why(e)}", _readable_id(text)) from None
    if isinstance(env.id, bool) or (isinstance(env.id, str) and len(env.id) > 64):
        raise FrameError("invalid request frame: `id` must be a string of at most 64 chars or an integer")
    if isinstance(env.id, int) and not -(2**63) <= env.id < 2**63:
        raise FrameError("invalid request frame: integer `id` out of range")
    spec = OPS.get(env.op)
    if spec is None:
        close = difflib.get_close_matches(env.op, list(OPS), n=1)
        suggestion = f"; did you mean `{close[0]}`?" if close else ""
        raise FrameError(f"unknown op `{echo(env.op)}`{suggestion}", env.id)
    if bytes(memoryview(env.args)[:1]) != b"{":  # the rest of args is read only when it is used
        raise FrameError(f"invalid args for {env.op}: Expected `object` - at `$.args`", env.id)
    if spec.kind == "A":
        if env.key is None or env.key is msgspec.UNSET:
            raise FrameError(f"op {env.op} is an action and needs an idempotency `key`", env.id)
        if not isinstance(env.key, str) or not (1 <= len(env.key) <= 128) or not all(
            " " <= c <= "~" for c in env.key
        ):
            raise FrameError("`key` must be 1-128 printable ASCII characters", env.id)
    elif env.key is not msgspec.UNSET:
        raise FrameError(f"op {env.op} is a read and takes no `key` field", env.id)
    return env


MAX_DEPTH = 64  # nesting of arrays and objects inside `args`
MAX_CONTAINERS = 10_000  # arrays and objects in `args`, counted before any is built (D62)
MAX_VALUES = 50_000  # values in `args`: itself, every element and member, an empty array/object twice (D62)

# Depth is measured on the text with C-speed primitives only (bytes methods and one
# regular expression), never a Python loop over bytes or values: escaped
# backslashes and quotes are dropped, every byte but brackets and quotes deleted,
# strings (now only brackets between quotes) removed, and what is left — brackets
# only — must match "balanced, at most MAX_DEPTH deep", a regex that nests
# MAX_DEPTH possessive groups (no backtracking: linear in the text).
_BRACKETS = bytes.maketrans(b"{}", b"[]")
_NOT_STRUCTURE = bytes(c for c in range(256) if c not in b'[]{}"')
_STRING = re.compile(rb'"[^"]*+"')


def _within(limit: int) -> re.Pattern[bytes]:
    body = b""
    for _ in range(limit):
        body = rb"(?:\[" + body + rb"\])*+"
    return re.compile(body)


_WITHIN_MAX_DEPTH = _within(MAX_DEPTH)


def _too_deep(raw: bytes, limit: int = MAX_DEPTH) -> bool:
    """True if JSON text (already known to be valid) nests arrays/objects deeper
    than ``limit``. Linear, and in C: see above."""
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False
    if b"\\" in raw:
        # In valid JSON a backslash starts a two-character escape, so pairs read
        # left to right are `\\`; what is left before a quote escapes it.
        raw = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    structure = raw.translate(_BRACKETS, _NOT_STRUCTURE).replace(b'""', b"")
    if b'"' in structure:
        structure = _STRING.sub(b"", structure)
    pattern = _WITHIN_MAX_DEPTH if limit == MAX_DEPTH else _within(limit)
    return pattern.fullmatch(structure) is None


# Arrays, objects and values are counted the same way (D62): escapes dropped,
# every byte but brackets, commas and quotes deleted, strings removed — in bulk
# with bytes.replace when they hold no bracket or comma (as above), else by
# splitting at the quotes and keeping what is outside. What is left is the
# brackets and commas outside strings: each "[" an array or object, and the
# count of values is 1 + commas + arrays and objects — `args` itself, every
# element and member, and an empty array or object once more.
_SHAPE_DELETE = bytes(c for c in range(256) if c not in b'[]{}",')
_NOT_COUNTED = bytes(c for c in range(256) if c not in b"[{,")


def _count(raw: bytes) -> tuple[int, int]:
    """(arrays and objects, values as counted above) in JSON text already known
    to be valid."""
    if b"\\" in raw:
        raw = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    shape = raw.translate(_BRACKETS, _SHAPE_DELETE).replace(b'""', b"")
    if b'"' in shape:  # strings holding brackets or commas
        shape = b"".join(shape.split(b'"')[::2])
    containers = shape.count(b"[")
    return containers, 1 + shape.count(b",") + containers


def _too_many(raw: bytes) -> str | None:
    """Which count limit JSON text (already known to be valid) is over, if any —
    without building any value (H2)."""
    marks = raw.translate(None, _NOT_COUNTED)  # those in strings too: at least the true counts
    commas = marks.count(b",")
    if len(marks) - commas <= MAX_CONTAINERS and 1 + len(marks) <= MAX_VALUES:
        return None
    containers, values = _count(raw)
    if containers > MAX_CONTAINERS:
        return f"`args` holds more than {MAX_CONTAINERS} arrays and objects (the limit per request)"
    if values > MAX_VALUES:
        return f"`args` holds more than {MAX_VALUES} values (the limit per request)"
    return None


def decode_args(env: Envelope) -> Any:
    """The typed args of ``env``. Decoded straight into the op's Struct, so a
    field the op does not have, or a value of the wrong type, stops the decoder
    where it stands (in C). Only ``content`` may nest freely; a frame that
    decoded is then checked against the nesting limit — a fixed limit, so the
    same request is accepted or refused the same way every time (L3-2).

    Before anything is decoded, the arrays, objects and values in ``args`` are
    counted in C: building them cost the event loop ~140 ms for a 1 MiB frame
    of ``[[],[],…]``, ~30 ms of ``[{"a":1},…]``; so ``args`` holding more than
    MAX_CONTAINERS arrays and objects or MAX_VALUES values is refused unbuilt,
    whatever op it is for (H2, D62). The envelope decoder has already checked
    that ``args`` is valid JSON, so the count is exact."""
    raw = bytes(env.args)
    over = _too_many(raw)
    if over is not None:
        raise FrameError(over, env.id)
    try:
        args = _args_decs[env.op].decode(env.args)
    except RecursionError:
        raise FrameError(f"`args` nests arrays and objects deeper than {MAX_DEPTH} levels", env.id) from None
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        what, sep, path = why(e).rpartition(" - at `$")
        reason = f"{what} - at `$.args{path}" if sep else f"{path} - at `$.args`"
        raise FrameError(f"invalid args for {env.op}: {reason}", env.id) from None
    if _too_deep(raw):
        raise FrameError(f"`args` nests arrays and objects deeper than {MAX_DEPTH} levels", env.id)
    return args


# --- responses -----------------------------------------------------------------


class _Ok(msgspec.Struct):
    id: ReqId
    ok: bool
    replayed: bool
    result: msgspec.Raw


class _Err(msgspec.Struct):
    id: ReqId | None
    ok: bool
    error: Any


_enc = msgspec.json.Encoder()
_sorted_enc = msgspec.json.Encoder(order="sorted")


def encode_ok(req_id: ReqId, result: bytes, replayed: bool = False) -> bytes:
    return _enc.encode(_Ok(req_id, True, replayed, msgspec.Raw(result)))


def encode_error(req_id: ReqId | None, rejection: Any) -> bytes:
    return _enc.encode(_Err(req_id, False, rejection))


def encode(obj: Any) -> bytes:
    return _enc.encode(obj)


def canonical_hash(op: str, args: Any) -> bytes:
    """DECISIONS.md B6: same request = same op and equal canonical args."""
    return hashlib.sha256(op.encode() + b"\x00" + _sorted_enc.encode(args)).digest()
