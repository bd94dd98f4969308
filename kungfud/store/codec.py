"""The encoding of stored rows: every structured value a backend stores is
encoded and decoded here and nowhere else (one seam, as eventsourcing's
``Transcoder``), so a change of serialization touches this module alone
(docs/storage.md "Encoding"). Both backends store the same bytes.

The values are msgpack (msgspec). Keys, fixed-width numbers (u64/u32 big
endian, whose byte order is the key order) and the event JSON of the feed (the
wire's own bytes, ``kungfud.event_kinds``) are not a serialization choice and
stay in :mod:`~kungfud.store.layout`; a value that is an id or a role is its
UTF-8 bytes. :func:`decode_row`/:func:`encode_row` name the encoding of every
table of :data:`~kungfud.store.layout.DBS` (the abstract store suite
round-trips every stored row through them, on every backend).
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..core.kinds import AnyFact, state_type
from ..core.obligations import Obligation
from ..core.queries import Live, LiveEngagement

__all__ = [
    "Receipt", "Offer", "OutcomeRow", "Cursor", "encode_fact", "decode_fact", "encode_object", "decode_object",
    "encode_receipt", "decode_receipt", "encode_offer", "decode_offer", "encode_outcome", "decode_outcome",
    "encode_obligation", "decode_obligation", "encode_live", "decode_live", "encode_cursor", "decode_cursor",
    "encode_agent_key", "decode_agent_key", "encode_kinds", "decode_kinds", "STRUCTURED", "decode_row",
    "encode_row",
]


# --- the stored row types that are the store's own (the core's: Obligation, Live) --


class Receipt(msgspec.Struct, frozen=True, array_like=True):
    """The first success of (agent, op, key): request hash, redacted result, seq."""

    req_hash: bytes
    result: bytes  # JSON, secrets nulled (DECISIONS.md B4)
    seq: int


class Offer(msgspec.Struct, frozen=True, array_like=True):
    """A row of the open-Task stream: the agents a ``task_offered`` event is
    not for, the allow-list it is only for if any
    (:meth:`~kungfud.core.events.FactEvents.offer_bars`), and the event's JSON."""

    barred: list[str]
    eligibility: list[str] | None
    event: bytes

    def offered_to(self, agent: str) -> bool:
        return agent not in self.barred and (self.eligibility is None or agent in self.eligibility)


class OutcomeRow(msgspec.Struct, frozen=True, array_like=True):
    """A row of the ``outcomes`` index: the Thread whose membership gates reading
    an assignment's outcome (§9 R9-9, R9-2; None for an engagement), and the
    outcome item's JSON."""

    thread: str | None
    item: bytes


class Cursor(msgspec.Struct, frozen=True, array_like=True):
    """The webhook runner's position and state for one agent (``hook_cursors``)."""

    hook: str  # the registration (WebhookState.hook)
    delivered: int  # every event at or below this seq was acknowledged (or not subscribed)
    failing_since: int = 0  # ms of the first failed attempt of the current run; 0: not failing
    attempts: int = 0  # failed attempts of the current run
    last_error: str = ""
    last_attempt_at: int = 0  # ms
    disabled_at: int = 0  # ms; nonzero: disabled until webhook.set again


_enc = msgspec.msgpack.Encoder()
_fact_dec = msgspec.msgpack.Decoder(AnyFact)
_obj_decs: dict[type, msgspec.msgpack.Decoder] = {}
_receipt_dec = msgspec.msgpack.Decoder(Receipt)
_offer_dec = msgspec.msgpack.Decoder(Offer)
_outcome_dec = msgspec.msgpack.Decoder(OutcomeRow)
_ob_dec = msgspec.msgpack.Decoder(Obligation)
_live_dec = msgspec.msgpack.Decoder(Live)
_live_engagement_dec = msgspec.msgpack.Decoder(LiveEngagement)
_cursor_dec = msgspec.msgpack.Decoder(Cursor)
_kinds_dec = msgspec.msgpack.Decoder(dict[str, int])


# --- log and objects ---------------------------------------------------------------


def encode_fact(fact: Any) -> bytes:
    """A ``log`` row: the fact (the truth)."""
    return _enc.encode(fact)


def decode_fact(raw: bytes) -> Any:
    return _fact_dec.decode(raw)


def encode_object(version: int, state: Any) -> bytes:
    """An ``objects`` row: [version, state snapshot]."""
    return _enc.encode((version, state))


def decode_object(raw: bytes, state_type: type) -> tuple[int, Any]:
    dec = _obj_decs.get(state_type)
    if dec is None:
        dec = _obj_decs[state_type] = msgspec.msgpack.Decoder(tuple[int, state_type])
    return dec.decode(raw)


# --- the other structured rows -------------------------------------------------------


def encode_receipt(receipt: Receipt) -> bytes:
    return _enc.encode(receipt)


def decode_receipt(raw: bytes) -> Receipt:
    return _receipt_dec.decode(raw)


def encode_offer(offer: Offer) -> bytes:
    """An ``events`` row of the open-Task stream (D201)."""
    return _enc.encode(offer)


def decode_offer(raw: bytes) -> Offer:
    return _offer_dec.decode(raw)


def encode_outcome(row: OutcomeRow) -> bytes:
    return _enc.encode(row)


def decode_outcome(raw: bytes) -> OutcomeRow:
    return _outcome_dec.decode(raw)


def encode_obligation(ob: Obligation) -> bytes:
    return _enc.encode(ob)


def decode_obligation(raw: bytes) -> Obligation:
    return _ob_dec.decode(raw)


def encode_live(live: Live | LiveEngagement) -> bytes:
    """A ``live`` row of a Thread's assignment (Live) or a Task's engagement (LiveEngagement)."""
    return _enc.encode(live)


def decode_live(raw: bytes, task: bool) -> Live | LiveEngagement:
    """``task``: a Task's row (a LiveEngagement), else a Thread's (a Live)."""
    return (_live_engagement_dec if task else _live_dec).decode(raw)


def encode_cursor(cursor: Cursor) -> bytes:
    return _enc.encode(cursor)


def decode_cursor(raw: bytes) -> Cursor:
    return _cursor_dec.decode(raw)


def encode_agent_key(agent: str, scoped: tuple[Any, int | None, str] | None = None) -> bytes:
    """An ``agent_keys`` row: the agent id; a scoped key's, then 0 and its
    (scope, expires_at ms, key_id) (WIRE.md 1.3)."""
    return agent.encode() if scoped is None else agent.encode() + b"\x00" + _enc.encode(scoped)


def decode_agent_key(raw: bytes) -> tuple[str, Any, int | None, str | None]:
    """(agent, scope, expires_at, key_id): None but the agent for a main key."""
    agent, sep, rest = raw.partition(b"\x00")
    if not sep:
        return (agent.decode(), None, None, None)
    scope, expires_at, key_id = msgspec.msgpack.decode(rest)
    return (agent.decode(), scope, expires_at, key_id)


def encode_kinds(since: dict[str, int]) -> bytes:
    """The ``meta/event_kinds`` row: {kind: the first fact seq it is made for} (D285)."""
    return _enc.encode(since)


def decode_kinds(raw: bytes) -> dict[str, int]:
    return _kinds_dec.decode(raw)


# --- every table's rows, by table and key -------------------------------------------

#: The tables whose values are encoded here; every other table's value is bytes
#: as they are (ids, roles, b"", fixed-width numbers, event JSON).
STRUCTURED = ("log", "objects", "receipts", "agent_keys", "obligations", "live", "events", "outcomes",
              "hook_cursors", "meta")


def _owner(key: bytes) -> tuple[bytes, bytes]:
    owner, _, rest = bytes(key).partition(b"\x00")
    return owner, rest


def decode_row(table: str, key: bytes, raw: bytes) -> Any:
    """The value of one stored row of ``table`` under ``key``, decoded (bytes
    for a value stored as it is)."""
    raw = bytes(raw)
    if table == "log":
        return decode_fact(raw)
    if table == "objects":
        return decode_object(raw, state_type(bytes(key).decode()))
    if table == "receipts":
        return decode_receipt(raw)
    if table == "agent_keys":
        return decode_agent_key(raw)
    if table == "obligations":
        return decode_obligation(raw)
    if table == "outcomes":
        return decode_outcome(raw)
    if table == "hook_cursors":
        return decode_cursor(raw)
    if table == "live":
        owner, rest = _owner(key)
        return decode_live(raw, owner.startswith(b"tk_")) if rest[:1] == b"a" else raw
    if table == "events":
        return decode_offer(raw) if _owner(key)[0] == b"*" else raw
    if table == "meta" and key == b"event_kinds":
        return decode_kinds(raw)
    return raw


def encode_row(table: str, key: bytes, value: Any) -> bytes:
    """The stored bytes of ``value`` (as :func:`decode_row` returns it) in ``table`` under ``key``."""
    if table == "log":
        return encode_fact(value)
    if table == "objects":
        return encode_object(*value)
    if table == "agent_keys":
        agent, scope, expires_at, key_id = value
        return encode_agent_key(agent, None if key_id is None else (scope, expires_at, key_id))
    if table == "meta" and key == b"event_kinds":
        return encode_kinds(value)
    if isinstance(value, msgspec.Struct):  # receipts, obligations, outcomes, cursors, live rows, offers
        return _enc.encode(value)
    return value
