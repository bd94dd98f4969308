"""The trace context a request carries (WIRE.md 1.3 "Tracing"): the request
field ``meta: {traceparent, tracestate?}``.

In order: the context a bridge set for the call it is making (:data:`INCOMING`:
the MCP bridge sets the MCP request's ``_meta.traceparent`` or its HTTP
headers); else OpenTelemetry's current context, when OpenTelemetry's API is
installed in this process (its own propagator writes the carrier); else the
``TRACEPARENT``/``TRACESTATE`` environment variables, which ``kungfu wake``
sets for the command it runs (OpenTelemetry's environment carrier). Without
OpenTelemetry and without those variables, nothing is sent; nothing here ever
raises."""

from __future__ import annotations

import os
from contextvars import ContextVar
from typing import Any

__all__ = ["INCOMING", "meta", "from_headers"]

#: ``{"traceparent", "tracestate"?}`` for the calls made in this context.
INCOMING: ContextVar[dict | None] = ContextVar("kungfud_trace_meta", default=None)

_propagate: Any = None  # opentelemetry.propagate, False when not installed


def _valid(tp: Any) -> bool:
    return isinstance(tp, str) and 0 < len(tp) <= 128


def from_headers(get: Any) -> dict | None:
    """The ``meta`` of a carrier read by ``get`` (an HTTP request's headers'
    ``get``, or a dict's): its ``traceparent`` and ``tracestate``."""
    try:
        tp = get("traceparent")
        if not _valid(tp):
            return None
        out = {"traceparent": tp}
        ts = get("tracestate")
        if isinstance(ts, str) and ts and len(ts) <= 512:
            out["tracestate"] = ts
        return out
    except Exception:
        return None


def meta() -> dict | None:
    """The trace context to send with a request now, or None."""
    global _propagate
    m = INCOMING.get()
    if m is not None:
        return m
    if _propagate is None:
        try:
            from opentelemetry import propagate  # the API only: a no-op until an SDK is set up

            _propagate = propagate
        except Exception:  # not installed, or broken: never the caller's failure
            _propagate = False
    if _propagate:
        carrier: dict[str, str] = {}
        try:
            _propagate.inject(carrier)
        except Exception:
            carrier = {}
        if "traceparent" in carrier:
            return from_headers(carrier.get)
    return from_headers({"traceparent": os.environ.get("TRACEPARENT"), "tracestate": os.environ.get("TRACESTATE")}.get)
