"""The trace context's carriers outside the daemon (WIRE.md 1.3 "Tracing"):
what the client library sends as ``meta`` (OpenTelemetry's current context,
else ``TRACEPARENT``), the MCP bridge's ``_meta.traceparent`` (SEP-414) and
HTTP headers, ``kungfu wake``'s ``TRACEPARENT``, and the ``meta`` an event
keeps (which ``kungfud check`` does not derive)."""

from __future__ import annotations

import types

import pytest

from kungfud import tracing
from kungfud.agent_cli.wake import trace_env
from kungfud.client import trace
from kungfud.mcp.serve import _trace_of

TP = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def test_the_client_sends_opentelemetrys_current_context_when_there_is_one(monkeypatch):
    sdk = pytest.importorskip("opentelemetry.sdk.trace")
    from opentelemetry import trace as api

    monkeypatch.delenv("TRACEPARENT", raising=False)
    assert trace.meta() is None  # OpenTelemetry installed, no span: nothing
    tracer = sdk.TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("caller") as span:
        sc = span.get_span_context()
        got = trace.meta()
    assert got is not None and got["traceparent"].split("-")[1:3] == [f"{sc.trace_id:032x}", f"{sc.span_id:016x}"]
    assert api.get_current_span().get_span_context().is_valid is False
    monkeypatch.setenv("TRACEPARENT", TP)  # no current span: the environment's carrier
    assert trace.meta() == {"traceparent": TP}
    token = trace.INCOMING.set({"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"})
    try:  # what a bridge set for this call wins
        assert trace.meta()["traceparent"].startswith("00-111")
    finally:
        trace.INCOMING.reset(token)


def test_an_mcp_tool_call_takes_meta_traceparent_first_then_the_http_headers():
    headers = {"traceparent": "00-" + "3" * 32 + "-" + "4" * 16 + "-01", "tracestate": "k=v"}
    ctx = types.SimpleNamespace(request=types.SimpleNamespace(headers=headers))
    with_meta = types.SimpleNamespace(meta={"traceparent": TP})
    assert _trace_of(ctx, with_meta) == {"traceparent": TP}
    assert _trace_of(ctx, types.SimpleNamespace(meta=None)) == headers
    assert _trace_of(types.SimpleNamespace(), types.SimpleNamespace(meta=None)) is None


def test_wake_runs_its_command_with_the_newest_events_traceparent():
    batch = [
        {"event": "turn", "seq": 1, "data": {}, "meta": {"traceparent": "00-" + "5" * 32 + "-" + "6" * 16 + "-01"}},
        {"event": "turn", "seq": 2, "data": {}, "meta": {"traceparent": TP, "tracestate": "a=b"}},
        {"event": "outcome", "seq": 3, "data": {}},
    ]
    assert trace_env(batch) == {"TRACEPARENT": TP, "TRACESTATE": "a=b"}
    assert trace_env([{"event": "turn", "seq": 4, "data": {}}]) == {}


def test_an_event_keeps_its_meta_and_check_derives_the_event_without_it():
    event = b'{"event":"turn","data":{"added":[],"ended":[]}}'
    kept = tracing.with_meta([("ag_1", event)], TP)
    assert kept == [("ag_1", event[:-1] + b',"meta":{"traceparent":"' + TP.encode() + b'"}}')]
    assert tracing.meta_of(kept[0][1]) == TP and tracing.meta_of(event) is None
    assert tracing.without_meta(kept[0][1]) == event and tracing.without_meta(event) == event
    assert tracing.with_meta([("ag_1", event)], None) == [("ag_1", event)]
