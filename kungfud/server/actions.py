"""An action at the front door, from its admission to its answer: admitted by
:class:`~.limits.Intake` (a refused one still answered from its receipt), counted
in flight, pre-checked when its catalogue row says so (D216), sent to its actor
through the bridge, and answered on the event loop when its outcome comes back
(:class:`ActionTicket`). :class:`ActionPath` is that half of
:class:`~.app.Server`; the server holds the state it uses (runtime, intake,
bridge, metrics, revocation) and the answers it shares with reads
(``_reject``, ``_audit``)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from .. import tracing, wire
from ..actors import Committed, Failed, Job, Outcome, Replayed
from ..errors import Rejection
from .connection import Conn
from .limits import Admitted
from .revocation import KEY_CHANGES

__all__ = ["ActionTicket", "ActionPath"]


class ActionTicket:
    """One admitted action waiting for its outcome (event loop only, but its
    ``reply`` may be called on any thread)."""

    __slots__ = ("server", "conn", "req_id", "op", "caller", "started", "admitted", "span")

    def __init__(self, server: Any, conn: Conn, req_id: Any, op: str):
        self.server = server
        self.conn = conn
        self.req_id = req_id
        self.op = op
        self.caller: str | None = None
        self.started = 0.0
        self.admitted: Admitted | None = None
        self.span: tracing.RequestSpan | None = None

    def reply(self, outcome: Outcome) -> None:  # any thread
        if self.span is not None:  # tracing: the commit this answer follows (writer thread)
            self.span.replied(self.server.rt.writer, outcome)
        self.server.bridge.reply_soon((self, outcome))


class ActionPath:
    """The action half of :class:`~.app.Server` (a mixin: ``self`` is the server)."""

    def _act(self, conn: Conn, req_id: Any, op: str, key: str, args: Any) -> None:
        """Admit (Intake), count it in flight, and send it on: the job is built
        and routed by the runtime; it reaches its actor at the end of this loop
        turn (bridge). A refused action is still answered from its receipt."""
        ticket = ActionTicket(self, conn, req_id, op)
        job = self.rt.job(conn.agent, op, key, args, ticket.reply, conn.key_hash)  # FrameError: content of the wrong shape
        ticket.caller = job.caller
        ticket.span = job.span = tracing.current  # None unless tracing is on
        admitted = self.intake.admit(op, job.caller, conn.peer_key)
        if isinstance(admitted, Rejection):
            if not self._answer_from_receipt(conn, req_id, job):
                self._reject(conn, req_id, admitted, op, job.caller)
            return
        if conn.agent is None:  # an admitted agent.register: a rate-limited cost, so more time (D231)
            conn.hello_by = asyncio.get_running_loop().time() + self.cfg.server.hello_within_s
        ticket.admitted = admitted
        conn.in_flight += 1
        ticket.started = time.perf_counter()
        if (name := self.rt.precheck(op)) is not None and (check := self.prechecks[name](args)) is not None:  # D216
            asyncio.ensure_future(self._send_checked(check, job, ticket))
            return
        self.bridge.send(self.rt.route(job), job)

    async def _send_checked(self, check: Any, job: Job, ticket: "ActionTicket") -> None:
        async with self._prechecking:  # a few at a time: lookups share the loop's default executor
            refusal = await check
        if refusal is None:
            self.bridge.send(self.rt.route(job), job)
            return
        outcome = self.rt.answered(job)  # an action accepted before is still replayed
        ticket.reply(outcome if outcome is not None else Failed(refusal))

    def _answer_from_receipt(self, conn: Conn, req_id: Any, job: Job) -> bool:
        """Answer a request whose receipt exists (its replay, or a mismatch);
        False when there is none."""
        outcome = self.rt.answered(job)
        if outcome is None:
            return False
        if isinstance(outcome, Replayed):
            self.metrics.replays += 1
            if tracing.current is not None:
                tracing.current.replayed = True
            self._audit(job.caller, job.op, replayed=True, result=outcome.result)
            conn.send(wire.encode_ok(req_id, outcome.result, replayed=True))
        else:
            assert isinstance(outcome, Failed)
            self._reject(conn, req_id, outcome.rejection, job.op, job.caller)
        return True

    def _finish(self, ticket: ActionTicket, outcome: Outcome) -> None:
        """An action's outcome, on the event loop (bridge)."""
        if ticket.span is not None:  # tracing: its span ends with the answer
            return tracing.finishing(ticket.span, self._answer, ticket, outcome)
        self._answer(ticket, outcome)

    def _answer(self, ticket: ActionTicket, outcome: Outcome) -> None:
        conn, req_id, op, caller = ticket.conn, ticket.req_id, ticket.op, ticket.caller
        conn.in_flight -= 1
        if conn.in_flight == 0:
            self._settled.set()
        if not isinstance(outcome, Replayed):  # the histogram is of actions decided
            self.metrics.latency((time.perf_counter() - ticket.started) * 1000)
        if ticket.admitted is not None:
            refused = outcome.rejection.code if isinstance(outcome, Failed) else None
            self.intake.settle(op, ticket.admitted, replayed=isinstance(outcome, Replayed), refused=refused)
        if isinstance(outcome, Committed):
            self.metrics.action(op)
            self._audit(caller, op, result=outcome.result)
            conn.send(wire.encode_ok(req_id, outcome.result))
            if op in KEY_CHANGES:
                self.revocation.key_changed(outcome.result, caller)
        elif isinstance(outcome, Replayed):
            self.metrics.replays += 1  # its action count was given back (L4-5)
            self._audit(caller, op, replayed=True, result=outcome.result)
            conn.send(wire.encode_ok(req_id, outcome.result, replayed=True))
        elif isinstance(outcome, Failed):
            self._reject(conn, req_id, outcome.rejection, op, caller)
        else:
            self._reject(conn, req_id, Rejection("internal", "unexpected outcome; nothing was written", "retry"), op, caller)
