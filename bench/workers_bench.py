"""``memory.create`` at 64 connections against ``kungfud serve --workers N``,
and against an echo server of N processes sharing one port the same way
(SO_REUSEPORT), in the same run (issue 16 "Measured"; docs/operations.md
"Workers").

    python bench/workers_bench.py [--seconds 5] [--warmup 0.5] [--connections 64] [--workers 1,2] [--rounds 2]

For each round and each worker count N: a fresh daemon with ``[server] workers
= N`` (bench/memory_create.py's ``bench_daemon``: temporary data directory,
127.0.0.1 only, per-agent limits raised, logging at WARNING) and an echo server
of N processes, then the same client pattern as bench/memory_create.py (each
connection its own agent, one request at a time). Rounds alternate the worker
counts so that a change in the machine's load hits both. Prints one JSON line
per measurement and one kungfud/echo ratio per round and N. Every figure is
whole-daemon: /metrics answers for one worker only, so no CPU per action here.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.memory_create import _register, bench_daemon, echo_servers, measure  # noqa: E402


async def one(n: int, args: argparse.Namespace, rnd: int) -> None:
    with echo_servers(n) as echo_url:
        with bench_daemon(f"[server]\nworkers = {n}\n", prefix="kungfud-workers-bench-") as b:
            keys = await _register(b.url, args.connections)
            rows = {}
            for target, url, ks in (("echo", echo_url, [None] * args.connections), ("kungfud", b.url, keys)):
                row = {"bench": "workers", "round": rnd, "workers": n, "target": target,
                       **await measure(url, ks, args.seconds, args.warmup, f"{target}{n}r{rnd}")}
                rows[target] = row
                print(json.dumps(row), flush=True)
            k, e = rows["kungfud"], rows["echo"]
            print(json.dumps({
                "bench": "workers", "round": rnd, "workers": n, "ratio": "kungfud/echo",
                "per_s": round(k["per_s"] / e["per_s"], 3) if e["per_s"] else None,
                "p50_ms": round(k["p50_ms"] / e["p50_ms"], 2) if k["p50_ms"] and e["p50_ms"] else None,
                "p99_ms": round(k["p99_ms"] / e["p99_ms"], 2) if k["p99_ms"] and e["p99_ms"] else None,
            }), flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--warmup", type=float, default=0.5)
    p.add_argument("--connections", type=int, default=64)
    p.add_argument("--workers", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2])
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args()
    if not 0 < args.seconds <= 600 or not 0 <= args.warmup <= 60 or not 0 < args.connections <= 1000:
        p.error("--seconds must be in (0, 600], --warmup in [0, 60], --connections in 1..1000")
    if not all(0 < n <= (os.cpu_count() or 1) * 4 for n in args.workers) or not 0 < args.rounds <= 20:
        p.error("--workers: counts in 1..4×cores; --rounds in 1..20")
    for rnd in range(1, args.rounds + 1):
        for n in args.workers:
            asyncio.run(one(n, args, rnd))


if __name__ == "__main__":
    main()
