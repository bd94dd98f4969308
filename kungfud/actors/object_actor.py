"""The actor that owns one object (an Agent now; Threads and Tasks later).

Each job: read the receipt, the caller's account and the objects the decision
needs from one LMDB view; decide with the pure core; hand the facts to the writer
with the versions read; wait for the commit; reply. If an object moved before the
write (:class:`~kungfud.store.Stale`) the job is decided again on fresh state.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any

import pykka

from ..errors import Rejection
from ..store import Failed, Item, Outcome, Replayed, Stale
from ..store.writer import mismatch
from .ops import ACTIONS

if TYPE_CHECKING:
    from .runtime import Job, Runtime

__all__ = ["ObjectActor", "Slot", "MAX_ATTEMPTS"]

log = logging.getLogger("kungfud.actors")

MAX_ATTEMPTS = 16


class Slot:
    """What the registry knows of a live actor, to stop it when idle."""

    __slots__ = ("last_used", "busy")

    def __init__(self) -> None:
        self.last_used = time.monotonic()
        self.busy = False


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
            message.reply(self._handle(message))
        except Exception:
            log.exception("actor %s failed on %s", self.key, getattr(message, "op", message))
            try:
                message.reply(Failed(Rejection("internal", "the daemon failed on this request; nothing was written", "retry")))
            except Exception:
                log.exception("reply failed")
        finally:
            self.slot.last_used = time.monotonic()
            self.slot.busy = False

    def _handle(self, job: "Job") -> Outcome:
        spec = ACTIONS[job.op]
        rt = self.runtime
        for _ in range(MAX_ATTEMPTS):
            with rt.store.read() as view:
                if job.scope is not None and (rec := view.receipt(job.scope)) is not None:
                    return Replayed(rec.result) if rec.req_hash == job.req_hash else Failed(mismatch())
                expect: dict[str, int] = {}
                caller = None
                if job.caller is not None:
                    expect[job.caller], caller = view.obj(job.caller)
                states: dict[str, Any] = {}
                for obj in spec.reads(job.command):
                    expect[obj], states[obj] = view.obj(obj)
            decision = spec.decide(states, job.command, rt.ctx(caller))
            if isinstance(decision, Rejection):
                return Failed(decision)
            for obj in decision.states:
                expect.setdefault(obj, 0)  # created by this action: must not exist yet
            outcome = self._write(job, decision, expect)
            if not isinstance(outcome, Stale):
                return outcome
        return Failed(Rejection.unavailable("the object changed concurrently too often; retry"))

    def _write(self, job: "Job", decision: Any, expect: dict[str, int]) -> Outcome:
        done = threading.Event()
        box: list[Outcome] = []

        def finished(outcome: Outcome) -> None:
            box.append(outcome)
            done.set()

        self.runtime.writer.submit(
            Item(
                scope=job.scope,
                req_hash=job.req_hash,
                facts=decision.facts,
                states=decision.states,
                expect=expect,
                result=decision.result,
                done=finished,
            )
        )
        done.wait()
        return box[0]


