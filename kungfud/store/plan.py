"""What one action means to the store: the planner (DESIGN.md "Performance
model"; L1-1, L3-2, L3-3, L5-1, B5).

:func:`plan` computes every check and every row of one action, writing
nothing, over the :class:`~kungfud.store.interface.Tx` protocol (get by table
and key), so any backend drives the same planner:
- its idempotency receipt (L3): a concurrent duplicate that lost the race
  becomes a replay, a different request under the same key an
  ``idempotency_mismatch``;
- its validity (B5): a deadline the decision did not apply has come due;
- the versions of every object its decision read (L5): if one moved since the
  decision, nothing is written and the actor decides again (:class:`Stale`);
- the fold of its facts, which must equal the decision's states (L1-1), and
  from it the index rows gone and added, the feed rows and the receipt.

The refusals are returned (:class:`Replayed`, :class:`Stale`, :class:`Failed`);
only a bug raises (the L1-1 comparison, see docs/decisions.md D85).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import msgspec

from ..conventions import SECRET_FIELDS  # one definition, shared with the audit log
from ..core.facts import member_obj
from ..core.kinds import Kind, kind_of, state_type
from ..core.members import MemberState
from ..errors import Rejection
from .carried import Carried
from ..core.events import FactEvents, observed
from ..tracing import with_meta
from .events import number, rendered
from .events import rows as event_rows
from .indexes import fact_rows, state_rows
from .interface import Failed, Item, Replayed, Stale, Tx, mismatch, replay
from .codec import Receipt, decode_object, decode_receipt, encode_fact, encode_object, encode_receipt
from .layout import from_u64, u64
from .quota import Quota, Room

__all__ = [
    "Plan",
    "PlannedFact",
    "PlannedObject",
    "BatchState",
    "Row",
    "plan",
    "SECRET_FIELDS",
    "redact",
    "mismatch",
]

Row = tuple[str, bytes, bytes]  # (table, key, value)
_json = msgspec.json.Encoder()


def redact(result: dict) -> dict:
    """DECISIONS.md B4: a stored receipt keeps every field but its secrets."""
    return {k: (None if k in SECRET_FIELDS else v) for k, v in result.items()}


@dataclass(slots=True)
class PlannedFact:
    """One fact to append: its log row, its history and feed rows (events and
    outcomes among them), and its events with their seqs (published once the
    batch commits)."""

    seq: int
    encoded: bytes  # the log row's value
    rows: list[Row]
    events: list[tuple[str, int, bytes]]  # (agent or OPEN, event seq, event JSON)


@dataclass(slots=True)
class PlannedObject:
    """One object's new snapshot and the index rows that change with it."""

    id: str
    stored: bytes  # encode_object(version, state)
    version: int  # the facts that ever touched it (a rebuild reproduces it)
    state: Any
    rows_gone: set[Row]
    rows_added: set[Row]


@dataclass(slots=True)
class Plan:
    """What one action will write, computed before any of it is written."""

    item: Item
    facts: list[PlannedFact]
    objects: list[PlannedObject]
    seq: int  # the last fact seq once written (the batch's seq if no facts)
    event_seq: int  # the last event seq once written (the batch's if no events)
    result: bytes  # JSON of the result as first returned (secrets included)
    receipt: bytes | None  # the stored receipt, if the action has a scope
    dues: list[int]  # deadline rows it adds (ms)
    # The new totals of the agents it spends the capacity of (kungfud/store/quota.py;
    # their ``usage`` rows are put once per batch, BatchState.end_rows).
    totals: dict[str, int] = field(default_factory=dict)

    def written_bytes(self) -> int:
        """About what it adds to the store: its log rows and snapshots."""
        n = 0
        for f in self.facts:
            n += len(f.encoded)
        for o in self.objects:
            n += len(o.stored)
        return n

    def events(self) -> list[tuple[str, int, bytes]]:
        """(agent or OPEN, event seq, event JSON) of every fact, in order."""
        return [e for f in self.facts for e in f.events]


class BatchState:
    """What the planner knows of the batch being written: the fact and event
    sequence counters (read once at the start, stored once at the end) and
    the stored form of every object written so far (so later actions of the
    batch need not read them)."""

    __slots__ = ("first_seq", "seq", "first_event_seq", "event_seq", "written", "decoded", "items", "room", "carried")

    def __init__(self, seq: int, event_seq: int = 0, room: Room | None = None, carried: Carried | None = None):
        # What the batch may spend of the capacity limits (none: counted only).
        self.room = room if room is not None else Quota().room(None)
        # What the writer's earlier batches left it, if still the store's (D281).
        self.carried = carried.at(seq) if carried is not None else None
        if self.carried is not None:
            self.room.known = self.carried.totals
        self.first_seq = seq
        self.seq = seq
        self.first_event_seq = event_seq
        self.event_seq = event_seq
        self.written: dict[str, bytes] = {}
        self.decoded: dict[str, tuple[int, Any]] = {}  # the same objects, decoded
        self.items: set[int] = set()  # id() of the items written so far in this batch

    @classmethod
    def open(cls, tx: Tx, room: Room | None = None, carried: Carried | None = None) -> "BatchState":
        raw = tx.get("meta", b"seq")
        events = tx.get("meta", b"events")
        return cls(from_u64(raw) if raw else 0, from_u64(events) if events else 0, room, carried)

    def end_rows(self) -> list[Row]:
        """The rows to store at the end of the batch: the last fact seq if
        facts were added, the last event seq if events were, and the
        ``usage`` total of every agent its written actions spent for."""
        rows = [] if self.seq == self.first_seq else [("meta", b"seq", u64(self.seq))]
        if self.event_seq != self.first_event_seq:
            rows.append(("meta", b"events", u64(self.event_seq)))
        rows += self.room.rows()
        return rows

    def advance(self, plan: Plan) -> None:
        """Record a written action (after its writes succeeded)."""
        self.items.add(id(plan.item))
        if plan.facts:
            self.seq = plan.seq
            self.event_seq = plan.event_seq
            self.room.advance(plan.totals, plan.written_bytes())
        written, decoded = self.written, self.decoded
        for o in plan.objects:
            written[o.id] = o.stored
            decoded[o.id] = (o.version, o.state)


def plan(batch: BatchState, tx: Tx, item: Item, now: Callable[[], int]) -> Plan | Replayed | Stale | Failed:
    """Every check and every computed row of one action, writing nothing:
    receipt (L3), deadline (B5), versions (L5), and the fold of its facts,
    which must equal the decision's states (L1-1)."""
    if item.scope is not None:
        raw = tx.get("receipts", item.scope)
        if raw is not None:
            return replay(decode_receipt(raw), item.req_hash)
    if item.valid_until is not None and now() >= item.valid_until:
        return Stale("deadline")  # B5: a deadline the decision did not apply has come due; decide again
    if item.after and not all(p.written or id(p) in batch.items for p in item.after):
        return Stale("overlay")  # decided on an in-flight write that was not written (D145)
    read = _read_expected(batch, tx, item)
    if isinstance(read, Stale):
        return read
    old, kinds = read
    facts: list[PlannedFact] = []
    seq = batch.seq
    event_seq = batch.event_seq
    touched: dict[str, int] = {}  # object -> facts of this action touching it
    current = dict(old)
    obligations = _Obligations(kinds)

    def is_member(thread: str, agent: str) -> bool:
        # As the serial order has it at this fact: this action's states, then
        # the batch's earlier writes, then the store (D90).
        obj = member_obj(thread, agent)
        if obj in current:
            m = current[obj]
        elif obj in batch.decoded:
            m = batch.decoded[obj][1]
        else:
            raw = tx.get("objects", obj.encode())
            m = None if raw is None else decode_object(raw, MemberState)[1]
        return m is not None and m.current

    def state_of(obj: str) -> Any:
        # The same serial order, for a Task's contract (task_offered).
        if obj in current:
            return current[obj]
        if obj in batch.decoded:
            return batch.decoded[obj][1]
        raw = tx.get("objects", obj.encode())
        return None if raw is None else decode_object(raw, state_type(obj))[1]

    for fact in item.facts:
        seq += 1
        feed = None  # made for the first object whose change may make an event
        objs = fact.objects()
        for obj in objs:
            touched[obj] = touched.get(obj, 0) + 1
            before = current.get(obj)
            k = _kind(kinds, obj)
            current[obj] = after = k.apply(before, fact)
            if observed(k.state, k.obligations is not None):  # most objects make no event
                if feed is None:
                    feed = FactEvents(is_member, state_of)
                feed.observe(obj, before, after, fact, obligations)
        if feed is None or feed.quiet():  # no events, no outcomes (most facts)
            numbered, rows = [], fact_rows(fact, seq)
        else:
            numbered = number(with_meta(rendered(feed), item.trace), event_seq, seq)  # tracing: meta kept
            if numbered:
                event_seq = numbered[-1][1]
            rows = fact_rows(fact, seq) + event_rows(feed, seq, numbered)
        facts.append(PlannedFact(seq, encode_fact(fact), rows, numbered))
    # R12-11: the capacity this action spends, refused before anything is written.
    totals = batch.room.spend(tx, item.facts, [len(f.encoded) for f in facts])
    if isinstance(totals, Rejection):
        return Failed(totals)
    if touched.keys() != item.states.keys():
        raise AssertionError(f"decision states disagree with the fold of its facts for {sorted(touched)}")
    objects: list[PlannedObject] = []
    dues: list[int] = []
    decided = item.encoded or {}
    expect = item.expect
    for obj, n in touched.items():
        new_state = current[obj]
        # An object's version counts the facts that touched it, so a rebuild
        # from the log alone reproduces it.
        version = expect[obj] + n
        stored = encode_object(version, new_state)
        if stored != decided.get(obj) and new_state != item.states[obj]:
            # L1-1: what is stored is exactly the fold of the facts recorded.
            raise AssertionError(f"decision states disagree with the fold of its facts for {obj}")
        before = old[obj]
        after_rows = set(state_rows(obj, new_state, obligations))
        if before is None:  # created by this action: nothing of it to remove
            gone, added = set(), after_rows
        else:
            before_rows = set(state_rows(obj, before, obligations))
            gone, added = before_rows - after_rows, after_rows - before_rows
        objects.append(PlannedObject(obj, stored, version, new_state, gone, added))
        for db, key, _ in added:
            if db == "deadlines":
                dues.append(from_u64(key[:8]))
    result = item.result
    if "seq" in result and result["seq"] is None:
        result = {**result, "seq": seq}
    encoded = _json.encode(result)
    receipt = None
    if item.scope is not None:
        kept = _json.encode(redact(result)) if any(k in result for k in SECRET_FIELDS) else encoded
        receipt = encode_receipt(Receipt(item.req_hash, kept, seq))
    return Plan(item, facts, objects, seq, event_seq, encoded, receipt, dues, totals)


def _kind(kinds: dict[str, Kind], obj: str) -> Kind:
    k = kinds.get(obj)
    if k is None:
        k = kinds[obj] = kind_of(obj)  # type: ignore[assignment]
        if k is None:
            raise KeyError(f"no object kind for id {obj!r}")
    return k


class _Obligations:
    """The obligations a state implies (:func:`~kungfud.core.kinds.of_state`,
    the one derivation), derived once per state of one plan: the feed (what
    each fact added and ended) and the index rows (what stands after the
    action) ask for the same states."""

    __slots__ = ("kinds", "memo")

    def __init__(self, kinds: dict[str, Kind]):
        self.kinds = kinds
        self.memo: dict[str, list[tuple[Any, list]]] = {}  # object -> (state, its obligations)

    def __call__(self, obj: str, state: Any) -> list:
        if state is None:
            return []
        derive = _kind(self.kinds, obj).obligations
        if derive is None:  # a kind that implies none
            return []
        seen = self.memo.setdefault(obj, [])
        for s, obs in seen:
            if s is state:
                return obs
        obs = derive(obj, state)
        seen.append((state, obs))
        return obs


def _read_expected(batch: BatchState, tx: Tx, item: Item) -> tuple[dict[str, Any], dict[str, Kind]] | Stale:
    """The state of every object the decision read, if each is still at the
    version (and, for overlay reads, the exact bytes) it decided on (L5); and
    the kind of each."""
    old: dict[str, Any] = {}
    kinds: dict[str, Kind] = {}
    written, decoded, assumed = batch.written, batch.decoded, item.assumed
    carried = batch.carried
    known = carried.objects if carried is not None else {}
    for obj, expected in item.expect.items():
        # Objects written earlier in this batch are known, and those this
        # writer committed or read since the store's fact seq last moved
        # (D281); others are read.
        if obj in written:
            raw = written[obj]
            version, state = decoded[obj]
        elif (hit := known.get(obj)) is not None:
            raw, version, state = hit
        else:
            raw = tx.get("objects", obj.encode())
            if raw is None:
                version, state = 0, None
            else:
                version, state = decode_object(raw, _kind(kinds, obj).state)
                if carried is not None:
                    carried.read(obj, raw, version, state)
        if assumed and (a := assumed.get(obj)) is not None and raw != a:
            return Stale(obj)  # same version maybe, but not the state decided on
        if version != expected:
            return Stale(obj)
        old[obj] = state
    return old, kinds
