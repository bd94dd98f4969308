"""The error table of WIRE.md 1.3 "A2A" → "Errors": a Kungfu rejection (or one
of A2A's own errors) as a JSON-RPC error object and as an HTTP+JSON error.

The JSON-RPC codes and A2A's reasons are the a2a-sdk's own
(``JSON_RPC_ERROR_CODE_MAP``, ``A2A_ERROR_MAPPING``); what is ours is the rest
of the table: ``error.message`` begins with the WIRE code, ``error.data`` is a
list of one ``google.rpc.ErrorInfo`` in the ``kungfud`` domain whose metadata
holds the rejection's ``code``, ``next``, ``hint`` and ``rule``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from a2a.utils.errors import (
    A2A_ERROR_MAPPING,
    JSON_RPC_ERROR_CODE_MAP,
    A2AError,
    ErrorMapping,
    InvalidParamsError,
    InvalidRequestError,
    JSONParseError,
    MethodNotFoundError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
    VersionNotSupportedError,
)

__all__ = ["Failure", "from_rejection", "a2a_error", "ERROR_INFO"]

ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
DOMAIN = "kungfud"

# WIRE code → (JSON-RPC code, HTTP status, google.rpc status) for the codes that
# are not one of A2A's own errors.
_WIRE: dict[str, tuple[int, int, str]] = {
    "bad_request": (-32602, 400, "INVALID_ARGUMENT"),
    "too_large": (-32602, 413, "INVALID_ARGUMENT"),
    "idempotency_mismatch": (-32602, 409, "ALREADY_EXISTS"),
    "forbidden": (-32000, 403, "PERMISSION_DENIED"),
    "conflict": (-32000, 409, "ABORTED"),
    "rate_limited": (-32000, 429, "RESOURCE_EXHAUSTED"),
    "unavailable": (-32603, 503, "UNAVAILABLE"),
    "internal": (-32603, 500, "INTERNAL"),
}


@dataclass(eq=False)
class Failure(Exception):
    """One answer that is an error: what both bindings need to say it."""

    rpc_code: int
    http_status: int
    grpc_status: str
    reason: str
    message: str
    metadata: dict[str, Any]
    retry_after: int | None = None

    def __post_init__(self) -> None:
        super().__init__(self.message)

    def details(self) -> list[dict[str, Any]]:
        return [{"@type": ERROR_INFO, "reason": self.reason, "domain": DOMAIN, "metadata": self.metadata}]

    def rpc(self, req_id: Any) -> dict[str, Any]:
        """The JSON-RPC response (answered with HTTP 200)."""
        return {"jsonrpc": "2.0", "id": req_id, "error": {"code": self.rpc_code, "message": self.message, "data": self.details()}}

    def rest(self) -> dict[str, Any]:
        """The HTTP+JSON body (a google.rpc.Status, as the a2a-sdk's REST binding answers)."""
        return {"error": {"code": self.http_status, "status": self.grpc_status, "message": self.message, "details": self.details()}}

    def headers(self) -> dict[str, str]:
        return {} if self.retry_after is None else {"retry-after": str(self.retry_after)}


def _meta(err: dict[str, Any]) -> dict[str, Any]:
    meta = {"code": err["code"], "next": err["next"]}
    for k in ("hint", "rule"):
        if err.get(k) is not None:
            meta[k] = err[k]
    return meta


def a2a_error(kind: type[A2AError], code: str, reason: str, next_: str, hint: Any = None, rule: str | None = None) -> Failure:
    """One of A2A's own errors (its JSON-RPC code, HTTP status and reason), worded as a rejection."""
    mapping = A2A_ERROR_MAPPING.get(kind) or ErrorMapping(400, "INVALID_ARGUMENT", "PARSE_ERROR")  # JSONParseError has none
    err = {"code": code, "next": next_, "hint": hint, "rule": rule}
    return Failure(
        JSON_RPC_ERROR_CODE_MAP[kind], mapping.http_code, mapping.grpc_status, mapping.reason, f"{code}: {reason}",
        _meta(err),
    )


#: The reason prefixes of the ops' rejections that are A2A's own errors
#: (docs/wire.md "A2A ops"; the ops' core, kungfud/core/a2a.py, says them).
_SPECIAL: dict[str, type[A2AError]] = {
    "task not cancelable: ": TaskNotCancelableError,  # a delivery awaits the client's verdict
    "unsupported operation: ": UnsupportedOperationError,  # taskId without a verdict, or a terminal Task
}


def from_rejection(err: dict[str, Any]) -> Failure:
    """A rejection (``{code, reason, next, hint?, rule?}``) as an A2A error."""
    code = err.get("code", "internal")
    reason = err.get("reason", "")
    kind = next((k for prefix, k in _SPECIAL.items() if reason.startswith(prefix)), None)
    if code == "not_found":
        kind = TaskNotFoundError
    if kind is not None:
        return a2a_error(kind, code, err.get("reason", ""), err.get("next", "stop"), err.get("hint"), err.get("rule"))
    rpc, http, grpc = _WIRE.get(code, _WIRE["internal"])
    reason = "INVALID_PARAMS" if code == "bad_request" else code.upper()
    retry = _retry_after(err.get("reason", "")) if code == "rate_limited" else None
    return Failure(rpc, http, grpc, reason, f"{code}: {err.get('reason', '')}", _meta(err), retry)


def _retry_after(reason: str) -> int:
    """Seconds a rate-limited caller should wait: what the reason says ("retry in N s"), else 1."""
    tail = reason.rpartition("retry in ")[2].split(" ")[0]
    try:
        return max(1, int(float(tail) + 0.999))
    except ValueError:
        return 1


def version_error(seen: str) -> Failure:
    said = f"A2A-Version {seen!r}" if seen else "no A2A-Version (read as 0.3)"
    return a2a_error(
        VersionNotSupportedError, "bad_request",
        f"{said} is not served; this endpoint speaks A2A 1.0: send the header A2A-Version: 1.0", "revise",
    )


def invalid_params(why: str) -> Failure:
    return a2a_error(InvalidParamsError, "bad_request", why, "revise")


def invalid_request(why: str) -> Failure:
    return a2a_error(InvalidRequestError, "bad_request", why, "revise")


def parse_error(why: str) -> Failure:
    return a2a_error(JSONParseError, "bad_request", why, "revise")


def method_not_found(method: str) -> Failure:
    return a2a_error(
        MethodNotFoundError, "not_found",
        f"method {method[:64]!r} is not served (A2A 1.0 names only; gRPC, 0.3 names and GetExtendedAgentCard are not)",
        "revise",
    )


def unsupported(why: str, hint: Any = None) -> Failure:
    return a2a_error(UnsupportedOperationError, "bad_request", why, "revise", hint)
