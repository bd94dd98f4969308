"""How a ``kungfu`` run ends: an exit status per outcome, and the two
exceptions that end a run early (docs/cli.md "Exit codes")."""

from __future__ import annotations

__all__ = ["EXIT_CODES", "UsageError", "CommandFailed"]

#: Exit status per outcome: one per WIRE.md error code, plus the CLI's own.
EXIT_CODES: dict[str, int] = {
    "ok": 0,
    "usage": 2,
    "bad_request": 3,
    "unauthenticated": 4,
    "not_found": 5,
    "forbidden": 6,
    "conflict": 7,
    "idempotency_mismatch": 8,
    "rate_limited": 9,
    "too_large": 10,
    "unavailable": 11,
    "internal": 12,
    "cannot_connect": 13,
    "runaway": 14,  # kungfu wake --max-runs N --per S: more runs than that
}


class UsageError(Exception):
    """A command line, profile or content file the CLI cannot use (exit 2)."""


class CommandFailed(Exception):
    """A refusal that did not come as a WIRE.md error frame (handshake, network)."""

    def __init__(self, code: str, reason: str, next: str):
        super().__init__(reason)
        self.error = {"code": code, "reason": reason, "next": next}
