"""One rejection type for the whole daemon (WIRE.md "Failure", L2-4).

Every refusal, from frame decoding to protocol decisions to storage faults, is a
:class:`Rejection` carrying a ``code`` (what kind of refusal), a ``reason`` (a
sentence naming only what the caller may read, §12) and ``next`` (what to do now,
DECISIONS.md B7), plus an optional concrete ``hint`` call.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Literal, ParamSpec, TypeVar

import msgspec

__all__ = [
    "Code", "Next", "Hint", "Rejection", "DecisionRefused", "StoreUnavailable", "rejects", "must", "CODES", "NEXT_STEPS", "ECHO_CHARS", "echo",
]

ECHO_CHARS = 64  # client text quoted in a reason is cut to this (WIRE.md "Additions in 1.1")


def echo(text: str) -> str:
    """Client text as a reason quotes it: at most ``ECHO_CHARS`` characters, the
    last one "…" when it was cut. Every reason that quotes what a client sent (a
    field name, a value, a list of ids) goes through here."""
    return text if len(text) <= ECHO_CHARS else text[: ECHO_CHARS - 1] + "…"

Code = Literal[
    "bad_request",
    "unauthenticated",
    "not_found",
    "forbidden",
    "conflict",
    "idempotency_mismatch",
    "rate_limited",
    "too_large",
    "unavailable",
    "internal",
]
Next = Literal["retry", "wait", "revise", "stop"]

CODES: frozenset[str] = frozenset(Code.__args__)  # type: ignore[attr-defined]
NEXT_STEPS: frozenset[str] = frozenset(Next.__args__)  # type: ignore[attr-defined]


class Hint(msgspec.Struct, frozen=True):
    """The concrete next call, when one exists."""

    op: str
    args: dict[str, Any]


class Rejection(msgspec.Struct, frozen=True, omit_defaults=True):
    """A refused action or read. Writes nothing (L2-3)."""

    code: Code
    reason: str
    next: Next
    hint: Hint | None = None
    # The spec rule behind the refusal, when one applies (WIRE.md 1.1 "Wording of
    # rejections"): rule ids live here, never in ``reason``.
    rule: str | None = None

    def __str__(self) -> str:
        return f"{self.code}: {self.reason} (next: {self.next})"

    # Helpers keep call sites short and the code/next pairing consistent.
    @classmethod
    def bad_request(cls, reason: str, rule: str | None = None) -> "Rejection":
        return cls("bad_request", reason, "revise", rule=rule)

    @classmethod
    def not_found(cls, what: str, ident: str) -> "Rejection":
        # Worded identically for "never existed" and "exists but unreadable" (R12-9),
        # and saying so (WIRE.md 1.1 "Wording of rejections").
        return cls("not_found", f"{what} {ident} was not found, or you may not read it", "stop")

    @classmethod
    def forbidden(cls, reason: str, rule: str | None = None) -> "Rejection":
        return cls("forbidden", reason, "stop", rule=rule)

    @classmethod
    def conflict(cls, reason: str, hint: Hint | None = None, rule: str | None = None) -> "Rejection":
        return cls("conflict", reason, "stop", hint, rule)

    @classmethod
    def unavailable(cls, reason: str, rule: str | None = None) -> "Rejection":
        return cls("unavailable", reason, "retry", rule=rule)

    @classmethod
    def rate_limited(cls, reason: str, rule: str | None = None) -> "Rejection":
        return cls("rate_limited", reason, "wait", rule=rule)

    @classmethod
    def too_large(cls, size: int, limit: int, what: str = "content") -> "Rejection":
        """Content over the configured size (L4-6): how big, and the limit."""
        return cls("too_large", f"{what} is {size} bytes encoded; the limit is {limit}", "revise")


class StoreUnavailable(Exception):
    """The store cannot be reached now (a PostgreSQL server down or
    restarting): raised by a backend's reads, answered ``unavailable`` —
    never ``internal`` — by whoever answers the request. The backend recovers
    by itself (a new connection on the next read)."""

    REASON = "the store is unreachable; retry"

    def rejection(self) -> "Rejection":
        return Rejection.unavailable(self.REASON)


class DecisionRefused(Exception):
    """A refusal on its way out of a decision: raised where a guard fails,
    caught once at the decision's boundary (:func:`rejects`), which returns
    its :class:`Rejection`. Nothing is recorded for it (L2-3)."""

    def __init__(self, rejection: Rejection) -> None:
        super().__init__(str(rejection))
        self.rejection = rejection


P = ParamSpec("P")
T = TypeVar("T")


def rejects(decide: Callable[P, T]) -> Callable[P, T | Rejection]:
    """The boundary of a decision: a :class:`DecisionRefused` raised anywhere inside
    becomes the returned :class:`Rejection`, so callers keep seeing
    ``Decision | Rejection``."""

    @functools.wraps(decide)
    def boundary(*args: P.args, **kwargs: P.kwargs) -> T | Rejection:
        try:
            return decide(*args, **kwargs)
        except DecisionRefused as refused:
            return refused.rejection

    return boundary


def must(outcome: T | Rejection) -> T:
    """A helper's result, or its refusal raised: for helpers that return a
    :class:`Rejection` (or ``Rejection | None``) instead of raising."""
    if isinstance(outcome, Rejection):
        raise DecisionRefused(outcome)
    return outcome
