"""Work: what an assignment (§6.4) and a Task engagement (§7.3) share.

Each is a piece of work one agent delivers and another judges, through the same
verbs — deliver (fixed once), drop, adopt or reject (a rejection carries a
reason), end by a deadline (L4) — with different parties, a different object
holding it (a Thread, a Task) and readers, and a few rules of its own. The spec
keeps them distinct concepts (R2), so they share this mechanism, not a table:
each concept module declares its :class:`Work` once — its lifecycle table
(:mod:`kungfud.core.lifecycle`: moves, refusals, deadlines, who does each
verb), its facts, and, as named methods with their rule ids, the rules that are
its own — and the verbs here decide for either.

The commands name the work by ``work`` (an assignment's or an engagement's id;
for ``Take``, the assignment or Task offered) and the holder of deadlines by
``owner``: the wire keeps its own field names (``assignment``,
``engagement``, ``task``; WIRE.md) and ``kungfud.actors.ops`` maps them here.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from ..errors import DecisionRefused, Rejection, must, rejects
from .timestamps import rfc3339
from .context import acting
from .decision import make
from .facts import Decision, Fact
from .lifecycle import Lifecycle
from .obligations import ob_id
from .pins import Pin, resolve_pin

if TYPE_CHECKING:
    from .context import Ctx

__all__ = ["Take", "Deliver", "Judge", "Drop", "Void", "Expire", "Work"]


class Take(msgspec.Struct, frozen=True):
    work: str  # the assignment, or the Task, offered
    deliver: Pin | None = None  # delivered in the same action (L2-2)


class Deliver(msgspec.Struct, frozen=True):
    work: str
    pin: Pin


class Judge(msgspec.Struct, frozen=True):
    work: str
    verdict: Literal["adopt", "reject"]
    reason: bytes | None = None


class Drop(msgspec.Struct, frozen=True):
    work: str


class Void(msgspec.Struct, frozen=True):
    work: str


class Expire(msgspec.Struct, frozen=True):
    """Record every expiry due at ``ctx.now`` of the work ``owner`` (a Thread, a
    Task) holds: a deadline's job, no agent."""

    owner: str


class Work(ABC):
    """One kind of work, as the shared verbs need it. A concept module subclasses
    it once: what it is built with says what its table and facts are, its
    methods what its own rules say. The verbs are decisions (command, ctx →
    :class:`Decision` or :class:`Rejection`), bound as the module's ``decide_*``."""

    def __init__(self, lifecycle: Lifecycle, owner: str, facts: tuple[type, type, type, type], reason: tuple[str, str]):
        self.lifecycle = lifecycle
        self.name = lifecycle.name  # the field naming the work: "assignment" or "engagement"
        self.owner = owner  # the field naming the object that holds it, and that object's kind
        # The facts its verbs record, each naming the work and its owner.
        self.delivered, self.judged, self.dropped, self.expired = facts
        self.reason_reader, self.reason_rule = reason  # who reads a rejection's reason, and the rule requiring one

    # --- the rules each kind states ---------------------------------------------

    @abstractmethod
    def readable(self, state: Any, me: str, ctx: "Ctx") -> bool:
        """Whether ``me`` may act on the work at all; otherwise it is not found."""

    @abstractmethod
    def as_of(self, state: Any, owner: Any, ctx: "Ctx") -> str:
        """The work's state as of ``ctx.now``: a passed deadline wins (L4-3)."""

    @abstractmethod
    def due(self, owner: Any, ctx: "Ctx") -> list[tuple[str, str]]:
        """The work of ``owner`` whose deadline is due at ``ctx.now``, each with
        the state it ends in, in the order they fell due."""

    def right_to_judge(self, state: Any) -> None:
        """A rule that may end the judging party's right, checked before the state."""

    def may_adopt(self, state: Any, owner: Any, cmd: Judge) -> None:
        """A rule that may refuse an adoption the table allows."""

    # --- the verbs ------------------------------------------------------------------

    def load(self, work: str, ctx: "Ctx") -> tuple[Any, Any, str]:
        """The work, its owner and the acting caller, if the caller may act on it;
        not_found worded as for a missing id otherwise. Work a deadline ended is
        refused even before its expiry is recorded: the actor records it first."""
        me = acting(ctx)
        state = ctx.get(work)
        if state is None or not self.readable(state, me, ctx):
            raise DecisionRefused(Rejection.not_found(self.name, work))
        owner = ctx.get(getattr(state, self.owner))
        if (now := self.as_of(state, owner, ctx)) != state.state:
            raise DecisionRefused(self.lifecycle.final(state, now))
        return state, owner, me

    def ids(self, state: Any) -> dict[str, str]:
        """The fields every fact of the work carries: its id and its owner's."""
        return {self.name: getattr(state, self.name), self.owner: getattr(state, self.owner)}

    def delivery(self, state: Any, pin: Pin, me: str, ctx: "Ctx") -> list[Fact]:
        """The deliverer pins its own Memory (R6.4-22); the judgment deadline starts."""
        facts, memory, version = must(resolve_pin(pin, ctx, "delivery"))
        judge_by = ctx.now + state.judge_within_s * 1000
        return [*facts, self.delivered(
            at=ctx.now, by=me, **self.ids(state), pin_memory=memory, pin_version=version, judge_by=judge_by
        )]

    @rejects
    def deliver(self, cmd: Deliver, ctx: "Ctx") -> Decision:
        """The deliverer fixes the output once."""
        state, _, me = self.load(cmd.work, ctx)
        self.lifecycle.check(state, "deliver", me)
        facts = self.delivery(state, cmd.pin, me, ctx)
        judge_by = rfc3339(facts[-1].judge_by)  # type: ignore[attr-defined]
        result = {self.name: cmd.work, "state": "delivered", "judge_by": judge_by}
        return make(facts, {**result, "ended": [ob_id("deliver", cmd.work, me)]}, ctx)

    @rejects
    def judge(self, cmd: Judge, ctx: "Ctx") -> Decision:
        """Its judge adopts or rejects a delivery; a rejection carries a reason."""
        state, owner, me = self.load(cmd.work, ctx)
        self.lifecycle.require_party(state, cmd.verdict, me)
        self.right_to_judge(state)
        final = self.lifecycle.check(state, cmd.verdict)
        if cmd.verdict == "reject" and cmd.reason is None:
            raise DecisionRefused(Rejection.bad_request(
                f'a rejection must carry a reason {self.reason_reader} can read: `"content": {{"reason": "…"}}`',
                rule=self.reason_rule,
            ))
        if cmd.verdict == "adopt":
            self.may_adopt(state, owner, cmd)
        fact = self.judged(at=ctx.now, by=me, **self.ids(state), verdict=cmd.verdict, reason=cmd.reason)
        return self.decided([fact], cmd.work, final, [ob_id("judge", cmd.work, me)], ctx)

    @rejects
    def drop(self, cmd: Drop, ctx: "Ctx") -> Decision:
        """The deliverer ends it without delivery, only before delivery."""
        state, _, me = self.load(cmd.work, ctx)
        self.lifecycle.check(state, "drop", me)
        fact = self.dropped(at=ctx.now, by=me, **self.ids(state))
        return self.decided([fact], cmd.work, "dropped", [ob_id("deliver", cmd.work, me)], ctx)

    def decided(self, facts: list[Fact], work: str, state: str, ended: list[str], ctx: "Ctx") -> Decision:
        return make(facts, {self.name: work, "state": state, "ended": ended}, ctx)

    @rejects
    def expire(self, cmd: Expire, ctx: "Ctx") -> Decision:
        """L4: every deadline of ``cmd.owner`` due now ends its work, as the kind says."""
        owner = ctx.get(cmd.owner)
        if owner is None:
            raise DecisionRefused(Rejection.not_found(self.owner, cmd.owner))
        facts: list[Fact] = [
            self.expired(at=ctx.now, by=None, **{self.name: work, self.owner: cmd.owner}, outcome=outcome)
            for work, outcome in self.due(owner, ctx)
        ]
        if not facts:
            raise DecisionRefused(Rejection.conflict(f"no deadline of {self.owner} {cmd.owner} is due"))
        return make(facts, {self.owner: cmd.owner, "expired": [getattr(f, self.name) for f in facts]}, ctx)

    def apply(self, state: Any, fact: Fact) -> Any:
        """What the verbs record is the same for both kinds of work: the facts
        carry the same fields, and the states keep them under the same names."""
        rep = msgspec.structs.replace
        kind = type(fact)
        if kind is self.delivered:  # the output is fixed (R6.4-23, R7.3-11); the judgment deadline starts
            return rep(
                state, state="delivered", delivered_at=fact.at, pin_memory=fact.pin_memory,  # type: ignore[attr-defined]
                pin_version=fact.pin_version, judge_by=fact.judge_by,  # type: ignore[attr-defined]
            )
        if kind is self.judged:  # adopted or rejected, with the reason a rejection carries
            final = "adopted" if fact.verdict == "adopt" else "rejected"  # type: ignore[attr-defined]
            return rep(state, state=final, judged_at=fact.at, reason=fact.reason, ended_at=fact.at)  # type: ignore[attr-defined]
        if kind is self.dropped:
            return ended(state, "dropped", fact.at)
        if kind is self.expired:
            return ended(state, fact.outcome, fact.at)  # type: ignore[attr-defined]
        raise TypeError(f"{self.name} cannot apply {kind.__name__}")


def ended(state: Any, name: str, at: int) -> Any:
    return msgspec.structs.replace(state, state=name, ended_at=at)
