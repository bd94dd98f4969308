"""WIRE.md frames: the request envelope, how a frame is decoded (envelope first,
``args`` only once the op is known and the caller may use it), and responses.

A frame that is not a valid request raises :class:`FrameError`, which the server
answers with ``bad_request`` naming the problem (WIRE.md "Frames"); client text
quoted in a reason is cut (:func:`why`). Encoders and decoders are built once.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from typing import Annotated, Any

import msgspec

from ..errors import ECHO_CHARS, echo
from .fields import ReqId
from .limits import MAX_DEPTH, too_deep, too_many
from .ops import OPS
from .reasons import teach

__all__ = [
    "Envelope", "Meta", "FrameError", "decode_envelope", "decode_args", "encode_ok", "encode_error", "encode",
    "canonical_hash", "why",
]

class Meta(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """WIRE.md 1.3 "Tracing": the request's W3C trace context. A value that
    is not a valid ``traceparent`` starts a new trace (W3C Trace Context)."""

    traceparent: Annotated[str, msgspec.Meta(max_length=128)]
    tracestate: Annotated[str, msgspec.Meta(max_length=512)] | None = None


class Envelope(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    id: ReqId
    op: str
    args: msgspec.Raw = msgspec.Raw(b"{}")
    # Validated per op kind below, so the error can name it; UNSET tells a read
    # that carries `"key": null` (bad_request) from one without the field.
    key: Any = msgspec.UNSET
    meta: Meta | None = None  # WIRE.md 1.3: the trace context (read only while tracing is on)


class FrameError(Exception):
    """A frame that is not a valid request. ``req_id`` is the id when one could be read."""

    def __init__(self, reason: str, req_id: ReqId | None = None):
        super().__init__(reason)
        self.reason = reason
        self.req_id = req_id


_envelope_dec = msgspec.json.Decoder(Envelope)
_loose_dec = msgspec.json.Decoder()
_args_decs = {op: msgspec.json.Decoder(spec.args) for op, spec in OPS.items()}


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
    if m is not None:  # client text in backticks, as every reason quotes it (msgspec quotes a value in '…')
        what = m.group(1)[:-1] + "`" + echo(m.group(2)) + "`"
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
        raise FrameError(f"invalid args for {env.op}: the args must be an object, e.g. {{}}", env.id)
    if spec.kind == "A":
        if env.key is None or env.key is msgspec.UNSET:
            raise FrameError(f"op {env.op} is an action and needs an idempotency `key`", env.id)
        # isascii + isprintable: every character in " "…"~", checked in C (a
        # generator over the characters cost ~1 µs of each action's frame)
        if not isinstance(env.key, str) or not (1 <= len(env.key) <= 128) or not (
            env.key.isascii() and env.key.isprintable()
        ):
            raise FrameError("`key` must be 1-128 printable ASCII characters", env.id)
    elif env.key is not msgspec.UNSET:
        raise FrameError(f"op {env.op} is a read and takes no `key` field", env.id)
    return env



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
    over = too_many(raw)
    if over is not None:
        raise FrameError(over, env.id)
    try:
        args = _args_decs[env.op].decode(env.args)
    except RecursionError:
        raise FrameError(f"`args` nests arrays and objects deeper than {MAX_DEPTH} levels", env.id) from None
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        raise FrameError(f"invalid args for {env.op}: {teach(OPS[env.op].args, why(e))}", env.id) from None
    if too_deep(raw):
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
