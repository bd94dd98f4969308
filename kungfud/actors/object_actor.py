"""The actor that owns objects: a shard of agents (their accounts and Memories),
a Thread (everything inside it) or a Task (its contract and engagements).

Each job: one LMDB view (shared by the jobs told in one message, D281); if the
object owns deadlines due now, record those expiries first (L4-3, DECISIONS.md
B5); decide with the pure core, which reads objects through ``ctx.get`` while the
actor records the version of everything read; a refusal is answered from the
receipt if there is one (L3-2), a decision to write goes to the writer with
those versions (the writer reads the receipt in the commit: a retry is replayed
there, nothing written).

Pipelining. The actor does not wait for a commit before deciding its next job:
it keeps an *overlay* of the states (and versions) its in-flight actions will
have written, and decides on top of it, so many actions of one busy object share
one group commit. The writer still checks every version, so nothing rests on
state that was not committed: if an in-flight action is not written (a stale
read, a replay, a storage fault), every action decided on top of it fails its
version check too; the actor then *drains* — defers new jobs until nothing is in
flight, drops the overlay, and decides the failed and deferred jobs again on
committed state. Replies are sent only after the commit (DESIGN.md "Durability");
a rejection decided on overlay state is held until the actions it read commit.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import random
import threading
import time
from typing import TYPE_CHECKING, Any

import pykka

from ..core.agent import KEY_REVOKED, key_revoked
from .. import tracing
from ..errors import Rejection, StoreUnavailable
from ..store import Committed, Failed, Item, Outcome, Stale
from ..store.interface import replay
from ..store.layout import encode_object
from .expiry import expire_other, expiry_of, is_due
from .messages import DONE_BATCH, ActorSlot, Done, Run, SweepDue
from .ops import ACTIONS
from .overlay import Reads, owns_deadlines
from .shared_view import SharedView

if TYPE_CHECKING:
    from .runtime import Runtime

__all__ = ["ObjectActor", "MAX_ATTEMPTS"]

log = logging.getLogger("kungfud.actors")

MAX_ATTEMPTS = 16
# Several nodes on one store (issue 16, D140): another node's commits make an
# action Stale too, and two nodes' actors of one busy object can collide again
# and again; a larger budget, and a short jittered pause before deciding again.
SHARED_MAX_ATTEMPTS = 64

# A decision that failed on an overlay another node overtook (D145): held, like
# a rejection decided on the overlay, until this actor's writes in flight are
# done, then decided again on what the store holds then.
_BEHIND = Rejection("internal", "the daemon failed on this request; nothing was written", "retry")
# What a deadline sweep before an action found (ObjectActor._sweep).
_CLEAR, _SWEPT, _HELD = object(), object(), object()


def _unavailable(reason: str) -> Failed:
    return Failed(Rejection.unavailable(reason))


class ObjectActor:
    """One object's actor. Not a thread of its own: a carrier thread of the
    registry runs its messages, one at a time and in the order told (D280);
    ``ref`` is how it is told (set by whoever starts it)."""

    def __init__(self, runtime: "Runtime", key: str, slot: ActorSlot):
        self.ref: Any = None
        self.runtime = runtime
        self.key = key
        self.slot = slot
        self.owns_deadlines = owns_deadlines(key)
        self.shared = getattr(getattr(runtime, "nodes", None), "shared", False)
        self.max_attempts = SHARED_MAX_ATTEMPTS if self.shared else MAX_ATTEMPTS
        # Pipelining state; touched only by this actor's messages (on its carrier thread).
        # obj -> (version, state, stored form, the in-flight item that writes it)
        self.overlay: dict[str, tuple[int, Any, bytes, Item]] = {}
        self.inflight = 0
        self.submitted = 0
        self.done = 0
        self.draining = False
        self.epoch = 0  # bumped at each drain: held rejections of an older epoch are re-decided
        self.deferred: collections.deque[Any] = collections.deque()
        self.held: list[tuple[int, int, Run, Rejection]] = []  # (barrier, epoch, run, rejection)
        # Outcomes from the writer thread, handed over in batches (DoneBatch).
        self._done_lock = threading.Lock()
        self._done_box: list[Done] = []
        self._done_told = False
        # The read view of the jobs of one message, while they are decided; not
        # on a store whose reads each hold a pooled connection (PostgreSQL):
        # a job that must read afresh would hold two (D281).
        self._view: Any = None
        self.shares_views = not getattr(runtime.store, "pooled_reads", False)

    # --- messages (one at a time, on the carrier thread) ------------------------

    def on_receive(self, message: Any) -> None:
        if type(message) is list:  # jobs submitted together, handled in order
            self._receive_together(message)
            return
        self.slot.busy = True
        try:
            self._handle(message)
        except Exception as e:
            self._failed(message, e)
        finally:
            self._settle()

    def _receive_together(self, jobs: list[Any]) -> None:
        """Jobs told in one message, on one read view (D281): each decides on it
        and the overlay of the writes the ones before it put in flight, as they
        would on views a moment apart; the writer checks every version. A job
        that fails takes the view with it — the backend names the failure as it
        leaves the view (a lost PostgreSQL connection: StoreUnavailable) — and
        is answered so; the jobs after it each read on a view of their own."""
        if self._view is not None or self.draining or len(jobs) == 1 or not self.shares_views:
            for job in jobs:
                self.on_receive(job)
            return
        done = 0
        failing = None
        self.slot.busy = True
        try:
            try:
                with self.runtime.store.read() as view:
                    self._view = SharedView(view)
                    for job in jobs:
                        failing = job
                        done += 1
                        self._handle(job)
                        failing = None
            finally:
                self._view = None
        except Exception as e:
            if failing is not None:
                self._failed(failing, e)
            else:  # opening or closing the view: each job left tries a view of its own
                log.warning("actor %s: a shared read view failed: %s", self.key, e)
        finally:
            self._settle()
        for job in jobs[done:]:
            self.on_receive(job)

    def _handle(self, message: Any) -> None:
        if message is DONE_BATCH:
            with self._done_lock:
                box, self._done_box = self._done_box, []
                self._done_told = False
            for d in box:
                self._on_done(d)
        elif self.draining:
            self.deferred.append(message if isinstance(message, (SweepDue, Run)) else Run(message))
        else:
            self._dispatch(message)

    def _failed(self, message: Any, e: Exception) -> None:
        """``message`` raised ``e``: its job (if any) is answered ``unavailable``
        for a store down or restarting (retry, not a bug), else ``internal``."""
        unreachable = isinstance(e, StoreUnavailable)
        if unreachable:
            log.warning("actor %s: %s", self.key, e)
        else:
            log.error("actor %s failed on %s", self.key, getattr(message, "op", message), exc_info=e)
        job = message.job if isinstance(message, Run) else message if hasattr(message, "reply") else None
        if job is not None and job.reply is not None:
            try:
                job.reply(Failed(
                    e.rejection() if unreachable
                    else Rejection("internal", "the daemon failed on this request; nothing was written", "retry")
                ))
            except Exception:
                log.exception("reply failed")

    def _settle(self) -> None:
        self.slot.last_used = time.monotonic()
        self.slot.busy = self.inflight > 0 or self.draining or bool(self.held) or bool(self.deferred)

    def _dispatch(self, message: Any) -> None:
        if isinstance(message, SweepDue):
            if self.owns_deadlines:
                self._expire_own(self.runtime.clock())
        elif isinstance(message, Run):
            self._run(message)
        else:
            self._run(Run(message))

    def _on_done(self, d: Done) -> None:
        self.inflight -= 1
        self.done += 1
        if isinstance(d.outcome, Committed):
            for obj, version in d.versions.items():
                if self.overlay.get(obj, (None,))[0] == version:
                    del self.overlay[obj]  # the store has it now
        else:
            # Not written: the overlay holds states that will never exist.
            self._start_drain()
            if isinstance(d.outcome, Stale):
                self.deferred.append(Run(d.run.job, d.run.attempt + 1))
        self._release_held()
        if self.draining and self.inflight == 0:
            self.overlay.clear()
            self.draining = False
            while self.deferred and not self.draining:
                self._dispatch(self.deferred.popleft())

    def _start_drain(self) -> None:
        if not self.draining:
            self.draining = True
            self.epoch += 1
        # Rejections decided on the overlay may rest on what was not written.
        for _, _, run, _ in self.held:
            self.deferred.append(Run(run.job, run.attempt + 1))
        self.held.clear()

    def _release_held(self) -> None:
        keep = []
        again = []
        for barrier, epoch, run, rejection in self.held:
            if self.done >= barrier and epoch == self.epoch:
                if rejection is _BEHIND:
                    again.append(Run(run.job, run.attempt + 1))
                else:
                    self._reply(run, self._held_outcome(run, rejection))
            else:
                keep.append((barrier, epoch, run, rejection))
        self.held = keep
        for run in again:
            if self.draining:
                self.deferred.append(run)
            else:
                self._dispatch(run)

    def _decide(self, decide: Any, reads: "Reads") -> Any:
        """``decide()``, except that on a shared store a failure of a decision
        that read this actor's overlay of in-flight writes is taken for what it
        most likely is: another node's commit overtook an overlay entry, and the
        decision mixed it with the store (D145). It returns ``_BEHIND`` then,
        for the caller to hold and decide again."""
        try:
            return decide()
        except Exception:
            if self.shared and reads.used_overlay and self.inflight > 0:
                log.debug("actor %s: a decision on an overtaken overlay failed; deciding again", self.key, exc_info=True)
                return _BEHIND
            raise

    def _held_outcome(self, run: Run, rejection: Rejection) -> Outcome:
        """A held rejection may have been decided while the first attempt of the
        same request was in flight: once that committed, the answer is its
        receipt (L3-2) or a mismatch (L3-3), not the rejection."""
        job = run.job
        if job is not None and job.scope is not None and rejection != KEY_REVOKED:  # D185: no replay
            with self.runtime.store.read() as view:
                rec = view.receipt(job.scope)
            if rec is not None:
                return replay(rec, job.req_hash)
        return Failed(rejection)

    @staticmethod
    def _reply(run: Run, outcome: Outcome) -> None:
        if run.job is not None and run.job.reply is not None:
            run.job.reply(outcome)

    # --- deciding --------------------------------------------------------------

    def _expire_own(self, now: int) -> bool:
        """Record (pipelined) every expiry of this actor's object due at ``now``.
        True when that could not be decided yet (``_BEHIND``: a sweep is held)."""
        with self.runtime.store.read() as view:
            return self._sweep(now, Reads(view, self.overlay)) is _HELD

    def _sweep(self, now: int, reads: Reads) -> object:
        """:meth:`_expire_own` on ``reads`` (over an open view): ``_CLEAR`` when
        nothing was due (``reads`` then holds only this object's read, and the
        action that follows decides on the same reads), ``_SWEPT`` when expiries
        were submitted (the overlay moved), ``_HELD`` when the sweep is held."""
        state = reads.get(self.key)
        if state is None or not is_due(reads, self.key, state, now):
            return _CLEAR
        command, op = expiry_of(self.key)
        ctx = self.runtime.ctx(None, now, reads.get, reads.query)
        decision = self._decide(lambda: ACTIONS[op].decide(command(self.key), ctx), reads)
        if decision is _BEHIND:
            self.held.append((self.submitted, self.epoch, Run(None), _BEHIND))
            return _HELD
        if not isinstance(decision, Rejection):  # tracing: a span per deadline that fires
            self._submit(Run(None), None, b"", decision, reads, None, tracing.deadline(self.key) if tracing.on else None)
        return _SWEPT

    def _run(self, run: Run) -> None:
        job = run.job
        if job is None:  # a deadline sweep that was not written: sweep again
            if self.owns_deadlines and run.attempt < MAX_ATTEMPTS:
                self._expire_own(self.runtime.clock())
            return
        if run.attempt >= self.max_attempts:
            self._reply(run, _unavailable("the object changed concurrently too often; retry"))
            return
        if self.shared and run.attempt >= 2:  # D140: let the other node's writes pass
            time.sleep(random.uniform(0, min(run.attempt, 8)) / 1000)
        spec = ACTIONS[job.op]
        rt = self.runtime
        shared = self._view if run.attempt == 0 else None
        while True:
            now = rt.clock()
            # The view of the jobs told together, or a view of its own (again
            # after deadlines fell due: their expiries are committed since).
            with contextlib.nullcontext(shared) if shared is not None else rt.store.read() as view:
                shared = None
                reads = Reads(view, self.overlay)
                if self.owns_deadlines:  # L4-3: the deadline wins over this action
                    swept = self._sweep(now, reads)
                    if swept is _HELD:
                        self.held.append((self.submitted, self.epoch, run, _BEHIND))  # after the held sweep
                        return
                    if swept is _SWEPT:  # decide on the expiries in flight
                        reads = Reads(view, self.overlay)
                # The caller's version is recorded (L5): an agent changed before
                # this commit (a key rotated) makes it Stale, decided again here.
                caller = reads.get(job.caller) if job.caller is not None else None
                # D185: a key rotated or reset stops working at once — no replay either.
                decision = key_revoked(caller, job.key_hash, now, job.op)  # and a scoped key's scope (WIRE.md 1.3)
                if decision is None:
                    ctx = rt.ctx(caller, now, reads.get, reads.query)
                    if job.span is not None:  # tracing: the kungfud.decide span's stamps
                        job.span.deciding()
                    decision = self._decide(lambda: spec.decide(job.command, ctx), reads)
                    if job.span is not None:
                        job.span.decided()
                    # L3-2, L3-3: a retry is answered from its receipt. A decision to
                    # write is checked by the writer, which reads the receipt in the
                    # commit's own transaction (store/plan.py: a replay or a mismatch,
                    # nothing written); only a refusal is checked here, since a request
                    # accepted once and refused now is still its first answer (D281).
                    if (
                        job.scope is not None
                        and (decision is _BEHIND or isinstance(decision, Rejection))
                        and (rec := view.receipt(job.scope)) is not None
                    ):
                        self._reply(run, replay(rec, job.req_hash))
                        return
            if reads.valid_until is not None and reads.valid_until <= now:
                # The decision read another Thread or Task with a deadline due
                # (e.g. a deactivation): record those expiries, then decide again.
                for owner in reads.owners:
                    if owner != self.key:
                        expire_other(self.runtime, owner, now, MAX_ATTEMPTS)
                if run.attempt >= MAX_ATTEMPTS:
                    self._reply(run, _unavailable("deadlines kept falling due; retry"))
                    return
                run = Run(job, run.attempt + 1)
                continue
            break
        if decision is _BEHIND:
            self.held.append((self.submitted, self.epoch, run, _BEHIND))
            return
        if isinstance(decision, Rejection):
            if reads.used_overlay and self.inflight > 0:
                self.held.append((self.submitted, self.epoch, run, decision))
            else:
                self._reply(run, Failed(decision))
            return
        for obj in decision.states:
            reads.expect.setdefault(obj, 0)  # created by this action: must not exist yet
        self._submit(run, job.scope, job.req_hash, decision, reads, reads.valid_until, job.span)

    def _submit(
        self, run: Run, scope: bytes | None, req_hash: bytes, decision: Any, reads: Reads, valid_until: int | None,
        trace: Any = None,
    ) -> None:
        expect = reads.expect
        counts: dict[str, int] = {}
        for fact in decision.facts:
            for obj in fact.objects():
                counts[obj] = counts.get(obj, 0) + 1
        versions = {obj: expect[obj] + n for obj, n in counts.items()}
        encoded = {obj: encode_object(version, decision.states[obj]) for obj, version in versions.items()}

        def finished(outcome: Outcome) -> None:  # on the writer thread
            if not isinstance(outcome, Stale):
                self._reply(run, outcome)  # the commit is durable: answer now
            self._post_done(Done(run, outcome, versions))

        item = Item(
            scope=scope,
            req_hash=req_hash,
            facts=decision.facts,
            states=decision.states,
            expect=expect,
            result=decision.result,
            done=finished,
            valid_until=valid_until,
            assumed=reads.assumed or None,
            encoded=encoded,
            # Another node may write what this decision read from the overlay (D145).
            after=list(reads.after.values()) if self.shared and reads.after else None,
            trace=trace,  # the events of its facts keep it (WIRE.md 1.3 "Tracing")
        )
        for obj, version in versions.items():
            self.overlay[obj] = (version, decision.states[obj], encoded[obj], item)
        self.inflight += 1
        self.submitted += 1
        self.runtime.writer.submit(item)

    def _post_done(self, d: Done) -> None:
        """Hand an outcome to this actor (writer thread): one wake-up message
        carries every outcome that arrives before the actor takes them."""
        with self._done_lock:
            self._done_box.append(d)
            if self._done_told:
                return
            self._done_told = True
        try:
            self.ref.tell(DONE_BATCH)
        except pykka.ActorDeadError:
            # Stopped (shutdown): nobody will decide these again.
            with self._done_lock:
                box, self._done_box = self._done_box, []
                self._done_told = False
            for lost in box:
                if isinstance(lost.outcome, Stale):
                    self._reply(lost.run, _unavailable("the daemon is shutting down; retry against the restarted daemon"))
