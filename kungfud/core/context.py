"""What a decision may know besides the object's own state.

The actor builds a :class:`Ctx` for each command: the instant the decision is made
(DECISIONS.md B5), the caller's account, limits, and sources of fresh ids and
secrets. Tests build one with a fake clock and deterministic ids.
"""

from __future__ import annotations

import itertools
from typing import Any, Callable

import msgspec

from ..errors import DecisionRefused, Rejection, must
from .agent import AgentState, require_active

__all__ = ["Ctx", "Limits", "counting_ids", "acting", "fits"]


class Limits(msgspec.Struct, frozen=True):
    max_content_bytes: int = 262_144
    deliver_within_s: int = 86_400
    judge_within_s: int = 86_400
    open_registration: bool = True
    max_members_per_thread: int = 10_000
    max_threads_per_agent: int = 10_000  # current memberships, open or closed
    webhook_allow_hosts: tuple[str, ...] = ()  # [webhooks] allow_hosts as written: host, host:port, host:* (WIRE.md 1.2, D328)
    # WIRE.md 1.3 "A2A": [a2a] auto_adopt_s, push_configs_per_task, the cards' base URL
    a2a_auto_adopt_s: int = 5
    a2a_push_configs_per_task: int = 5
    a2a_public_url: str = "http://127.0.0.1:8741"


def _nothing(obj: str) -> Any:
    return None


def _zero() -> int:
    return 0


def _no_rows(name: str, key: str, limit: int | None = None, party: str | None = None) -> list[Any]:
    return []


class Ctx(msgspec.Struct, frozen=True):
    """``get(obj)`` returns the current state of any object (None if it does not
    exist), all from one consistent snapshot; the actor records the version of
    everything it returns so the write fails if any of it moved (L5).

    ``query(name, key, limit, party)`` answers the named collection queries
    from the same snapshot (:mod:`kungfud.core.queries` defines them). A query
    is no read of an object, so it records no version: a decision that uses one
    reads first the object whose every change touches the collection (the
    Thread for its members, pending responses and live assignments,
    ``ag_….threads`` for an agent's memberships), and that version is its
    guard (D90, D93)."""

    now: int
    caller: AgentState | None
    new_id: Callable[[str], str]
    new_secret: Callable[[], str]
    limits: Limits = Limits()
    get: Callable[[str], Any] = _nothing
    query: Callable[..., list[Any]] = _no_rows
    feed_seq: Callable[[], int] = _zero  # the event feed's newest seq (webhook.set's `since`)

    def governors(self, thread: str, limit: int | None = None) -> list[str]:
        """Current governors of ``thread`` by agent id (the first ``limit``)."""
        return self.query("governors", thread, limit)

    def speakers(self, thread: str, limit: int | None = None) -> list[str]:
        """Current members of ``thread`` who may speak, by agent id."""
        return self.query("speakers", thread, limit)

    def memberships(self, agent: str) -> list[str]:
        """Threads ``agent`` is a member of, by id."""
        return self.query("memberships", agent, None)

    def pending(self, thread: str, agent: str | None = None) -> list[tuple[int, str]]:
        """``(entry, agent)`` of the responses pending in ``thread`` (``agent``'s only)."""
        return self.query("pending", thread, None, agent)

    def live(self, thread: str, party: str | None = None, limit: int | None = None) -> list[Any]:
        """``(assignment, Live)`` of ``thread``'s non-terminal assignments, by id
        (with ``party``: those it created or took)."""
        return self.query("live", thread, limit, party)

    def due(self, thread: str, limit: int | None = None) -> list[tuple[int, str]]:
        """``(due, assignment)`` of ``thread``'s running deadlines, earliest first."""
        return self.query("due", thread, limit)


def counting_ids(start: int = 1) -> Callable[[str], str]:
    """Deterministic ids for tests: ``me_000001``, ``me_000002`` …"""
    counter = itertools.count(start)
    return lambda prefix: f"{prefix}{next(counter):06d}"


def acting(ctx: Ctx) -> str:
    """R4-1: the id of the active agent acting through ``ctx``; otherwise the
    refusal (unauthenticated, or deactivated) is raised."""
    must(require_active(ctx))
    assert ctx.caller is not None  # require_active refused otherwise
    return ctx.caller.agent


def fits(content: bytes, ctx: Ctx, what: str = "content") -> None:
    """L4-6, §12: content over the configured size is refused as ``too_large``,
    writing nothing; the reason says how big it is and the limit."""
    if len(content) > ctx.limits.max_content_bytes:
        raise DecisionRefused(Rejection.too_large(len(content), ctx.limits.max_content_bytes, what))
