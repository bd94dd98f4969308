"""The actor that owns one object: an Agent (its account and Memories) or a Thread
(everything inside it).

Each job: open one LMDB view; if the object is a Thread with deadlines due now,
record those expiries first (L4-3, DECISIONS.md B5); read the receipt; decide with
the pure core, which reads objects through ``ctx.get`` while the actor records
the version of everything read; hand the facts to the writer with those versions;
wait for the commit; reply. If an object moved before the write
(:class:`~kungfud.store.Stale`) the job is decided again on fresh state.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any

import pykka

from ..core import assignment, engagement
from ..errors import Rejection
from ..store import Failed, Item, Outcome, Replayed, Stale
from ..store.store import View
from ..store.writer import mismatch
from .ops import ACTIONS, DEADLINE, DEADLINE_TASK

if TYPE_CHECKING:
    from .runtime import Job, Runtime

__all__ = ["ObjectActor", "Slot", "MAX_ATTEMPTS", "Expire"]

log = logging.getLogger("kungfud.actors")

MAX_ATTEMPTS = 16


class Expire:
    """A clock message: record the expiries of this Thread or Task that are due."""

    __slots__ = ()


# Objects that own deadlines: id prefix -> (due ids at now, expiry command, op).
_EXPIRY: dict[str, tuple[Any, Any, str]] = {
    "th_": (assignment.due_expiries, assignment.Expire, DEADLINE),
    "tk_": (engagement.due_expiries, engagement.ExpireTask, DEADLINE_TASK),
}


class Slot:
    """What the registry knows of a live actor, to stop it when idle."""

    __slots__ = ("last_used", "busy")

    def __init__(self) -> None:
        self.last_used = time.monotonic()
        self.busy = False


class _Reads:
    """``ctx.get`` over one view, recording every version read (L5) and the
    earliest deadline among the Threads and Tasks read (B5)."""

    __slots__ = ("view", "expect", "states", "valid_until", "threads")

    def __init__(self, view: View):
        self.view = view
        self.expect: dict[str, int] = {}
        self.states: dict[str, Any] = {}
        self.valid_until: int | None = None
        self.threads: list[str] = []  # Threads and Tasks read that have a running deadline

    def get(self, obj: str) -> Any:
        if obj in self.states:
            return self.states[obj]
        try:
            version, state = self.view.obj(obj)
        except KeyError:  # an id of no known kind names nothing
            return None
        self.expect[obj] = version
        self.states[obj] = state
        if state is not None and obj[:3] in _EXPIRY and "." not in obj and (due := state.next_due()) is not None:
            self.valid_until = due if self.valid_until is None else min(self.valid_until, due)
            self.threads.append(obj)
        return state


class ObjectActor(pykka.ThreadingActor):
    def __init__(self, runtime: "Runtime", key: str, slot: Slot):
        super().__init__()
        self.runtime = runtime
        self.key = key
        self.slot = slot

    # Runs on the actor's own thread.
    def on_receive(self, message: Any) -> None:
        self.slot.busy = True
        try:
            if isinstance(message, Expire):
                if self.key[:3] in _EXPIRY:
                    self._expire_due(self.key, self.runtime.clock())
                return
            message.reply(self._handle(message))
        except Exception:
            log.exception("actor %s failed on %s", self.key, getattr(message, "op", message))
            if not isinstance(message, Expire):
                try:
                    message.reply(
                        Failed(Rejection("internal", "the daemon failed on this request; nothing was written", "retry"))
                    )
                except Exception:
                    log.exception("reply failed")
        finally:
            self.slot.last_used = time.monotonic()
            self.slot.busy = False

    def _expire_due(self, owner: str, now: int) -> None:
        """Record every expiry of a Thread or Task due at ``now``. Usually its own
        actor does this; any actor may, since the write is version-checked."""
        due_ids, command, op = _EXPIRY[owner[:3]]
        for _ in range(MAX_ATTEMPTS):
            with self.runtime.store.read() as view:
                reads = _Reads(view)
                state = reads.get(owner)
                if state is None or not due_ids(state, now):
                    return
                decision = ACTIONS[op].decide(command(owner), self.runtime.ctx(None, now, reads.get))
            if isinstance(decision, Rejection):
                return
            outcome = self._write(None, b"", decision, reads.expect, None)
            if not isinstance(outcome, Stale):
                if isinstance(outcome, Failed):
                    log.warning("recording expiries of %s failed: %s", self.key, outcome.rejection)
                return

    def _handle(self, job: "Job") -> Outcome:
        spec = ACTIONS[job.op]
        rt = self.runtime
        for _ in range(MAX_ATTEMPTS):
            now = rt.clock()
            if self.key[:3] in _EXPIRY:
                self._expire_due(self.key, now)  # L4-3: the deadline wins over this action
            with rt.store.read() as view:
                if job.scope is not None and (rec := view.receipt(job.scope)) is not None:
                    return Replayed(rec.result) if rec.req_hash == job.req_hash else Failed(mismatch())
                reads = _Reads(view)
                caller = reads.get(job.caller) if job.caller is not None else None
                decision = spec.decide(job.command, rt.ctx(caller, now, reads.get))
            if reads.valid_until is not None and reads.valid_until <= now:
                # The decision read another Thread with a deadline due (e.g. a
                # deactivation): record those expiries first, then decide again.
                for thread_id in reads.threads:
                    self._expire_due(thread_id, now)
                continue
            if isinstance(decision, Rejection):
                return Failed(decision)
            for obj in decision.states:
                reads.expect.setdefault(obj, 0)  # created by this action: must not exist yet
            outcome = self._write(job.scope, job.req_hash, decision, reads.expect, reads.valid_until)
            if not isinstance(outcome, Stale):
                return outcome
            if outcome.obj == "deadline":
                time.sleep(0.001)  # the writer's clock passed a deadline ours had not yet
        return Failed(Rejection.unavailable("the object changed concurrently too often; retry"))

    def _write(
        self, scope: bytes | None, req_hash: bytes, decision: Any, expect: dict[str, int], valid_until: int | None
    ) -> Outcome:
        done = threading.Event()
        box: list[Outcome] = []

        def finished(outcome: Outcome) -> None:
            box.append(outcome)
            done.set()

        self.runtime.writer.submit(
            Item(
                scope=scope,
                req_hash=req_hash,
                facts=decision.facts,
                states=decision.states,
                expect=expect,
                result=decision.result,
                done=finished,
                valid_until=valid_until,
            )
        )
        done.wait()
        return box[0]


