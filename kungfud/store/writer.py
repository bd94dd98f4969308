"""The group-commit engine (DESIGN.md "Performance model", L1-4, L2, L5).

One thread drains a queue of prepared actions, writes each inside its own
nested transaction of one batch write transaction, commits once (sync), and
only then reports each action's outcome. A failing action aborts only its
nested transaction, never its batch-mates; a failing commit fails the whole
batch, and nothing of it is acknowledged.

What an action means — its receipt (L3), validity (B5), versions (L5), the fold
of its facts (L1-1), its index and feed rows — is the planner's
(:mod:`kungfud.store.plan`); this module only begins, writes, commits, aborts
and reports. Plans are re-made inside the transaction, so the commit order is
the serial order and no decision rests on stale state. The named write points
are in :meth:`Writer._execute`, the one place a test fault hook is called
before a write (D87).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from typing import Callable

from .. import tracing
from ..core.webhook import webhook_agent
from ..errors import Rejection
from .failures import FailureLog, ReserveLog, storage_failure
from .carried import Carried
from .events import KINDS_KEY, record_kinds
from .interface import Backend, Committed, Failed, Item, Outcome, Replayed, Stale, Tx, WriteTxn
from .layout import u64
from .plan import SECRET_FIELDS, BatchState, Plan, mismatch, plan, redact
from .quota import RULE as QUOTA_RULE
from .quota import Quota, Room

__all__ = [
    "Writer",
    "Item",
    "Outcome",
    "Committed",
    "Replayed",
    "Stale",
    "Failed",
    "SECRET_FIELDS",
    "redact",
    "mismatch",
]

log = logging.getLogger("kungfud.store")

_SHUTTING_DOWN = "the daemon is shutting down; retry against the restarted daemon"
_INTERNAL = Rejection("internal", "the daemon failed on this request; nothing was written", "retry")


class Writer:
    """The :class:`~kungfud.store.interface.Committer` of every backend: it
    drives a :class:`~kungfud.store.interface.Backend` through its write
    transactions (:class:`~kungfud.store.interface.WriteTxn`) and kv ``Tx``."""

    def __init__(
        self,
        store: Backend,
        *,
        max_batch: int = 256,
        fault: Callable[[str], None] | None = None,
        clock: Callable[[], int] | None = None,
        on_deadline: Callable[[int], None] | None = None,
        on_events: Callable[[list[tuple[str, int, bytes]]], None] | None = None,
        on_item: Callable[[Item, Tx], None] | None = None,
        quota: Quota | None = None,
        on_webhooks: Callable[[list[str]], None] | None = None,
    ):
        self.store = store
        # Capacity limits per agent and the store's reserve (R12-11); the usage
        # is counted whatever they are. Refusals by limit, for /metrics.
        self.quota = quota or Quota()
        self.quota_refusals: dict[str, int] = {"agent_bytes": 0, "reserve": 0}
        self.reserve_log = ReserveLog()  # one line when the reserve starts and stops refusing (D326)
        # What this writer committed, carried to its next batch (D281).
        self._carried = Carried()
        self.clock = clock or (lambda: time.time_ns() // 1_000_000)
        # Called after a commit that added deadline rows, with the earliest one,
        # so the clock can wake for it.
        self.on_deadline = on_deadline
        # Called after each commit with the events it recorded (agent, event
        # seq, JSON; agent ``*``: a task_offered event of the open-Task stream).
        self.on_events = on_events
        # Called after a commit that wrote agents' webhook registrations (their
        # ``ag_….webhook`` objects: set, cleared, deactivated, key reset), with
        # those agents: the delivery runner keeps its set of agents with an
        # endpoint from these, not from a store read at every event (D272).
        self.on_webhooks = on_webhooks
        # The last fact seq committed by this writer (for announcements to
        # other nodes, which compare fact seqs), set before on_events is called.
        self.committed_seq = 0
        self.max_batch = max_batch
        self._q: queue.SimpleQueue[Item | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="kungfud-writer", daemon=True)
        self._stopped = False
        self._stopping = False  # the thread took the stop sentinel: it ends after this batch
        self._filling: list[Item] | None = None  # the thread's batch, until its commit
        # Test hooks (reliability suite, simulation): ``fault`` is called at
        # named write points and may raise; ``on_item`` is told, with the
        # transaction, as the writer starts on each item.
        self.fault = fault
        self._on_item = on_item
        # The item being planned or written (writer thread), for diagnostics.
        self.writing: Item | None = None
        self.batches = 0
        self.items = 0
        self.failures = FailureLog()
        # D285: the first batch this writer commits records, for each event kind
        # the store has not recorded yet, the first fact seq it is made for.
        self._kinds_recorded = False

    def start(self) -> None:
        self._thread.start()

    def submit(self, item: Item) -> None:
        if self._stopped:
            item.done(Failed(Rejection.unavailable(_SHUTTING_DOWN)))  # type: ignore[misc]
            return
        self._q.put(item)

    def write_now(self, item: Item) -> Outcome:
        """Submit ``item`` and block until its outcome is final (not from the
        writer thread)."""
        done = threading.Event()
        box: list[Outcome] = []
        item.done = lambda o: (box.append(o), done.set())
        self.submit(item)
        done.wait()
        return box[0]

    def write_batch(self, items: list[Item]) -> None:
        """Write ``items`` as one group commit on the calling thread and report
        each outcome: what the writer thread does with each batch it drains.
        For deterministic drivers (the simulation); the thread must not run."""
        self._write_batch(items)

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
            self._take_queued(batch)
            self._filling = batch
            try:
                self._write_batch(batch)
            finally:
                self._filling = None
            if self._stopping:
                return

    def _take_queued(self, batch: list[Item]) -> None:
        """Move what is queued into ``batch`` (up to ``max_batch``), without
        waiting; the stop sentinel ends the thread after this batch."""
        while not self._stopping and len(batch) < self.max_batch:
            try:
                nxt = self._q.get_nowait()
            except queue.Empty:
                return
            if nxt is None:
                self._stopping = True
                return
            batch.append(nxt)

    def _write_batch(self, batch: list[Item]) -> None:
        """Fast path: every action straight into one batch transaction. Checks
        happen before an action's first write, so a refused action writes
        nothing; only a storage failure in the middle of an action's writes
        (a full map, an injected fault) poisons the batch — then the batch is
        aborted and written again with one nested transaction per action, the
        action that failed refused without being retried."""
        failed: list[tuple[int, BaseException]] = []

        def direct(w: WriteTxn, state: BatchState, i: int, item: Item, done: list[Plan]) -> Outcome:
            tx = w.tx
            p = self._plan(state, tx, item)
            if not isinstance(p, Plan):
                return p
            try:
                outcome = self._execute(tx, p)
            except Exception as e:
                failed.append((i, e))
                raise
            state.advance(p)
            done.append(p)
            return outcome

        error = self._in_one_transaction(batch, direct)
        if error is None:
            return
        if not failed:  # the commit itself failed: nothing is durable
            self._fail_all(batch, error)
            return
        bad, cause = failed[0]
        if not self._expected(cause):
            log.error("unexpected error writing an action", exc_info=cause)

        def isolated(w: WriteTxn, state: BatchState, i: int, item: Item, done: list[Plan]) -> Outcome:
            if i == bad:
                return Failed(self._unavailable(cause))
            return self._write_item_nested(w, state, item, done)

        error = self._in_one_transaction(batch, isolated)
        if error is not None:
            self._fail_all(batch, error)

    def _in_one_transaction(self, batch: list[Item], write: Callable[..., Outcome]) -> BaseException | None:
        """Write ``batch`` with ``write`` (given the open :class:`WriteTxn`) in one
        transaction and commit (durable when it returns);
        report every outcome once durable. On failure nothing is written or
        reported, and the error is returned."""
        try:
            w = self.store.begin_write()
        except Exception as e:
            if not self.store.storage_error(e):
                raise
            return e
        # The writer thread's batch grows by what arrives until its commit:
        # while it waited for the write lock (another node's commit and its
        # fsyncs) and while it wrote the batch. Joining this commit answers
        # those sooner than the next one would, and fewer commits carry more.
        if tracing.on:  # the kungfud.commit span starts here (kungfud/tracing.py)
            self.began_ns = time.time_ns()
        topping_up = batch is self._filling
        if topping_up:
            self._take_queued(batch)
        outcomes: list[Outcome] = []
        written: list[Plan] = []
        try:
            tx = w.tx
            state = BatchState.open(tx, self._room(), self._carried)
            if not self._kinds_recorded and (kinds := record_kinds(tx.get("meta", KINDS_KEY), state.seq + 1)):
                tx.put("meta", KINDS_KEY, kinds)
            for i, item in enumerate(batch):  # also what is appended meanwhile
                try:
                    outcomes.append(write(w, state, i, item, written))
                finally:
                    self.writing = None
                if topping_up and i == len(batch) - 1:
                    self._take_queued(batch)
            for row in state.end_rows():  # with the usage rows (R12-11)
                tx.put(*row)
            if self.fault is not None:
                self.fault("commit")
            w.commit()
        except Exception as e:
            self._carried.forget()
            try:
                w.abort()
            except Exception:
                pass
            return e
        self._kinds_recorded = True
        self._carried.committed(state.seq, state.room.usage, [o for p in written for o in p.objects])
        self._finish_batch(batch, outcomes, written, state.room)
        return None

    def _finish_batch(self, batch: list[Item], outcomes: list[Outcome], written: list[Plan], room: Room) -> None:
        self.batches += 1
        self.batch_size = len(batch)
        self.items += len(batch)
        for p in written:
            p.item.written = True
        self.committed_seq = max([self.committed_seq] + [p.seq for p in written if p.facts])
        events = [e for p in written for e in p.events()]
        dues = [d for p in written for d in p.dues]
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
        if self.on_webhooks is not None:
            hooked = [a for p in written for o in p.objects if (a := webhook_agent(o.id)) is not None]
            if hooked:
                try:
                    self.on_webhooks(hooked)
                except Exception:
                    log.exception("webhook notification failed")
        by_reserve = 0
        for item, outcome in zip(batch, outcomes):
            if isinstance(outcome, Failed) and outcome.rejection.rule == QUOTA_RULE:
                limit = "agent_bytes" if outcome.rejection.code == "rate_limited" else "reserve"
                self.quota_refusals[limit] += 1
                by_reserve += limit == "reserve"
            self._report(item, outcome)
        try:
            self.reserve_log.batch(room.used, room.capacity, room.reserve, by_reserve)
        except Exception:  # a log line must never take the writer down
            log.exception("logging the store's reserve failed")

    def _fail_all(self, batch: list[Item], e: BaseException) -> None:
        rej = self._unavailable(e, len(batch))
        for item in batch:
            self._report(item, Failed(rej))

    def _unavailable(self, e: BaseException, actions: int = 1) -> Rejection:
        """The one place a storage failure becomes a rejection: it is logged
        (once per burst, :class:`FailureLog`) and answered ``unavailable``."""
        self.failures.note(e, actions)
        return Rejection.unavailable(storage_failure(e)[1])

    @staticmethod
    def _report(item: Item, outcome: Outcome) -> None:
        item.after = None  # needed only to plan it: no chain of items is kept alive
        try:
            item.done(outcome)  # type: ignore[misc]
        except Exception:  # a reply path must never take the writer down
            log.exception("reporting an outcome failed")

    def _room(self) -> Room:
        """The limits of the batch beginning (its write lock held): the store's
        fill is read only when a limit needs it."""
        q = self.quota
        if not (q.reserve_percent or q.agent_percent):
            return q.room(None)
        fill = getattr(self.store, "fill", None)  # a store without one has no size
        return q.room(fill() if fill is not None else None)

    def _plan(self, state: BatchState, tx: Tx, item: Item) -> Plan | Outcome:
        """The planner's verdict on ``item``; a bug in planning refuses the
        action with nothing written (``internal``)."""
        self.writing = item
        if self._on_item is not None:
            self._on_item(item, tx)
        try:
            return plan(state, tx, item, self.clock)
        except Exception:
            log.exception("unexpected error preparing an action")
            return Failed(_INTERNAL)

    def _write_item_nested(self, parent: WriteTxn, state: BatchState, item: Item, done: list[Plan]) -> Outcome:
        w = parent.nested()
        tx = w.tx
        try:
            p = self._plan(state, tx, item)
            if not isinstance(p, Plan):
                w.abort()
                return p
            outcome = self._execute(tx, p)
        except Exception as e:
            w.abort()
            if not self._expected(e):
                log.exception("unexpected error writing an action")
            return Failed(self._unavailable(e))
        w.commit()
        state.advance(p)
        done.append(p)  # its events are published only if the batch commits too
        return outcome

    def _execute(self, tx: Tx, p: Plan) -> Committed:
        """Write a planned action through the :class:`Tx` (nothing here is
        a backend's). Only storage can fail here. The test fault hook, if
        set, is called at each named write point first."""
        put = tx.put
        fault = self.fault
        for f in p.facts:
            if fault is not None:
                fault("log")
            put("log", u64(f.seq), f.encoded)
            for table, key, value in f.rows:  # the fact's history and feed rows: no fault point
                put(table, key, value)
        for o in p.objects:
            if fault is not None:
                fault("objects")
            put("objects", o.id.encode(), o.stored)
            for table, key, _ in o.rows_gone:
                if fault is not None:
                    fault("index")
                tx.delete(table, key)
            for table, key, value in o.rows_added:
                if fault is not None:
                    fault("index")
                put(table, key, value)
        if p.receipt is not None:
            if fault is not None:
                fault("receipt")
            put("receipts", p.item.scope, p.receipt)  # type: ignore[arg-type]
        return Committed(p.result, p.seq)

    def _expected(self, e: BaseException) -> bool:
        """A storage failure (or an injected one): logged as such, no traceback."""
        return self.store.storage_error(e)
