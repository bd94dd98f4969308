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
  queue fills and drops; replies must not wait for it);
- ``base`` — with ``--base DIR``: the checkout at DIR (e.g. a worktree of
  43954a0, the build before tracing), no ``[tracing]``: "off costs nothing"
  is ``off`` against it;
- ``base_on`` — with ``--base-on DIR``: another checkout with tracing (e.g.
  the build before a change to it), on as ``on`` is: the change's effect in
  the same run.

Printed per (workload, side): actions/s, p50/p99, the daemon's CPU per action
(``cpu_us``) and the load average when the run ended; the last line:
``on``/``off`` CPU and rate ratios (target: CPU ≤ 1.10 for ``create`` at 64
connections), ``off``/``base`` with ``--base`` (target: within the noise) and
the dropped-span count of ``dead``. Needs the tracing extra. No speed is
asserted anywhere.

    nice python bench/tracing.py [--blocks 6] [--each 10] [--workloads create,post] [--dead] [--base /work/wt/base]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
import threading
import urllib.request
from contextlib import ExitStack
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from action_cost import WORKLOADS, Side  # noqa: E402
from memory_create import ROOT, _knows, bench_daemon  # noqa: E402


class _Sink(BaseHTTPRequestHandler):
    """An OTLP/HTTP endpoint that takes every export and answers 200 empty,
    keeping the connection open as a collector does."""

    protocol_version = "HTTP/1.1"

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
    p.add_argument("--base", help="an older checkout measured beside (no tracing): e.g. a worktree of 43954a0")
    p.add_argument("--base-on", help="another checkout with tracing, measured on beside this one's on")
    args = p.parse_args()
    workloads = [w for w in args.workloads.split(",") if w]
    limits = "registrations_per_minute = 1000000000\n"
    traced = limits + f'[tracing]\notlp_endpoint = "{_collector()}"\nsample_ratio = 1.0\n'
    plan = [("off", limits, ROOT), ("on", traced, ROOT)]
    if args.base_on:
        plan.append(("base_on", traced, Path(args.base_on).resolve()))
    if args.dead:
        plan.append(("dead", limits + f'[tracing]\notlp_endpoint = "{_nowhere()}"\n', ROOT))
    if args.base:
        root = Path(args.base).resolve()
        plan.append(("base", limits if _knows(root, "registrations_per_minute") else "", root))
    with ExitStack() as stack:
        sides = []
        for name, extra, root in plan:
            b = stack.enter_context(bench_daemon(extra, prefix=f"kungfud-tracing-{name}-", log_level="INFO", root=root))
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
                if "base_on" in rows:
                    out[f"{w}_base_on_cpu_ratio"] = round(rows["base_on"]["cpu_us"] / rows["off"]["cpu_us"], 3)
                if "base" in rows:
                    out[f"{w}_off_cpu_vs_base"] = round(rows["off"]["cpu_us"] / rows["base"]["cpu_us"], 3)
                if "dead" in rows:
                    out[f"{w}_dead_rate_ratio"] = round(rows["dead"]["per_s"] / rows["off"]["per_s"], 3)
            for s in sides:
                if s.name == "dead":
                    out["dead_spans_dropped"] = _dropped(s.url)
                await s.close()
            out["loadavg"] = os.getloadavg()
            out["targets"] = {"create_on_cpu_ratio": "<= 1.10 (every request sampled, 64 connections)", "*_off_cpu_vs_base": "~1 (noise)"}
            print(json.dumps(out), flush=True)

        asyncio.run(run())


if __name__ == "__main__":
    main()
