"""Thread benchmarks: ``thread.post`` into one busy Thread and into many, post
latency against history length, and deadline expiry lateness.

    python bench/thread_bench.py [--seconds 5] [--history 10,10000] [--deadlines 1000]

Every figure is printed as a JSON line. The busy-Thread measurement is paired
with the echo server in the same run (ratio kungfud/echo, DESIGN.md).
- ``thread.post`` one Thread, 64 members each posting sequentially (broadcasts);
- ``thread.post`` 64 connections each posting into its own Thread (~1,000 Threads
  with ``--threads``);
- post latency (p50/p99 over 500 sequential posts) after N earlier entries, for
  each N in ``--history`` (must stay flat);
- expiry lateness: ``--deadlines`` assignments taken with a 3 s delivery
  deadline within about a second, never delivered; lateness = when the timed_out
  fact was recorded minus the deadline (p50/p99/max).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from memory_create import _memory_kb, _register, bench_daemon, cpu_per_action, cpu_snapshot, measure  # noqa: E402

from kungfud.client import Client  # noqa: E402
from kungfud.core.timestamps import parse_rfc3339  # noqa: E402


async def _clients(url: str, keys: list[str]) -> list[Client]:
    return [await Client.connect(url, k) for k in keys]


async def _setup_thread(url: str, keys: list[str]) -> str:
    """One Thread with every key's agent a speaker."""
    cs = await _clients(url, keys)
    t = (await cs[0].act("thread.create", {}))["thread"]
    token = (await cs[0].act("thread.admit", {"thread": t}))["token"]
    await asyncio.gather(*(c.act("thread.join", {"token": token}) for c in cs[1:]))
    for c in cs:
        await c.close()
    return t


def _pct(xs: list[float], q: float) -> float | None:
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(q * len(xs)))], 3) if xs else None


async def busy_thread(url: str, echo_url: str, keys: list[str], seconds: float) -> None:
    thread = await _setup_thread(url, keys[:64])
    post = lambda c, n: {"thread": thread, "content": {"text": "bench", "n": n}}  # noqa: E731
    echo = await measure(echo_url, [None] * 64, seconds, 0.5, "echo-post", "thread.post", post)
    before = cpu_snapshot(url)
    kf = await measure(url, keys[:64], seconds, 0.5, "busy", "thread.post", post)
    kf["cpu_us_per_action"] = cpu_per_action(before, cpu_snapshot(url))
    print(json.dumps({"bench": "thread.post", "target": "echo", **echo}), flush=True)
    print(json.dumps({"bench": "thread.post one thread", "target": "kungfud", **kf}), flush=True)
    print(json.dumps({"bench": "thread.post one thread", "ratio": "kungfud/echo",
                      "per_s": round(kf["per_s"] / echo["per_s"], 3) if echo["per_s"] else None}), flush=True)


async def many_threads(url: str, keys: list[str], n_threads: int, seconds: float) -> None:
    cs = await _clients(url, keys[:64])
    threads = []
    for i in range(n_threads):
        threads.append((await cs[i % 64].act("thread.create", {}))["thread"])
    for c in cs:
        await c.close()
    mine = {c: [t for i, t in enumerate(threads) if i % 64 == c] for c in range(64)}
    post = lambda c, n: {"thread": mine[c][n % len(mine[c])], "content": {"n": n}}  # noqa: E731
    before = cpu_snapshot(url)
    kf = await measure(url, keys[:64], seconds, 0.5, "many", "thread.post", post)
    kf["cpu_us_per_action"] = cpu_per_action(before, cpu_snapshot(url))  # issue 27 item 3: where the cost is
    print(json.dumps({"bench": f"thread.post {n_threads} threads", "target": "kungfud", **kf}), flush=True)


async def history(url: str, key: str, sizes: list[int]) -> None:
    c = await Client.connect(url, key)
    t = (await c.act("thread.create", {}))["thread"]
    posted = 0
    ws = c.ws
    assert ws is not None
    for size in sizes:
        # Fill quickly with pipelined posts, 32 in flight.
        while posted < size:
            batch = min(32, size - posted)
            await asyncio.gather(*(c.act("thread.post", {"thread": t, "content": {"n": posted + i}}) for i in range(batch)))
            posted += batch
        lat = []
        for i in range(500):
            t0 = time.perf_counter()
            await c.act("thread.post", {"thread": t, "content": {"n": i}})
            lat.append((time.perf_counter() - t0) * 1000)
        posted += 500
        print(json.dumps({"bench": "thread.post vs history", "earlier_entries": size,
                          "p50_ms": _pct(lat, 0.5), "p99_ms": _pct(lat, 0.99)}), flush=True)
    await c.close()


async def run(args: argparse.Namespace, url: str, echo_url: str) -> None:
    keys = await _register(url, 66)
    await busy_thread(url, echo_url, keys, args.seconds)
    await many_threads(url, keys, args.threads, args.seconds)
    await history(url, keys[64], args.history)
    await expiry(url, keys[65], args.deadlines)


async def expiry(url: str, key: str, n: int) -> None:
    c = await Client.connect(url, key)
    me = (await c.read("agent.whoami", {}))["agent"]
    t = (await c.act("thread.create", {}))["thread"]
    asgs = []
    for start in range(0, n, 50):
        rs = await asyncio.gather(*(
            c.act("thread.post", {"thread": t, "content": {"n": i},
                                  "assign": {"to": me, "content": {"criteria": "none"}, "deliver_within_s": 3}})
            for i in range(start, min(n, start + 50))))
        asgs += [r["assignment"] for r in rs]
    t_take = time.perf_counter()
    for start in range(0, n, 50):  # stay under the in-flight limit (64)
        await asyncio.gather(*(c.act("assignment.take", {"assignment": a}) for a in asgs[start:start + 50]))
    took = time.perf_counter() - t_take
    await asyncio.sleep(4.0)
    late = []
    for start in range(0, n, 50):
        gs = await asyncio.gather(*(c.read("assignment.get", {"assignment": a}) for a in asgs[start:start + 50]))
        for g in gs:
            if g["state"] == "timed_out" and "ended_at" in g:
                late.append(parse_rfc3339(g["ended_at"]) - parse_rfc3339(g["deliver_by"]))
    print(json.dumps({"bench": "expiry lateness", "deadlines": n, "recorded": len(late), "takes_s": round(took, 2),
                      "p50_ms": _pct(late, 0.5), "p99_ms": _pct(late, 0.99), "max_ms": max(late) if late else None}),
          flush=True)
    await c.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--threads", type=int, default=1000)
    p.add_argument("--history", type=lambda s: [int(x) for x in s.split(",")], default=[10, 10000])
    p.add_argument("--deadlines", type=int, default=1000)
    args = p.parse_args()
    with bench_daemon(echo=True) as b:
        asyncio.run(run(args, b.url, b.echo_url))
        mem = _memory_kb(b.daemon.pid)
        print(json.dumps({"bench": "threads", "daemon_rss_kb": mem["VmRSS"], "daemon_peak_rss_kb": mem["VmHWM"]}), flush=True)

if __name__ == "__main__":
    main()
