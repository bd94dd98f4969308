"""The OpenTelemetry side of :mod:`kungfud.tracing`: imported only when
``[tracing] otlp_endpoint`` turns tracing on (:func:`kungfud.tracing.configure`),
so nothing here is loaded while tracing is off (docs/decisions.md D335, D336).

:class:`Sdk` sets up OpenTelemetry's own SDK — a tracer provider with the
resource and the parent-based sampler, the OTLP/HTTP exporter behind a bounded
batch processor, the W3C propagator — and makes a request's spans lean
(D415): a span's context is decided with the tracer's own sampler and id
generator, and finished spans go to the batch processor as the SDK's
``ReadableSpan``, with no live ``Span`` between.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from opentelemetry import trace as api
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

__all__ = ["Sdk", "QUEUE", "BATCH"]

QUEUE = 8192  # spans the export queue holds (D341, D415; OTEL_BSP_MAX_QUEUE_SIZE over it)
BATCH = 1024  # spans per export POST (OTEL_BSP_MAX_EXPORT_BATCH_SIZE over it)


class _Resource(Resource):
    """The resource, its hash made once: the exporter groups every span by
    it, and ``Resource.__hash__`` serializes its attributes each time."""

    def __init__(self, made: Resource):
        super().__init__(made.attributes, made.schema_url)
        self._hash = Resource.__hash__(made)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return self is other or Resource.__eq__(self, other)


class Sdk:
    """OpenTelemetry's SDK as kungfud uses it; ``counts`` (``queue_full``,
    ``export_failed``) counts the spans dropped (the SDK's own counters are
    private)."""

    def __init__(self, endpoint: str, sample_ratio: float, node: str, version: str, counts: dict[str, int]):
        class _Exporter(OTLPSpanExporter):
            def export(self, spans: Any) -> Any:
                result = super().export(spans)
                if result != SpanExportResult.SUCCESS:
                    counts["export_failed"] += len(spans)
                return result

        class _Processor(BatchSpanProcessor):
            def __init__(self, exporter: Any):
                # D415: a larger queue and batch than the SDK's defaults (2048, 512) unless
                # OTEL_BSP_* say: every request makes three spans, and each export is an HTTP POST.
                env = os.environ.get
                super().__init__(
                    exporter,
                    max_queue_size=None if env("OTEL_BSP_MAX_QUEUE_SIZE") else QUEUE,
                    max_export_batch_size=None if env("OTEL_BSP_MAX_EXPORT_BATCH_SIZE") else BATCH,
                )
                q = getattr(getattr(self, "_batch_processor", None), "_queue", None)
                self._kf_queue = q if q is not None and q.maxlen is not None else None

            def on_end(self, span: Any) -> None:
                q = self._kf_queue
                if q is not None and len(q) >= q.maxlen:  # type: ignore[operator]
                    counts["queue_full"] += 1  # the bounded queue drops its oldest span
                super().on_end(span)

        attrs: dict[str, Any] = {"service.version": version, "kungfud.node": node, "service.instance.id": node}
        if not os.environ.get("OTEL_SERVICE_NAME") and "service.name=" not in os.environ.get("OTEL_RESOURCE_ATTRIBUTES", ""):
            attrs["service.name"] = "kungfud"
        sampler = None if os.environ.get("OTEL_TRACES_SAMPLER") else ParentBased(TraceIdRatioBased(sample_ratio))
        self.resource = _Resource(Resource.create(attrs))
        self.provider = TracerProvider(resource=self.resource, sampler=sampler, shutdown_on_exit=False)
        traces = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or endpoint.rstrip("/") + "/v1/traces"
        self.processor = _Processor(_Exporter(endpoint=traces))
        try:  # a collector that stays down: its warnings at most once per 20 s each, as the SDK's queue does
            from opentelemetry.sdk._shared_internal import DuplicateFilter

            logging.getLogger(OTLPSpanExporter.__module__).addFilter(DuplicateFilter())
        except ImportError:
            pass
        self.provider.add_span_processor(self.processor)
        self.api, self.prop = api, TraceContextTextMapPropagator()
        self.tracer: Any = self.provider.get_tracer("kungfud", version)
        self._scope = self.tracer._instrumentation_scope
        self._ids = self.tracer.id_generator
        self._on_end = self.processor.on_end

    def context(self, parent: Any, name: str, kind: Any) -> tuple:
        """What the SDK's ``Tracer.start_span`` decides for a span ``name``
        under ``parent`` (a Context or None), with the tracer's own sampler
        and id generator: (its SpanContext, the parent's or None, whether it
        records, the sampler's attributes)."""
        psc = api.get_current_span(parent).get_span_context() if parent is not None else None
        if psc is None or not psc.is_valid:
            psc = None
            trace_id = self._ids.generate_trace_id()
            random_id = self._ids.is_trace_id_random()
        else:
            trace_id = psc.trace_id
            random_id = psc.trace_flags.random_trace_id
        result = self.tracer.sampler.should_sample(parent, trace_id, name, kind)
        flags = api.TraceFlags.SAMPLED if result.decision.is_sampled() else api.TraceFlags.DEFAULT
        if random_id:
            flags |= api.TraceFlags.RANDOM_TRACE_ID
        sc = api.SpanContext(
            trace_id, self._ids.generate_span_id(), is_remote=False,
            trace_flags=api.TraceFlags(flags), trace_state=result.trace_state,
        )
        return sc, psc, result.decision.is_recording(), dict(result.attributes or {})

    def child(self, sc: Any) -> Any:
        """A new span's context in the trace of ``sc``, sampled as it is."""
        return api.SpanContext(sc.trace_id, self._ids.generate_span_id(), False, sc.trace_flags, sc.trace_state)

    def emit(self, name: str, sc: Any, parent: Any, attrs: Any, links: tuple, kind: Any, status: Any, start: int, end: int) -> None:
        """Hand a finished span to the batch processor, as the SDK hands its
        own (``kind`` None: internal; ``status`` None: unset, left out)."""
        self._on_end(ReadableSpan(
            name, sc, parent, self.resource, attrs, (), links, kind or api.SpanKind.INTERNAL, None, status or _UNSET,
            start, end, self._scope,
        ))

    @staticmethod
    def error(outcome: str) -> Any:
        return api.Status(api.StatusCode.ERROR, outcome)


_UNSET = None  # a span's status when it is not an error: left out (OTLP's default), nothing to encode
