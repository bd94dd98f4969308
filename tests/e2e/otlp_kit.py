"""An OTLP/HTTP collector for the tests: a small HTTP/1.1 server on 127.0.0.1
in the test's event loop that takes ``POST /v1/traces`` (protobuf), decodes it
with opentelemetry-proto (which the exporter depends on) and keeps every
span; plus the daemon config that exports to it."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind is not None else None


@dataclass
class Span:
    name: str
    trace_id: str
    span_id: str
    parent: str  # "" for a root span
    kind: int
    attributes: dict[str, Any]
    links: list[tuple[str, str]]  # (trace id, span id)
    resource: dict[str, Any]
    start_ns: int
    end_ns: int
    status: int = 0
    path: str = field(default="")


class Collector:
    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.paths: list[str] = []
        self.arrived = asyncio.Event()
        self._server: asyncio.AbstractServer | None = None
        self.port = 0

    async def start(self) -> "Collector":
        self._server = await asyncio.start_server(self._conn, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    @property
    def endpoint(self) -> str:
        """The base URL, as ``[tracing] otlp_endpoint`` takes it."""
        return f"http://127.0.0.1:{self.port}"

    def config(self, extra: str = "") -> str:
        return f'[tracing]\notlp_endpoint = "{self.endpoint}"\n{extra}'

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()

    def named(self, name: str) -> list[Span]:
        return [s for s in self.spans if s.name == name]

    def by_id(self, span_id: str) -> Span | None:
        return next((s for s in self.spans if s.span_id == span_id), None)

    def children(self, span: Span) -> list[Span]:
        return [s for s in self.spans if s.parent == span.span_id]

    async def wait(self, pred, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not pred():
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"collector: condition not met within {timeout} s; got {[s.name for s in self.spans]}")
            self.arrived.clear()
            try:
                await asyncio.wait_for(self.arrived.wait(), min(left, 0.2))
            except asyncio.TimeoutError:
                pass

    def _take(self, path: str, body: bytes) -> None:
        req = ExportTraceServiceRequest()
        req.ParseFromString(body)
        for rs in req.resource_spans:
            resource = {a.key: _value(a.value) for a in rs.resource.attributes}
            for ss in rs.scope_spans:
                for s in ss.spans:
                    self.spans.append(Span(
                        s.name, s.trace_id.hex(), s.span_id.hex(), s.parent_span_id.hex(), s.kind,
                        {a.key: _value(a.value) for a in s.attributes},
                        [(link.trace_id.hex(), link.span_id.hex()) for link in s.links],
                        resource, s.start_time_unix_nano, s.end_time_unix_nano, s.status.code, path,
                    ))

    async def _conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                path = lines[0].split(" ")[1] if " " in lines[0] else ""
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        k, v = line.split(":", 1)
                        headers[k.strip().lower()] = v.strip()
                if headers.get("transfer-encoding", "").lower() == "chunked":
                    body = b""
                    while True:
                        size = int((await reader.readuntil(b"\r\n")).strip(), 16)
                        chunk = await reader.readexactly(size + 2)
                        if size == 0:
                            break
                        body += chunk[:-2]
                else:
                    body = await reader.readexactly(int(headers.get("content-length", "0")))
                if headers.get("content-encoding") == "gzip":
                    import gzip

                    body = gzip.decompress(body)
                self.paths.append(path)
                self._take(path, body)
                self.arrived.set()
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError, asyncio.CancelledError):
            pass
        finally:
            writer.close()
