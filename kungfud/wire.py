"""WIRE.md as types: the request envelope, the args of every op, and responses.

Args are frozen msgspec Structs that forbid unknown fields, so a typo or a wrongly
typed value is a ``bad_request`` naming the field (WIRE.md "Frames"). Participant
values are accepted only inside ``content`` objects (L6). Encoders and decoders are
built once.
"""

from __future__ import annotations

import hashlib
import re
from typing import Annotated, Any, Literal, NamedTuple

import msgspec

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
]

# --- shared field types ----------------------------------------------------

ReqId = str | int
IdemKey = Annotated[str, msgspec.Meta(min_length=1, max_length=128, pattern=r"^[\x20-\x7e]+$")]


def _id(prefix: str) -> Any:
    return Annotated[str, msgspec.Meta(pattern=f"^{prefix}[0-9a-z_]{{1,60}}$")]


AgentId = _id("ag_")
MemoryId = _id("me_")
ThreadId = _id("th_")
AssignmentId = _id("as_")
TaskId = _id("tk_")
RoleName = Literal["observer", "speaker", "governor"]
EntryNo = Annotated[int, msgspec.Meta(ge=1, le=2**53)]
WithinS = Annotated[int, msgspec.Meta(ge=1, le=31_536_000)]
Content = dict[str, Any]  # participant data, opaque to the daemon (L6)
Cursor = Annotated[str, msgspec.Meta(max_length=256)] | None
Limit = Annotated[int, msgspec.Meta(ge=1, le=100)]


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
    cursor: Cursor = None
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
    version: Annotated[int, msgspec.Meta(ge=1)] | None = None


class MemoryListArgs(_Args, frozen=True):
    author: AgentId | None = None
    cursor: Cursor = None
    limit: Limit = 50


# --- thread (§6) -------------------------------------------------------------


class MemoryRef(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``{"memory": "me_…", "version": 3}``; without ``version``, the current one."""

    memory: MemoryId
    version: Annotated[int, msgspec.Meta(ge=1)] | None = None


class PinArgs(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``{memory|content}``: a Memory reference, or content for a new private Memory."""

    memory: MemoryRef | None = None
    content: Content | None = None


class AssignContent(msgspec.Struct, frozen=True):
    """Shape check only: an assignment's content names its acceptance criteria."""

    criteria: Any


class NoteContent(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """B10: a handle note is one line of at most 1,000 characters."""

    note: Annotated[str, msgspec.Meta(max_length=1000, pattern=r"^[^\r\n]*$")]


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
    cursor: Cursor = None
    limit: Limit = 50
    full: bool = False


class PageArgs(_Args, frozen=True):
    cursor: Cursor = None
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
    version: Annotated[int, msgspec.Meta(ge=1)]


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
    adoption_limit: Annotated[int, msgspec.Meta(ge=1)] | None = None
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
    contract_version: Annotated[int, msgspec.Meta(ge=1)] | None = None


class SubscribeArgs(_Args, frozen=True):
    since: Annotated[int, msgspec.Meta(ge=0)] | None = None


class TaskListArgs(_Args, frozen=True):
    cursor: Cursor = None
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
    "thread.list": OpSpec("R", PageArgs),
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
    "engagement.get": OpSpec("R", EngagementRefArgs),
    "turn": OpSpec("R", PageArgs),
    "opportunities": OpSpec("R", PageArgs),
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


def _readable_id(text: str | bytes) -> ReqId | None:
    """Best effort: the request id of a frame that failed to decode."""
    try:
        obj = _loose_dec.decode(text)
    except RecursionError:
        # Too deep to decode at all: an id written first can still be read.
        head = text[:200] if isinstance(text, str) else text[:200].decode("utf-8", "replace")
        m = _LEADING_ID.match(head)
        if m is None:
            return None
        try:
            rid = _loose_dec.decode(m.group(1))
        except msgspec.DecodeError:
            return None
        return rid if isinstance(rid, (int, str)) and not isinstance(rid, bool) else None
    except (msgspec.DecodeError, ValueError):
        return None
    if isinstance(obj, dict):
        rid = obj.get("id")
        if isinstance(rid, bool):
            return None
        if (isinstance(rid, int) and -(2**63) <= rid < 2**63) or (isinstance(rid, str) and len(rid) <= 64):
            return rid
    return None


def _why(e: Exception) -> str:
    return str(e) or "malformed frame"


def decode_envelope(text: str | bytes) -> Envelope:
    """Decode a request frame; raise :class:`FrameError` naming the problem."""
    try:
        env = _envelope_dec.decode(text)
    except RecursionError:
        raise FrameError("frame is nested too deeply", _readable_id(text)) from None
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        raise FrameError(f"invalid request frame: {_why(e)}", _readable_id(text)) from None
    if isinstance(env.id, bool) or (isinstance(env.id, str) and len(env.id) > 64):
        raise FrameError("invalid request frame: `id` must be a string of at most 64 chars or an integer")
    if isinstance(env.id, int) and not -(2**63) <= env.id < 2**63:
        raise FrameError("invalid request frame: integer `id` out of range")
    spec = OPS.get(env.op)
    if spec is None:
        raise FrameError(f"unknown op `{env.op[:64]}`", env.id)
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


def _too_deep(raw: bytes, limit: int) -> bool:
    """True if JSON text nests arrays/objects deeper than ``limit``. Cheap when
    the text has few brackets; otherwise one pass that skips strings."""
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False
    depth = 0
    in_string = escaped = False
    for byte in raw:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):
            depth += 1
            if depth > limit:
                return True
        elif byte in (0x5D, 0x7D):
            depth -= 1
    return False


def decode_args(env: Envelope) -> Any:
    # A fixed limit, checked before anything recurses over the value, so the
    # same request is accepted or refused the same way every time (L3-2).
    if _too_deep(bytes(env.args), MAX_DEPTH):
        raise FrameError(f"`args` nests arrays and objects deeper than {MAX_DEPTH} levels", env.id)
    try:
        return _args_decs[env.op].decode(env.args)
    except RecursionError:
        raise FrameError("`args` is nested too deeply", env.id) from None
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        why = _why(e)
        why = why.replace("at `$", "at `$.args") if "at `$" in why else why + " - at `$.args`"
        raise FrameError(f"invalid args for {env.op}: {why}", env.id) from None


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
