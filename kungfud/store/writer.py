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
from .events import Feed, event_key
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

    __slots__ = ("scope", "req_hash", "facts", "states", "expect", "result", "done", "valid_until")

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
        self.clock = clock or (lambda: time.time_ns() // 1_000_000)
        # Called after a commit that added deadline rows, with the earliest one,
        # so the clock can wake for it.
        self.on_deadline = on_deadline
        self._earliest_new_due: int | None = None
        # Called after each commit with the events it recorded (agent, seq, JSON).
        self.on_events = on_events
        self._events: list[tuple[str, int, bytes]] = []
        self.max_batch = max_batch
        self._q: queue.SimpleQueue[Item | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="kungfud-writer", daemon=True)
        self._stopped = False
        # Test hook (reliability suite): called at named points, may raise.
        self._fault = fault
        self.batches = 0
        self.items = 0

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
        env = self.store.env
        outcomes: list[Outcome] = []
        self._earliest_new_due = None
        self._events = []
        try:
            txn = env.begin(write=True)
        except lmdb.Error as e:
            self._fail_all(batch, e)
            return
        try:
            for item in batch:
                outcomes.append(self._write_item(txn, item))
            if self._fault:
                self._fault("commit")
            txn.commit()
        except Exception as e:  # commit failed (disk full, I/O error): nothing is durable
            try:
                txn.abort()
            except Exception:
                pass
            self._fail_all(batch, e)
            return
        self.batches += 1
        self.items += len(batch)
        if self._events and self.on_events is not None:
            try:
                self.on_events(self._events)
            except Exception:
                log.exception("event notification failed")
        if self._earliest_new_due is not None and self.on_deadline is not None:
            try:
                self.on_deadline(self._earliest_new_due)
            except Exception:
                log.exception("deadline notification failed")
        for item, outcome in zip(batch, outcomes):
            self._report(item, outcome)

    def _fail_all(self, batch: list[Item], e: BaseException) -> None:
        log.error("storage write failed for a batch of %d actions: %s", len(batch), e)
        rej = Rejection.unavailable(_storage_reason(e))
        for item in batch:
            self._report(item, Failed(rej))

    @staticmethod
    def _report(item: Item, outcome: Outcome) -> None:
        try:
            item.done(outcome)
        except Exception:  # a reply path must never take the writer down
            log.exception("reporting an outcome failed")

    def _write_item(self, parent: Any, item: Item) -> Outcome:
        dbs = self.store.dbs
        txn = self.store.env.begin(write=True, parent=parent)
        events: list[tuple[str, int, bytes]] = []
        try:
            outcome = self._apply_item(txn, dbs, item, events)
        except _Mismatch as m:
            txn.abort()
            return m.outcome
        except Exception as e:
            txn.abort()
            if not isinstance(e, lmdb.Error) and not getattr(e, "injected", False):
                log.exception("unexpected error writing an action")
            return Failed(Rejection.unavailable(_storage_reason(e)))
        txn.commit()
        self._events += events  # published only if the batch commits too
        return outcome

    def _apply_item(self, txn: Any, dbs: dict[str, Any], item: Item, events: list) -> Outcome:
        fault = self._fault
        if item.scope is not None:
            raw = txn.get(item.scope, db=dbs["receipts"])
            if raw is not None:
                rec = msgspec.msgpack.decode(raw, type=Receipt)
                if rec.req_hash == item.req_hash:
                    raise _Mismatch(Replayed(rec.result))
                raise _Mismatch(Failed(mismatch()))
        if item.valid_until is not None and self.clock() >= item.valid_until:
            # B5: a deadline the decision did not apply has come due; decide again.
            raise _Mismatch(Stale("deadline"))
        old: dict[str, Any] = {}
        for obj, expected in item.expect.items():
            raw = txn.get(obj.encode(), db=dbs["objects"])
            current, state = (0, None) if raw is None else decode_object(raw, state_type(obj))
            if current != expected:
                raise _Mismatch(Stale(obj))
            old[obj] = state
        raw_seq = txn.get(b"seq", db=dbs["meta"])
        seq = from_u64(raw_seq) if raw_seq else 0
        touched: dict[str, int] = {}  # object -> facts of this action touching it
        current = dict(old)
        for fact in item.facts:
            seq += 1
            if fault:
                fault("log")
            txn.put(u64(seq), encode_fact(fact), db=dbs["log"], overwrite=False)
            feed = Feed()
            for obj in fact.objects():
                touched[obj] = touched.get(obj, 0) + 1
                txn.put(stream_key(obj, seq), b"", db=dbs["stream"])
                before = current.get(obj)
                current[obj] = after = apply_to(obj, before, fact)
                feed.observe(obj, before, after, fact)
            for db, key, value in fact_rows(fact, seq):
                txn.put(key, value, db=dbs[db])
            for agent, event in feed.rendered():
                txn.put(event_key(agent, seq), _mp.encode([event]), db=dbs["events"])
                events.append((agent, seq, event))
        if touched.keys() != item.states.keys() or any(current[o] != item.states[o] for o in touched):
            # L1-1: what is stored is exactly the fold of the facts recorded.
            raise AssertionError(f"decision states disagree with the fold of its facts for {sorted(touched)}")
        for obj, n in touched.items():
            if fault:
                fault("objects")
            new_state = current[obj]
            # An object's version counts the facts that touched it, so a rebuild
            # from the log alone reproduces it.
            txn.put(obj.encode(), encode_object(item.expect[obj] + n, new_state), db=dbs["objects"])
            before = set(state_rows(obj, old[obj]))
            after = set(state_rows(obj, new_state))
            for db, key, _ in before - after:
                if fault:
                    fault("index")
                txn.delete(key, db=dbs[db])
            for db, key, value in after - before:
                if fault:
                    fault("index")
                txn.put(key, value, db=dbs[db])
                if db == "deadlines":
                    due = from_u64(key[:8])
                    self._earliest_new_due = due if self._earliest_new_due is None else min(due, self._earliest_new_due)
        if item.facts:
            txn.put(b"seq", u64(seq), db=dbs["meta"])
        result = item.result
        if "seq" in result and result["seq"] is None:
            result = {**result, "seq": seq}
        first = _json.encode(result)
        if item.scope is not None:
            if fault:
                fault("receipt")
            stored = _json.encode(redact(result))
            txn.put(item.scope, _mp.encode(Receipt(item.req_hash, stored, seq)), db=dbs["receipts"])
        return Committed(first, seq)


def mismatch() -> Rejection:
    return Rejection(
        "idempotency_mismatch",
        "this idempotency key was already used for a different request by this agent; use a new key",
        "revise",
    )


def _storage_reason(e: BaseException) -> str:
    if isinstance(e, lmdb.MapFullError):
        return "storage is full (map size reached); nothing was written — retry after the operator enlarges map_size_mb"
    if isinstance(e, OSError) or "No space" in str(e):
        return "storage could not be written (disk full or I/O error); nothing was written — retry later"
    return "storage could not be written; nothing was written — retry later"
