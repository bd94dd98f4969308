"""Render docs/img/trace.svg: one multi-agent trace, drawn from the spans a
real daemon exported (docs/operations.md "Tracing").

    python docs/trace_diagram.py          # needs the tracing extra

It starts a daemon with ``[tracing] otlp_endpoint`` pointing at an OTLP/HTTP
collector in this process (tests/e2e/otlp_kit.py), and plays the trace the
tests follow: a lead (its own span, OpenTelemetry SDK in this process) posts
an assignment; the worker's webhook hears it (its ``webhook.deliver`` span
links to the post); the worker, woken with the event's ``meta.traceparent``
as ``kungfu wake`` passes it in ``TRACEPARENT``, takes and delivers in the
same trace; the lead judges. Every bar is an exported span (the waterfall of a
trace viewer); a dashed line is a span link.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
from html import escape
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kungfud.client import Client  # noqa: E402
from kungfud.client.trace import INCOMING  # noqa: E402
from tests.e2e.otlp_kit import Collector, Span  # noqa: E402
from tests.e2e.webhook_kit import Receiver  # noqa: E402

OUT = ROOT / "docs" / "img" / "trace.svg"


async def _scenario(col: Collector, url: str, rx: Receiver) -> tuple[str, dict[str, str]]:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": "lead-agent"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=col.endpoint + "/v1/traces"), schedule_delay_millis=100))
    tracer = provider.get_tracer("lead")
    async with await Client.connect(url) as c:
        r = await c.act("agent.register", {"content": {"name": "lead"}})
        lead_id, kl = r["agent"], r["key"]
        r = await c.act("agent.register", {"content": {"name": "worker"}})
        worker_id, kw = r["agent"], r["key"]
    lead, worker = await Client.connect(url, kl), await Client.connect(url, kw)
    t = (await lead.act("thread.create", {"content": {"title": "release notes"}}))["thread"]
    g = await lead.act("thread.admit", {"thread": t, "role": "speaker"})
    await worker.act("thread.join", {"token": g["token"]})
    await worker.act("webhook.set", {"url": rx.url})
    sub = await worker.subscribe()
    with tracer.start_as_current_span("lead: hand out the release notes") as root:
        post = await lead.act("thread.post", {"thread": t, "content": {"brief": "notes"}, "assign": {
            "to": worker_id, "content": {"criteria": "one page"}}})
        trace_id = format(root.get_span_context().trace_id, "032x")
    event = await asyncio.wait_for(sub.__anext__(), 30)
    while event["event"] != "opportunity":
        event = await asyncio.wait_for(sub.__anext__(), 30)
    token = INCOMING.set(event["meta"])  # what kungfu wake hands its command as TRACEPARENT
    try:
        await worker.act("assignment.take", {"assignment": post["assignment"]})
        await worker.act("assignment.deliver", {"assignment": post["assignment"], "content": {"text": "done"}})
    finally:
        INCOMING.reset(token)
    token = INCOMING.set((await _turn_event(lead)).get("meta"))  # the lead, woken by the delivery, judges
    try:
        await lead.act("assignment.judge", {"assignment": post["assignment"], "verdict": "adopt"})
    finally:
        INCOMING.reset(token)
    await rx.wait(lambda: len(rx.ok()) >= 1)
    await asyncio.get_running_loop().run_in_executor(None, provider.shutdown)  # its exports reach this loop's collector
    for c in (lead, worker):
        await c.close()
    return trace_id, {lead_id: "lead", worker_id: "worker"}


async def _turn_event(lead: Client) -> dict:
    """The lead's event of the delivery (a judge obligation), from its feed."""
    sub = await lead.subscribe(since=0)
    while True:
        ev = await asyncio.wait_for(sub.__anext__(), 30)
        if ev["event"] == "turn" and any(a.get("obligation") == "judge" for a in ev["data"].get("added", [])):
            return ev


def _svg(spans: list[Span], trace_id: str, names: dict[str, str]) -> str:
    main = [s for s in spans if s.trace_id == trace_id]
    ids = {s.span_id for s in main}
    linked = [s for s in spans if s.trace_id != trace_id and any(sid in ids for _, sid in s.links)]
    by_parent: dict[str, list[Span]] = {}
    for s in main:
        by_parent.setdefault(s.parent if s.parent in ids else "", []).append(s)
    rows: list[tuple[Span, int]] = []

    def walk(parent: str, depth: int) -> None:
        for s in sorted(by_parent.get(parent, []), key=lambda x: x.start_ns):
            rows.append((s, depth))
            walk(s.span_id, depth + 1)

    walk("", 0)
    rows += [(s, 0) for s in sorted(linked, key=lambda x: x.start_ns)]
    t0 = min(s.start_ns for s, _ in rows)
    t1 = max(s.end_ns for s, _ in rows)
    left, width, row_h, top = 420, 560, 22, 40
    scale = width / max(1, t1 - t0)
    y_of = {s.span_id: top + i * row_h for i, (s, _) in enumerate(rows)}
    colours = {"lead-agent": "#8e6fd1", "kungfud": "#2f7ed8"}
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 120}" height="{top + len(rows) * row_h + 30}" '
        'font-family="sans-serif" font-size="12">',
        '<rect width="100%" height="100%" fill="white"/>',
        f'<text x="10" y="20" font-weight="bold">trace {trace_id[:16]}… — {(t1 - t0) / 1e6:.1f} ms, '
        f'{len(main)} spans, {len(linked)} linked</text>',
    ]
    for s, depth in rows:
        y = y_of[s.span_id]
        x = left + (s.start_ns - t0) * scale
        w = max(2.0, (s.end_ns - s.start_ns) * scale)
        service = s.resource.get("service.name", "?")
        colour = "#e8a33d" if s.trace_id != trace_id else colours.get(service, "#2f7ed8")
        who = names.get(s.attributes.get("kungfud.agent", ""), "")
        event = s.attributes.get("kungfud.event", "")
        label = s.name + (f"  ({who}" + (f", {event} event" if event else "") + ")" if who else "")
        out.append(f'<text x="{10 + depth * 14}" y="{y + 14}">{escape(label)}</text>')
        out.append(f'<rect x="{x:.1f}" y="{y + 3}" width="{w:.1f}" height="{row_h - 6}" rx="3" fill="{colour}"/>')
        out.append(f'<text x="{x + w + 4:.1f}" y="{y + 14}" fill="#555">{(s.end_ns - s.start_ns) / 1e6:.2f} ms</text>')
    sources: list[str] = []
    for s, _ in rows:
        if s.trace_id == trace_id and s.name.startswith("kungfud "):
            continue  # a request's link to its group commit is drawn by the commit's own bar
        for _, sid in s.links:
            if sid in y_of:
                if sid not in sources:
                    sources.append(sid)
                x = left - 8 - 7 * sources.index(sid)
                ya, yb = y_of[sid] + row_h / 2, y_of[s.span_id] + row_h / 2
                out.append(f'<circle cx="{x}" cy="{ya}" r="2" fill="#e8a33d"/>')
                out.append(f'<line x1="{x}" y1="{ya}" x2="{x}" y2="{yb}" stroke="#e8a33d" stroke-dasharray="4 3"/>')
                out.append(f'<line x1="{x}" y1="{yb}" x2="{left}" y2="{yb}" stroke="#e8a33d" stroke-dasharray="4 3"/>')
    legend_y = top + len(rows) * row_h + 18
    out.append(f'<text x="10" y="{legend_y}" fill="#555">purple: the lead agent (its SDK); blue: the daemon; '
               'orange: webhook POSTs, each in its own trace, linked (dashed) to the request that made its event</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


async def main() -> int:
    col = await Collector().start()
    rx = await Receiver().start()
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "k.toml"
        cfg.write_text(col.config() + '[webhooks]\nallow_hosts = ["127.0.0.1:*"]\n')
        proc = subprocess.Popen(
            [sys.executable, "-m", "kungfud.cli", "serve", "--config", str(cfg), "--data-dir", f"{tmp}/data",
             "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=ROOT,
            env={**os.environ, "OTEL_BSP_SCHEDULE_DELAY": "100"},
        )
        try:
            line = await asyncio.get_running_loop().run_in_executor(None, proc.stdout.readline)  # type: ignore[union-attr]
            url = line.decode().split()[-1]
            trace_id, names = await _scenario(col, url, rx)
            await col.wait(lambda: any(s.name == "kungfud assignment.judge" for s in col.spans))
            await col.wait(lambda: any(s.name == "kungfud webhook.deliver" for s in col.spans))
            await asyncio.sleep(0.5)
        finally:
            proc.terminate()
            proc.wait(30)
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(_svg(col.spans, trace_id, names))
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
