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
whole-daemon (/metrics answers for one worker only): ``cpu_us_per_action`` is
the CPU of the supervisor and its workers (/proc, Linux) over the measurement
and its warm-up, divided by the actions of that time (``per_s`` × both), and
``cpu_share`` how busy each process was (1.0: one core).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.memory_create import _register, bench_daemon, cpu_seconds, echo_servers, measure  # noqa: E402


def _tree(pid: int) -> list[int]:
    """``pid`` and its children (the supervisor and its workers)."""
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    return [pid, *map(int, out)]


def _cpu(pids: list[int]) -> dict[int, float]:
    out = {}
    for pid in pids:
        try:
            out[pid] = cpu_seconds(pid)
        except OSError:
            pass
    return out


async def one(n: int, args: argparse.Namespace, rnd: int) -> None:
    with echo_servers(n) as echo_url:
        with bench_daemon(f"[server]\nworkers = {n}\n", prefix="kungfud-workers-bench-") as b:
            keys = await _register(b.url, args.connections)
            rows = {}
            for target, url, ks in (("echo", echo_url, [None] * args.connections), ("kungfud", b.url, keys)):
                pids = _tree(b.daemon.pid) if target == "kungfud" else []
                cpu0, t0 = _cpu(pids), time.perf_counter()
                row = {"bench": "workers", "round": rnd, "workers": n, "target": target,
                       **await measure(url, ks, args.seconds, args.warmup, f"{target}{n}r{rnd}")}
                if pids:
                    cpu1, wall = _cpu(pids), time.perf_counter() - t0
                    used = {pid: cpu1[pid] - cpu0[pid] for pid in cpu1 if pid in cpu0}
                    actions = row["per_s"] * (args.seconds + args.warmup)
                    row["cpu_us_per_action"] = round(sum(used.values()) / max(1.0, actions) * 1e6, 1)
                    row["cpu_share"] = [round(v / wall, 2) for v in used.values()]
                    row["load"] = round(os.getloadavg()[0], 2)
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
