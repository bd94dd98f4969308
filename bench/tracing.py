"""Issue 36 §3: what tracing costs the daemon per action — off (no
``[tracing]``), on (every request sampled, spans exported to a collector
that answers at once), and on with a collector that cannot be reached — each
its own daemon, loaded in alternating blocks (bench/action_cost.py's sides
and workloads).

Sides:
- ``off`` — this checkout, no ``[tracing]`` (nothing of OpenTelemetry imported);
- ``on`` — ``[tracing] otlp_endpoint`` to a collector in a thread of this
  process that reads each export and answers 200 (it decodes nothing);
- ``dead`` — with ``--dead``: an endpoint where nothing listens (the export
  queue fills and drops; replies must not wait for it).

Printed per (workload, side): actions/s, p50/p99, the daemon's CPU per action
(``cpu_us``); the last line: ``on``/``off`` CPU and rate ratios (target: CPU
≤ 1.10 for ``create`` at 64 connections) and the dropped-span count of
``dead``. Needs the tracing extra. No speed is asserted anywhere.

    python bench/tracing.py [--blocks 6] [--each 10] [--workloads create,post] [--dead]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sys
import threading
import urllib.request
from contextlib import ExitStack
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from action_cost import WORKLOADS, Side  # noqa: E402
from memory_create import ROOT, bench_daemon  # noqa: E402


class _Sink(BaseHTTPRequestHandler):
    """An OTLP/HTTP endpoint that takes every export and answers 200 empty."""

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers.get("content-length", "0")))
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *_args) -> None:
        pass


def _collector() -> str:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}"


def _nowhere() -> str:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}"


def _dropped(url: str) -> int | None:
    base = url.replace("ws://", "http://").rsplit("/", 1)[0]
    for line in urllib.request.urlopen(base + "/metrics", timeout=10).read().decode().splitlines():
        if line.startswith("kungfud_trace_spans_dropped_total "):
            return int(float(line.split()[1]))
    return None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--blocks", type=int, default=6, help="alternating blocks")
    p.add_argument("--each", type=int, default=10, help="requests per connection per block")
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--dead", action="store_true", help="also a side whose collector cannot be reached")
    args = p.parse_args()
    workloads = [w for w in args.workloads.split(",") if w]
    limits = "registrations_per_minute = 1000000000\n"
    plan = [("off", limits), ("on", limits + f'[tracing]\notlp_endpoint = "{_collector()}"\nsample_ratio = 1.0\n')]
    if args.dead:
        plan.append(("dead", limits + f'[tracing]\notlp_endpoint = "{_nowhere()}"\n'))
    with ExitStack() as stack:
        sides = []
        for name, extra in plan:
            b = stack.enter_context(bench_daemon(extra, prefix=f"kungfud-tracing-{name}-", log_level="INFO", root=ROOT))
            sides.append(Side(name, b.url, b.daemon.pid))

        async def run() -> None:
            for s in sides:
                await s.setup(workloads)
                for w in workloads:  # warm every path
                    await s.block(w, 3, measure=False)
            for b in range(args.blocks):
                for w in workloads:
                    for s in sides if b % 2 == 0 else sides[::-1]:
                        await s.block(w, args.each)
            out: dict = {"bench": "tracing.ratios"}
            for w in workloads:
                rows = {s.name: s.summary(w) for s in sides}
                for row in rows.values():
                    print(json.dumps({**row, "bench": "tracing"}), flush=True)
                out[f"{w}_on_cpu_ratio"] = round(rows["on"]["cpu_us"] / rows["off"]["cpu_us"], 3)
                out[f"{w}_on_rate_ratio"] = round(rows["on"]["per_s"] / rows["off"]["per_s"], 3)
                if "dead" in rows:
                    out[f"{w}_dead_rate_ratio"] = round(rows["dead"]["per_s"] / rows["off"]["per_s"], 3)
            for s in sides:
                if s.name == "dead":
                    out["dead_spans_dropped"] = _dropped(s.url)
                await s.close()
            out["targets"] = {"create_on_cpu_ratio": "<= 1.10 (every request sampled, 64 connections)"}
            print(json.dumps(out), flush=True)

        asyncio.run(run())


if __name__ == "__main__":
    main()
