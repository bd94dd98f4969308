"""Tracing (WIRE.md 1.3 "Tracing", docs/operations.md "Tracing"): the daemon's
OpenTelemetry spans, behind a seam that costs nothing when tracing is off.

Off (the default: no ``[tracing] otlp_endpoint``) nothing here imports
OpenTelemetry, :data:`on` is False and :data:`current` is None; every hook on
the hot path is one line that reads one of them (``if tracing.on:``, ``if
job.span is not None:``), so an action pays an attribute check and no call.
On (:func:`configure`), OpenTelemetry's own API, SDK and OTLP/HTTP exporter do
the work (the ``tracing`` extra): the W3C trace context propagator reads and
writes ``traceparent``/``tracestate``, a batch processor with a bounded queue
exports on its own thread, so a collector that cannot be reached never holds a
reply (what is dropped is counted: :func:`dropped`).

The spans:
- ``kungfud <op>`` (:class:`RequestSpan`) per request on ``/v1``, a child of
  the request's ``meta`` or of the upgrade's ``traceparent`` header, with
  ``kungfud.agent``, ``kungfud.op``, ``kungfud.outcome`` and
  ``kungfud.replayed``; its children ``kungfud.decide`` (the actor's decision,
  stamped on the actor thread) and ``kungfud.commit`` (the group commit it
  joined, stamped on the writer thread), made when the request ends; the
  first request of a group commit to end makes the commit's span, and every
  request of that commit links to it.
- ``kungfud deadline`` per deadline that fires (:func:`deadline`).
- ``kungfud webhook.deliver`` per webhook POST and ``kungfud a2a.push`` per
  A2A push POST (:func:`delivery`, :func:`push`): a span of its own, linked
  to the span of the action that made the event, whose ``traceparent`` the
  POST carries.
- For another HTTP entry (A2A): a request frame handed to the front door
  with ``meta`` = :func:`frame_meta` of its headers gets the same request span;
  an entry that does not go through the front door starts one with
  :func:`inbound` and ends it with :meth:`RequestSpan.finish`.

The trace context of the action that made a fact travels with the Item the
writer plans (``Item.trace``) and is kept in the event (``meta.traceparent``).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any, Mapping

__all__ = [
    "on", "current", "TracingUnavailable", "configure", "shutdown", "RequestSpan", "request", "inbound",
    "deadline", "delivery", "push", "Delivery", "dropped", "meta_of", "INSTALL", "missing", "finishing", "with_meta", "without_meta", "frame_meta",
]

log = logging.getLogger("kungfud.tracing")

#: True once :func:`configure` set up an exporter. Hooks test it first.
on = False
#: The request span being handled on the event loop (only while tracing is on).
current: "RequestSpan | None" = None

INSTALL = "pip install 'kungfud[tracing]'"

_tracer: Any = None
_prop: Any = None  # the W3C TraceContext propagator (OpenTelemetry's)
_api: Any = None  # opentelemetry.trace
_provider: Any = None
_processor: Any = None
_counts = {"queue_full": 0, "export_failed": 0}
_lock = threading.Lock()


class TracingUnavailable(RuntimeError):
    """``[tracing] otlp_endpoint`` is set but the ``tracing`` extra is not installed."""


def dropped() -> int:
    """Spans dropped so far: the export queue was full, or the collector
    refused or could not be reached (``kungfud_trace_spans_dropped_total``)."""
    return _counts["queue_full"] + _counts["export_failed"]


def missing() -> str | None:
    """Why tracing cannot be turned on in this process (the extra is not
    installed), or None. Looks for the modules without importing them."""
    import importlib.util

    for name in ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http"):
        try:
            found = importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            return f"[tracing] otlp_endpoint is set but OpenTelemetry is not installed ({name}); install the tracing extra: {INSTALL}"
    return None


def configure(endpoint: str, sample_ratio: float, node: str, version: str) -> None:
    """Turn tracing on: spans to ``<endpoint>/v1/traces`` over OTLP/HTTP,
    sampled parent-based at ``sample_ratio``, with ``service.name`` and the
    node in the resource. OpenTelemetry's ``OTEL_*`` variables apply as its
    SDK reads them (``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``,
    ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` and ``_HEADERS``/``_TIMEOUT``,
    ``OTEL_TRACES_SAMPLER``, ``OTEL_BSP_*``). Raises :class:`TracingUnavailable`
    naming the extra when OpenTelemetry's SDK or exporter is missing."""
    global on, _tracer, _prop, _api, _provider, _processor
    try:
        from opentelemetry import trace as api
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExportResult
        from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
    except ImportError as e:
        raise TracingUnavailable(
            f"[tracing] otlp_endpoint is set but OpenTelemetry is not installed ({e.name or e}); "
            f"install the tracing extra: {INSTALL}"
        ) from None

    class _Exporter(OTLPSpanExporter):
        def export(self, spans: Any) -> Any:
            result = super().export(spans)
            if result != SpanExportResult.SUCCESS:
                _counts["export_failed"] += len(spans)
            return result

    class _Processor(BatchSpanProcessor):
        def on_end(self, span: Any) -> None:
            q = getattr(getattr(self, "_batch_processor", None), "_queue", None)
            if q is not None and q.maxlen is not None and len(q) >= q.maxlen:
                _counts["queue_full"] += 1  # the bounded queue drops its oldest span
            super().on_end(span)

    attrs: dict[str, Any] = {"service.version": version, "kungfud.node": node, "service.instance.id": node}
    if not os.environ.get("OTEL_SERVICE_NAME") and "service.name=" not in os.environ.get("OTEL_RESOURCE_ATTRIBUTES", ""):
        attrs["service.name"] = "kungfud"
    sampler = None if os.environ.get("OTEL_TRACES_SAMPLER") else ParentBased(TraceIdRatioBased(sample_ratio))
    provider = TracerProvider(resource=Resource.create(attrs), sampler=sampler, shutdown_on_exit=False)
    traces = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or endpoint.rstrip("/") + "/v1/traces"
    processor = _Processor(_Exporter(endpoint=traces))
    try:  # a collector that stays down: its warnings at most once per 20 s each, as the SDK's queue does
        from opentelemetry.sdk._shared_internal import DuplicateFilter

        logging.getLogger(OTLPSpanExporter.__module__).addFilter(DuplicateFilter())
    except ImportError:
        pass
    provider.add_span_processor(processor)
    _api, _prop, _provider, _processor = api, TraceContextTextMapPropagator(), provider, processor
    _tracer = provider.get_tracer("kungfud", version)
    on = True


def shutdown(timeout_s: float = 3.0) -> None:
    """Export what is queued, waiting at most ``timeout_s`` (an unreachable
    collector never holds the daemon's exit)."""
    global on
    if _provider is None:
        return
    on = False
    t = threading.Thread(target=_provider.shutdown, name="kungfud-tracing-shutdown", daemon=True)
    t.start()
    t.join(timeout_s)


# --- context ------------------------------------------------------------------


def _context(traceparent: str | None, tracestate: str | None = None) -> Any:
    """The OpenTelemetry context a carrier names (an empty one for none or an invalid one)."""
    if not traceparent:
        return None
    carrier = {"traceparent": traceparent}
    if tracestate:
        carrier["tracestate"] = tracestate
    return _prop.extract(carrier)


def _carrier(span: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    _prop.inject(out, context=_api.set_span_in_context(span))
    return out


def _link_to(traceparent: str | None) -> list:
    ctx = _context(traceparent)
    if ctx is None:
        return []
    sc = _api.get_current_span(ctx).get_span_context()
    return [_api.Link(sc)] if sc.is_valid else []


def meta_of(event: bytes) -> str | None:
    """The ``meta.traceparent`` a stored event carries (WIRE.md 1.3), if any."""
    at = event.rfind(b'"traceparent":"')
    if at < 0:
        return None
    start = at + 15
    end = event.find(b'"', start)
    return event[start:end].decode("ascii", "replace") if end > 0 else None


def with_meta(rendered: list[tuple[str, bytes]], trace: Any) -> list[tuple[str, bytes]]:
    """The events of one fact (``(agent, event JSON)``), each keeping the
    ``traceparent`` of the span that made the fact as ``meta`` (WIRE.md 1.3:
    stored with the event, so the link holds across restarts and nodes).
    ``trace``: the Item's (None, a traceparent, or a :class:`RequestSpan`,
    whose traceparent is made only here, for a fact with events)."""
    if not trace:
        return rendered
    traceparent = trace if isinstance(trace, str) else trace.traceparent
    if not traceparent:
        return rendered
    tail = b',"meta":{"traceparent":"' + traceparent.encode("ascii", "replace") + b'"}}'
    # "*": the open-Task stream (task_offered, stored once for every subscriber) keeps none.
    return [(agent, event if agent == "*" else event[:-1] + tail) for agent, event in rendered]


_META_TAIL = None


def without_meta(event: bytes) -> bytes:
    """A stored event without the ``meta`` :func:`with_meta` kept (what
    ``kungfud check`` derives from the log alone)."""
    global _META_TAIL
    if not event.endswith(b'"}}') or b',"meta":{"traceparent":"' not in event:
        return event
    if _META_TAIL is None:
        import re

        _META_TAIL = re.compile(rb',"meta":\{"traceparent":"[^"]*"\}\}$')
    return _META_TAIL.sub(b"}", event)


# --- requests -----------------------------------------------------------------


class RequestSpan:
    """One request's span and the stamps of its decision and commit (taken
    on the actor's and the writer's threads, turned into spans at the end)."""

    __slots__ = ("span", "op", "agent", "outcome", "replayed", "d0", "d1", "commit", "_tp")

    def __init__(self, op: str, parent: Any, kind: Any = None):
        self.span = _tracer.start_span(f"kungfud {op}", context=parent, kind=kind or _api.SpanKind.SERVER)
        self.op = op
        self.agent: str | None = None
        self.outcome = "ok"
        self.replayed = False
        self.d0 = self.d1 = 0
        self.commit: tuple | None = None
        self._tp: str | None = None

    @property
    def trace_id(self) -> str:
        return format(self.span.get_span_context().trace_id, "032x")

    @property
    def traceparent(self) -> str:
        """This span's ``traceparent`` (the events of its facts keep it)."""
        if self._tp is None:
            self._tp = _carrier(self.span).get("traceparent", "")
        return self._tp

    def deciding(self) -> None:  # actor thread
        if not self.d0:
            self.d0 = time.time_ns()

    def decided(self) -> None:  # actor thread
        self.d1 = time.time_ns()

    def replied(self, writer: Any, outcome: Any) -> None:  # the thread that answers: the writer's for a commit
        if type(outcome).__name__ == "Committed":
            self.commit = _commit_of(writer)

    def finish(self, agent: str | None = None, outcome: str | None = None, replayed: bool | None = None) -> None:
        """End the span (event loop), with its children."""
        span = self.span
        if agent is not None:
            self.agent = agent
        if outcome is not None:
            self.outcome = outcome
        if replayed is not None:
            self.replayed = replayed
        if span.is_recording():
            if self.agent is not None:
                span.set_attribute("kungfud.agent", self.agent)
            span.set_attribute("kungfud.op", self.op)
            span.set_attribute("kungfud.outcome", self.outcome)
            span.set_attribute("kungfud.replayed", self.replayed)
            if self.outcome in ("internal", "unavailable"):
                span.set_status(_api.Status(_api.StatusCode.ERROR, self.outcome))
            parent = _api.set_span_in_context(span)
            if self.d0:
                _tracer.start_span("kungfud.decide", context=parent, start_time=self.d0).end(self.d1 or time.time_ns())
            if self.commit is not None:
                batch, began, ended, actions = self.commit
                child = _tracer.start_span("kungfud.commit", context=parent, start_time=began)
                child.set_attribute("kungfud.commit.actions", actions)
                child.end(ended)
                span.add_link(_group_commit(batch, child))
        span.end()


_commit_lock = threading.Lock()
_last_commit: list[Any] = [None, 0, 0, 0, 0]  # writer, batch number, began, ended, actions
_commit_spans: dict[tuple, Any] = {}  # (writer, batch) -> the span context of the group commit's span


def _commit_of(writer: Any) -> tuple:
    """(batch key, began, ended, actions) of the group commit ``writer`` just
    made (writer thread: its replies follow its commit)."""
    n = getattr(writer, "batches", 0)
    with _commit_lock:
        last = _last_commit
        if last[0] is not writer or last[1] != n:
            now = time.time_ns()
            last[:] = [writer, n, getattr(writer, "began_ns", 0) or now, now, getattr(writer, "batch_size", 0)]
        return ((id(writer), n), last[2], last[3], last[4])


def _group_commit(batch: tuple, child: Any) -> Any:
    """The span context of the group commit's span: the first request of the
    commit to end made it (``child``); the others link to it."""
    with _commit_lock:
        sc = _commit_spans.get(batch)
        if sc is None:
            sc = _commit_spans[batch] = child.get_span_context()
            if len(_commit_spans) > 256:
                for k in list(_commit_spans)[:128]:
                    del _commit_spans[k]
        return sc


def request(handle: Any, conn: Any, env: Any) -> None:
    """Handle a ``/v1`` request (``handle(conn, env)``) inside its span: the
    parent is the request's ``meta`` or the upgrade's ``traceparent``. A
    request that ends now (a read, a refusal) ends its span now; an action
    taken in flight hands it to its ticket (``current`` read by the server)."""
    global current
    meta = getattr(env, "meta", None)
    if meta is not None:
        parent = _context(meta.traceparent, meta.tracestate)
    else:
        headers = getattr(getattr(getattr(conn, "ws", None), "request", None), "headers", None)
        parent = _context(headers.get("traceparent"), headers.get("tracestate")) if headers is not None else None
    rs = current = RequestSpan(env.op, parent)
    before = conn.in_flight
    try:
        handle(conn, env)
    finally:
        current = None
        if conn.in_flight <= before:  # answered already (an action in flight is ended by its ticket)
            rs.finish(conn.agent)


def finishing(rs: RequestSpan, finish: Any, *args: Any) -> None:
    """Run ``finish(*args)`` (the server's answer to an action) with ``rs``
    current, then end it."""
    global current
    current = rs
    if type(args[-1]).__name__ == "Replayed":
        rs.replayed = True
    try:
        finish(*args)
    finally:
        current = None
        rs.finish(getattr(args[0], "caller", None))


def frame_meta(headers: Mapping[str, str] | None) -> dict[str, str] | None:
    """The ``meta`` of a request frame made from an HTTP request's headers
    (``traceparent``, ``tracestate``): what the A2A endpoint puts in the frame
    it hands to the front door (``Server.call``), so the request's span is a
    child of the HTTP caller's. Costs nothing of OpenTelemetry; None when the
    headers carry no ``traceparent``."""
    if headers is None:
        return None
    tp = headers.get("traceparent")
    if not isinstance(tp, str) or not 0 < len(tp) <= 128:
        return None
    ts = headers.get("tracestate")
    return {"traceparent": tp, **({"tracestate": ts} if isinstance(ts, str) and 0 < len(ts) <= 512 else {})}


def inbound(op: str, headers: Mapping[str, str] | None, agent: str | None = None) -> RequestSpan | None:
    """For another HTTP entry (A2A): the request span of ``op``, a child of
    the request's ``traceparent``/``tracestate`` headers; None when tracing
    is off. End it with ``span.finish(agent, outcome, replayed)``; give it to
    the action's Job (``job.span``) so its decision and commit are stamped
    and the events of its facts keep its context."""
    if not on:
        return None
    get = headers.get if headers is not None else (lambda _k: None)
    rs = RequestSpan(op, _context(get("traceparent"), get("tracestate")))
    rs.agent = agent
    return rs


# --- deadlines and deliveries ---------------------------------------------------


def deadline(obj: str, due: Any = None) -> str:
    """A ``kungfud deadline`` span for a deadline of ``obj`` that fires now;
    its ``traceparent`` (which the events of the expiry keep)."""
    span = _tracer.start_span("kungfud deadline", kind=_api.SpanKind.INTERNAL)
    span.set_attribute("kungfud.object", obj)
    tp = _carrier(span).get("traceparent", "")
    span.end()
    return tp


class Delivery:
    """One POST attempt's span (``kungfud webhook.deliver``, ``kungfud
    a2a.push``): ``headers`` go on the POST, :meth:`end` with its error."""

    __slots__ = ("span", "headers")

    def __init__(self, name: str, cause: str | None, attributes: dict[str, Any]):
        self.span = _tracer.start_span(
            name, context=_api.set_span_in_context(_api.INVALID_SPAN), kind=_api.SpanKind.CLIENT,
            links=_link_to(cause), attributes=attributes,
        )
        self.headers = _carrier(self.span)

    def end(self, error: str | None) -> None:
        span = self.span
        span.set_attribute("kungfud.outcome", "ok" if error is None else "failed")
        if error is not None:
            span.set_attribute("error.type", error[:120])
            span.set_status(_api.Status(_api.StatusCode.ERROR, error[:120]))
        span.end()


def delivery(agent: str, seq: int, event: bytes) -> Delivery:
    """The span of one webhook POST of ``agent``'s event ``seq``, linked to
    the action whose fact made the event (the event's ``meta.traceparent``)."""
    kind = event[10 : event.find(b'"', 10)].decode("ascii", "replace") if event.startswith(b'{"event":"') else ""
    return Delivery(
        "kungfud webhook.deliver", meta_of(event),
        {"kungfud.agent": agent, "kungfud.seq": seq, "kungfud.event": kind},
    )


def push(task: str, config: str, cause: str | None = None) -> Delivery | None:
    """For the A2A push sender: the span of one push POST for ``task`` by push
    config ``config``, linked to ``cause`` (the ``traceparent`` the event of
    the change keeps, :func:`meta_of`); None when tracing is off. Put
    ``span.headers`` on the POST and call ``span.end(error or None)``."""
    if not on:
        return None
    return Delivery("kungfud a2a.push", cause, {"kungfud.task": task, "kungfud.push_config": config})
