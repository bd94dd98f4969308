"""The group-committing writer (DESIGN.md "Performance model", L2, L5).

One thread drains a queue of prepared actions, applies each inside its own nested
transaction of one batch write transaction, commits once (sync), and only then
reports each action's outcome. A failing action aborts only its nested
transaction, never its batch-mates; a failing commit fails the whole batch, and
nothing of it is acknowledged.

Before writing an action the writer re-checks, inside the transaction:
- its idempotency receipt (L3): a concurrent duplicate that lost the race becomes a
  replay, a different request under the same key an ``idempotency_mismatch``;
- the versions of every object its decision read (L5): if one moved since the
  decision, nothing is written and the actor decides again (:class:`Stale`).
So the commit order is the serial order, and no decision rests on stale state.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from typing import Any, Callable

import lmdb
import msgspec

from ..core.atoms import state_type
from ..errors import Rejection
from ..core.atoms import apply_to
from ..core.facts import member_obj
from ..core.members import MemberState
from .events import Feed
from .indexes import fact_rows, state_rows
from .layout import Receipt, decode_object, encode_fact, encode_object, from_u64, stream_key, u64
from .store import Store

__all__ = ["Writer", "Item", "Outcome", "Committed", "Replayed", "Stale", "Failed", "SECRET_FIELDS", "redact", "mismatch"]

log = logging.getLogger("kungfud.store")

SECRET_FIELDS = ("key", "token")
_json = msgspec.json.Encoder()
_mp = msgspec.msgpack.Encoder()


def redact(result: dict) -> dict:
    """DECISIONS.md B4: a stored receipt keeps every field but its secrets."""
    return {k: (None if k in SECRET_FIELDS else v) for k, v in result.items()}


class Committed(msgspec.Struct, frozen=True):
    result: bytes  # JSON of the receipt as first returned (secrets included)
    last_seq: int


class Replayed(msgspec.Struct, frozen=True):
    result: bytes  # the stored receipt, secrets nulled


class Stale(msgspec.Struct, frozen=True):
    obj: str  # an object the decision read moved before the write


class Failed(msgspec.Struct, frozen=True):
    rejection: Rejection


Outcome = Committed | Replayed | Stale | Failed


class Item:
    """One action ready to write: its facts, new states and receipt."""

    __slots__ = ("scope", "req_hash", "facts", "states", "expect", "result", "done", "valid_until", "assumed", "encoded")

    def __init__(
        self,
        *,
        scope: bytes | None,
        req_hash: bytes,
        facts: list,
        states: dict[str, Any],
        expect: dict[str, int],
        result: dict,
        done: Callable[[Outcome], None],
        valid_until: int | None = None,
        assumed: dict[str, bytes] | None = None,
        encoded: dict[str, bytes] | None = None,
    ):
        self.scope = scope
        self.req_hash = req_hash
        self.facts = facts
        self.states = states
        self.expect = expect  # object id -> version the decision saw (0: absent)
        self.result = result
        self.done = done  # called on the writer thread once the outcome is final
        # B5: the write must happen before this instant (the earliest deadline
        # among the objects the decision read), else the action is decided again.
        self.valid_until = valid_until
        # Objects the decision read from its actor's overlay of in-flight
        # writes: the exact stored form it assumed (compared byte for byte).
        self.assumed = assumed or {}
        # The stored form of each new state as the decider encoded it (version
        # included), if it did: equal bytes prove the fold check cheaply.
        self.encoded = encoded


class _Mismatch(Exception):
    def __init__(self, outcome: Outcome):
        self.outcome = outcome


class Writer:
    def __init__(
        self,
        store: Store,
        *,
        max_batch: int = 256,
        fault: Callable[[str], None] | None = None,
        clock: Callable[[], int] | None = None,
        on_deadline: Callable[[int], None] | None = None,
        on_events: Callable[[list[tuple[str, int, bytes]]], None] | None = None,
    ):
        self.store = store
        self._tx = _TxState(0)  # replaced at the start of every transaction
        self.clock = clock or (lambda: time.time_ns() // 1_000_000)
        # Called after a commit that added deadline rows, with the earliest one,
        # so the clock can wake for it.
        self.on_deadline = on_deadline
        # Called after each commit with the events it recorded (agent, seq, JSON).
        self.on_events = on_events
        self.max_batch = max_batch
        self._q: queue.SimpleQueue[Item | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="kungfud-writer", daemon=True)
        self._stopped = False
        # Test hook (reliability suite): called at named points, may raise.
        self._fault = fault
        self.batches = 0
        self.items = 0
        self.failures = FailureLog()

    def start(self) -> None:
        self._thread.start()

    def submit(self, item: Item) -> None:
        if self._stopped:
            item.done(Failed(Rejection.unavailable("the daemon is shutting down; retry against the restarted daemon")))
            return
        self._q.put(item)

    def stop(self) -> None:
        """Write what is queued, then end the thread."""
        self._stopped = True
        self._q.put(None)
        self._thread.join()

    # --- writer thread ---------------------------------------------------

    def _run(self) -> None:
        while True:
            first = self._q.get()
            if first is None:
                return
            batch = [first]
            stop = False
            while len(batch) < self.max_batch:
                try:
                    nxt = self._q.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    stop = True
                    break
                batch.append(nxt)
            self._write_batch(batch)
            if stop:
                return

    def _write_batch(self, batch: list[Item]) -> None:
        """Fast path: every action straight into one batch transaction. Checks
        happen before an action's first write, so a refused action writes
        nothing; only a storage failure in the middle of an action's writes
        (a full map, an injected fault) poisons the batch — then the batch is
        aborted and written again with one nested transaction per action, the
        action that failed refused without being retried."""
        failed: list[tuple[int, BaseException]] = []

        def direct(txn: Any, i: int, item: Item, events: list, dues: list[int]) -> Outcome:
            plan = self._plan_or_outcome(txn, item)
            if not isinstance(plan, _Plan):
                return plan
            try:
                outcome = self._execute(txn, plan)
            except Exception as e:
                failed.append((i, e))
                raise
            self._advance(plan)
            events += plan.events
            dues += plan.dues
            return outcome

        error = self._in_one_transaction(batch, direct)
        if error is None:
            return
        if not failed:  # the commit itself failed: nothing is durable
            self._fail_all(batch, error)
            return
        bad, cause = failed[0]
        if not isinstance(cause, lmdb.Error) and not getattr(cause, "injected", False):
            log.error("unexpected error writing an action", exc_info=cause)

        def isolated(txn: Any, i: int, item: Item, events: list, dues: list[int]) -> Outcome:
            if i == bad:
                return Failed(self._unavailable(cause))
            return self._write_item_nested(txn, item, events, dues)

        error = self._in_one_transaction(batch, isolated)
        if error is not None:
            self._fail_all(batch, error)

    def _in_one_transaction(self, batch: list[Item], write: Callable[..., Outcome]) -> BaseException | None:
        """Write ``batch`` with ``write`` in one transaction and commit (fsync);
        report every outcome once durable. On failure nothing is written or
        reported, and the error is returned."""
        try:
            txn = self.store.env.begin(write=True)
        except lmdb.Error as e:
            return e
        outcomes: list[Outcome] = []
        events: list[tuple[str, int, bytes]] = []
        dues: list[int] = []
        try:
            raw_seq = txn.get(b"seq", db=self.store.dbs["meta"])
            self._tx = _TxState(from_u64(raw_seq) if raw_seq else 0)
            for i, item in enumerate(batch):
                outcomes.append(write(txn, i, item, events, dues))
            if self._tx.seq != self._tx.first_seq:
                txn.put(b"seq", u64(self._tx.seq), db=self.store.dbs["meta"])
            if self._fault:
                self._fault("commit")
            txn.commit()
        except Exception as e:
            try:
                txn.abort()
            except Exception:
                pass
            return e
        self._finish_batch(batch, outcomes, events, dues)
        return None

    def _finish_batch(self, batch: list[Item], outcomes: list[Outcome], events: list, dues: list[int]) -> None:
        self.batches += 1
        self.items += len(batch)
        if events and self.on_events is not None:
            try:
                self.on_events(events)
            except Exception:
                log.exception("event notification failed")
        if dues and self.on_deadline is not None:
            try:
                self.on_deadline(min(dues))
            except Exception:
                log.exception("deadline notification failed")
        for item, outcome in zip(batch, outcomes):
            self._report(item, outcome)

    def _fail_all(self, batch: list[Item], e: BaseException) -> None:
        rej = self._unavailable(e, len(batch))
        for item in batch:
            self._report(item, Failed(rej))

    def _unavailable(self, e: BaseException, actions: int = 1) -> Rejection:
        """The one place a storage failure becomes a rejection: it is logged
        (once per burst, :class:`FailureLog`) and answered ``unavailable``."""
        self.failures.note(e, actions)
        return Rejection.unavailable(_storage_failure(e)[1])

    @staticmethod
    def _report(item: Item, outcome: Outcome) -> None:
        try:
            item.done(outcome)
        except Exception:  # a reply path must never take the writer down
            log.exception("reporting an outcome failed")

    def _plan_or_outcome(self, txn: Any, item: Item) -> "_Plan | Outcome":
        try:
            return self._plan(txn, self.store.dbs, item)
        except _Mismatch as m:
            return m.outcome
        except Exception:  # a bug in planning: nothing was written for this action
            log.exception("unexpected error preparing an action")
            return Failed(Rejection("internal", "the daemon failed on this request; nothing was written", "retry"))

    def _write_item_nested(self, parent: Any, item: Item, events: list, dues: list[int]) -> Outcome:
        txn = self.store.env.begin(write=True, parent=parent)
        try:
            plan = self._plan_or_outcome(txn, item)
            if not isinstance(plan, _Plan):
                txn.abort()
                return plan
            outcome = self._execute(txn, plan)
        except Exception as e:
            txn.abort()
            if not isinstance(e, lmdb.Error) and not getattr(e, "injected", False):
                log.exception("unexpected error writing an action")
            return Failed(self._unavailable(e))
        txn.commit()
        self._advance(plan)
        events += plan.events  # published only if the batch commits too
        dues += plan.dues
        return outcome

    def _plan(self, txn: Any, dbs: dict[str, Any], item: Item) -> "_Plan":
        """Every check and every computed row of one action, writing nothing:
        receipt (L3), deadline (B5), versions (L5), and the fold of its facts,
        which must equal the decision's states (L1-1)."""
        if item.scope is not None:
            raw = txn.get(item.scope, db=dbs["receipts"])
            if raw is not None:
                rec = _receipt_dec.decode(raw)
                if rec.req_hash == item.req_hash:
                    raise _Mismatch(Replayed(rec.result))
                raise _Mismatch(Failed(mismatch()))
        if item.valid_until is not None and self.clock() >= item.valid_until:
            # B5: a deadline the decision did not apply has come due; decide again.
            raise _Mismatch(Stale("deadline"))
        old: dict[str, Any] = {}
        tx = self._tx
        for obj, expected in item.expect.items():
            # Objects written earlier in this transaction are known; others are read.
            if obj in tx.written:
                raw = tx.written[obj]
                version, state = tx.decoded[obj]
            else:
                raw = txn.get(obj.encode(), db=dbs["objects"])
                version, state = (0, None) if raw is None else decode_object(raw, state_type(obj))
            assumed = item.assumed.get(obj)
            if assumed is not None and raw != assumed:
                raise _Mismatch(Stale(obj))  # same version maybe, but not the state decided on
            if version != expected:
                raise _Mismatch(Stale(obj))
            old[obj] = state
        seq = tx.seq
        plan = _Plan(item)
        touched: dict[str, int] = {}  # object -> facts of this action touching it
        current = dict(old)

        def is_member(thread: str, agent: str) -> bool:
            # As the serial order has it at this fact: this action's states,
            # then the batch's earlier writes, then the store (D90).
            obj = member_obj(thread, agent)
            if obj in current:
                m = current[obj]
            elif obj in tx.decoded:
                m = tx.decoded[obj][1]
            else:
                raw = txn.get(obj.encode(), db=dbs["objects"])
                m = None if raw is None else decode_object(raw, MemberState)[1]
            return m is not None and m.current

        for fact in item.facts:
            seq += 1
            feed = Feed(is_member)
            objs = fact.objects()
            for obj in objs:
                touched[obj] = touched.get(obj, 0) + 1
                before = current.get(obj)
                current[obj] = after = apply_to(obj, before, fact)
                feed.observe(obj, before, after, fact)
            rendered = feed.rendered()
            plan.facts.append((seq, fact, objs, list(fact_rows(fact, seq)) + feed.rows(seq, rendered), rendered))
        if touched.keys() != item.states.keys():
            raise AssertionError(f"decision states disagree with the fold of its facts for {sorted(touched)}")
        decided = item.encoded or {}
        for obj, n in touched.items():
            new_state = current[obj]
            # An object's version counts the facts that touched it, so a rebuild
            # from the log alone reproduces it.
            version = item.expect[obj] + n
            encoded = encode_object(version, new_state)
            if encoded != decided.get(obj) and new_state != item.states[obj]:
                # L1-1: what is stored is exactly the fold of the facts recorded.
                raise AssertionError(f"decision states disagree with the fold of its facts for {obj}")
            before_rows = set(state_rows(obj, old[obj]))
            after_rows = set(state_rows(obj, new_state))
            plan.objects.append((obj, encoded, before_rows - after_rows, after_rows - before_rows, version, new_state))
            plan.dues += [from_u64(key[:8]) for db, key, _ in after_rows - before_rows if db == "deadlines"]
        plan.seq = seq
        result = item.result
        if "seq" in result and result["seq"] is None:
            result = {**result, "seq": seq}
        plan.first = _json.encode(result)
        if item.scope is not None:
            plan.receipt = _mp.encode(Receipt(item.req_hash, _json.encode(redact(result)), seq))
        return plan

    def _advance(self, plan: "_Plan") -> None:
        """Record a written action in the transaction state."""
        tx = self._tx
        if plan.facts:
            tx.seq = plan.seq
        for obj, encoded, _, _, version, state in plan.objects:
            tx.written[obj] = encoded
            tx.decoded[obj] = (version, state)

    def _execute(self, txn: Any, plan: "_Plan") -> Outcome:
        """Write a planned action. Only storage can fail here."""
        dbs = self.store.dbs
        fault = self._fault
        for seq, fact, objs, rows, rendered in plan.facts:
            if fault:
                fault("log")
            txn.put(u64(seq), encode_fact(fact), db=dbs["log"], overwrite=False)
            for obj in objs:
                txn.put(stream_key(obj, seq), b"", db=dbs["stream"])
            for db, key, value in rows:  # the fact's events and outcomes among them
                txn.put(key, value, db=dbs[db])
            for agent, event in rendered:
                plan.events.append((agent, seq, event))
        for obj, encoded, gone, added, _, _ in plan.objects:
            if fault:
                fault("objects")
            txn.put(obj.encode(), encoded, db=dbs["objects"])
            for db, key, _ in gone:
                if fault:
                    fault("index")
                txn.delete(key, db=dbs[db])
            for db, key, value in added:
                if fault:
                    fault("index")
                txn.put(key, value, db=dbs[db])
        if plan.receipt is not None:
            if fault:
                fault("receipt")
            txn.put(plan.item.scope, plan.receipt, db=dbs["receipts"])
        return Committed(plan.first, plan.seq)


class _TxState:
    """What the writer knows of the transaction it is writing: the sequence
    counter (read once, written once at the end) and the stored form of every
    object written so far (so later actions of the batch need not read them)."""

    __slots__ = ("first_seq", "seq", "written", "decoded")

    def __init__(self, seq: int):
        self.first_seq = seq
        self.seq = seq
        self.written: dict[str, bytes] = {}
        self.decoded: dict[str, tuple[int, Any]] = {}  # the same objects, decoded


class _Plan:
    """What one action will write, computed before any of it is written."""

    __slots__ = ("item", "facts", "objects", "seq", "first", "receipt", "events", "dues")

    def __init__(self, item: Item):
        self.item = item
        self.facts: list[tuple[int, Any, tuple[str, ...], list, list]] = []
        self.objects: list[tuple[str, bytes, set, set, int, Any]] = []  # (id, stored, rows gone, added, version, state)
        self.seq = 0
        self.first = b""
        self.receipt: bytes | None = None
        self.events: list[tuple[str, int, bytes]] = []
        self.dues: list[int] = []


_receipt_dec = msgspec.msgpack.Decoder(Receipt)


def mismatch() -> Rejection:
    return Rejection(
        "idempotency_mismatch",
        "this idempotency key was already used for a different request by this agent; use a new key",
        "revise",
    )


class FailureLog:
    """Storage failures that reject actions, logged at WARNING once per burst:
    the first of a kind at once, then at most one line per ``every_s`` seconds
    with how many actions were rejected since the previous line. An operator
    learns of a full map or disk without a line per rejected action."""

    def __init__(self, every_s: float = 10.0, clock: Callable[[], float] = time.monotonic):
        self.every_s = every_s
        self.clock = clock
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}
        self._count: dict[str, int] = {}

    def note(self, e: BaseException, actions: int = 1) -> None:
        kind = _storage_failure(e)[0]
        with self._lock:
            self._count[kind] = self._count.get(kind, 0) + actions
            now = self.clock()
            last = self._last.get(kind)
            if last is not None and now - last < self.every_s:
                return
            count = self._count.pop(kind)
            self._last[kind] = now
        since = "" if last is None else f" in the last {now - last:.0f} s"
        log.warning("%s: %d action(s) rejected as unavailable%s (%s: %s)", kind, count, since, type(e).__name__, e)


# What a storage failure was, for the operator's log line and the client's
# reason: one classification, two wordings.
_MAP_FULL = (
    "storage is full (map size reached; enlarge [storage] map_size_mb)",
    "storage is full (map size reached); nothing was written — retry after the operator enlarges map_size_mb",
)
_NOT_WRITTEN = (
    "storage could not be written (disk full or I/O error)",
    "storage could not be written (disk full or I/O error); nothing was written — retry later",
)
_OTHER = ("storage could not be written", "storage could not be written; nothing was written — retry later")


def _storage_failure(e: BaseException) -> tuple[str, str]:
    """(kind for the log, reason for the client) of a storage failure."""
    if isinstance(e, lmdb.MapFullError):
        return _MAP_FULL
    if isinstance(e, OSError) or "No space" in str(e):
        return _NOT_WRITTEN
    return _OTHER
