"""Scale benchmarks: ``turn`` with many open obligations, Task cycles, and the
daemon's memory with many idle connections.

    python bench/scale_bench.py [--obligations 10000] [--cycles-seconds 5] [--idle 10000]

Prints JSON lines:
- ``turn``: an agent with N open respond obligations (asked by N entries); p50/p99
  of reading one page of 100, and of a full traversal;
- ``task cycle``: take+deliver (one action) then judge, on 32 connections, cycles/s;
- ``event delivery``: a post that asks a subscribed agent, to the ``turn`` event
  arriving (and from the post's durable reply to the event);
- ``idle connections``: daemon RSS before and after opening K authenticated idle
  connections (the process raises its open-files limit as far as allowed);
- ``stored threads``: daemon RSS (total and anonymous) before and after creating
  ``--stored-threads`` Threads (64 agents, 16 in flight each), and the rate.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from memory_create import _memory_kb, _register, bench_daemon  # noqa: E402
from websockets.asyncio.client import connect  # noqa: E402

from kungfud.client import Client  # noqa: E402


def _pct(xs: list[float], q: float) -> float | None:
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(q * len(xs)))], 3) if xs else None


async def turn_bench(url: str, keys: list[str], n: int) -> None:
    asker = await Client.connect(url, keys[0])
    owner = await Client.connect(url, keys[1])
    third = await Client.connect(url, keys[2])
    me = (await owner.read("agent.whoami", {}))["agent"]
    t = (await asker.act("thread.create", {}))["thread"]
    token = (await asker.act("thread.admit", {"thread": t}))["token"]
    await owner.act("thread.join", {"token": token})
    await third.act("thread.join", {"token": token})
    for start in range(0, n, 50):
        await asyncio.gather(*(asker.act("thread.post", {"thread": t, "ask": [me], "content": {"n": i}})
                               for i in range(start, min(n, start + 50))))
    page = []
    for _ in range(200):
        t0 = time.perf_counter()
        r = await owner.read("turn", {"limit": 100})
        page.append((time.perf_counter() - t0) * 1000)
    assert len(r["items"]) == 100
    full = []
    for _ in range(3):
        t0 = time.perf_counter()
        cursor, seen = None, 0
        while True:
            r = await owner.read("turn", {"limit": 100, "cursor": cursor} if cursor else {"limit": 100})
            seen += len(r["items"])
            cursor = r["cursor"]
            if cursor is None:
                break
        full.append((time.perf_counter() - t0) * 1000)
    print(json.dumps({"bench": "turn", "obligations": seen, "page_100_p50_ms": _pct(page, 0.5),
                      "page_100_p99_ms": _pct(page, 0.99), "full_traversal_ms": _pct(full, 0.5)}), flush=True)
    for c in (asker, owner, third):
        await c.close()


async def task_cycles(url: str, keys: list[str], seconds: float) -> None:
    author = await Client.connect(url, keys[0])
    tk = (await author.act("task.create", {"audience": "open",
                                           "contract": {"content": {"output": "x", "criteria": "y"}}}))["task"]
    workers = [await Client.connect(url, k) for k in keys[3:35]]
    lat: list[float] = []
    end = time.perf_counter() + seconds

    async def run(w: Client) -> None:
        while time.perf_counter() < end:
            t0 = time.perf_counter()
            e = await w.act("task.take", {"task": tk, "deliver": {"content": {"answer": 1}}})
            await author.act("task.judge", {"engagement": e["engagement"], "verdict": "adopt"})
            lat.append((time.perf_counter() - t0) * 1000)

    await asyncio.gather(*(run(w) for w in workers))
    print(json.dumps({"bench": "task cycle (take+deliver, judge)", "connections": len(workers),
                      "cycles_per_s": round(len(lat) / seconds, 1), "p50_ms": _pct(lat, 0.5), "p99_ms": _pct(lat, 0.99)}),
          flush=True)
    for c in (author, *workers):
        await c.close()


async def event_latency(url: str, keys: list[str], n: int) -> None:
    """Time from sending an action to its turn event reaching a subscriber, and
    from the action's durable reply to the event (commit → push)."""
    poster = await Client.connect(url, keys[35])
    sub = await Client.connect(url, keys[36])
    third = await Client.connect(url, keys[37])
    me = (await sub.read("agent.whoami", {}))["agent"]
    t = (await poster.act("thread.create", {}))["thread"]
    token = (await poster.act("thread.admit", {"thread": t}))["token"]
    await sub.act("thread.join", {"token": token})
    await third.act("thread.join", {"token": token})
    await sub.read("subscribe", {})
    events = sub.events()
    total, after_reply = [], []
    for i in range(n):
        t0 = time.perf_counter()
        await poster.act("thread.post", {"thread": t, "ask": [me], "content": {"n": i}})
        t1 = time.perf_counter()
        await events.__anext__()
        t2 = time.perf_counter()
        total.append((t2 - t0) * 1000)
        after_reply.append((t2 - t1) * 1000)
    print(json.dumps({"bench": "event delivery", "events": n, "action_to_event_p50_ms": _pct(total, 0.5),
                      "action_to_event_p99_ms": _pct(total, 0.99), "reply_to_event_p50_ms": _pct(after_reply, 0.5),
                      "reply_to_event_p99_ms": _pct(after_reply, 0.99)}), flush=True)
    for c in (poster, sub, third):
        await c.close()


async def idle(url: str, key: str, pid: int, n: int) -> None:
    before = _memory_kb(pid)["VmRSS"]
    conns = []
    try:
        for i in range(n):
            conns.append(await connect(url, compression=None, additional_headers={"Authorization": f"Bearer {key}"}))
    except OSError as e:
        print(json.dumps({"bench": "idle connections", "note": f"stopped at {len(conns)}: {e}"}), flush=True)
    await asyncio.sleep(1.0)
    after = _memory_kb(pid)["VmRSS"]
    print(json.dumps({"bench": "idle connections", "connections": len(conns), "rss_before_kb": before,
                      "rss_after_kb": after, "kb_per_connection": round((after - before) / max(1, len(conns)), 1)}),
          flush=True)
    for c in conns:
        await c.close()


async def stored_threads(url: str, keys: list[str], pid: int, n: int) -> None:
    before = _memory_kb(pid)
    clients = [await Client.connect(url, k) for k in keys]
    per = -(-n // len(clients))
    t0 = time.perf_counter()

    async def make(c: Client, count: int) -> None:
        for start in range(0, count, 16):
            await asyncio.gather(*(c.act("thread.create", {}) for _ in range(min(16, count - start))))

    await asyncio.gather(*(make(c, min(per, n - i * per)) for i, c in enumerate(clients) if n - i * per > 0))
    took = time.perf_counter() - t0
    for c in clients:
        await c.close()
    await asyncio.sleep(1.0)
    after = _memory_kb(pid)
    print(json.dumps({"bench": "stored threads", "threads": n, "create_per_s": round(n / took, 1),
                      "rss_before_kb": before["VmRSS"], "rss_after_kb": after["VmRSS"],
                      "anon_before_kb": before["RssAnon"], "anon_after_kb": after["RssAnon"]}), flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--obligations", type=int, default=10000)
    p.add_argument("--cycles-seconds", type=float, default=5.0)
    p.add_argument("--idle", type=int, default=10000)
    p.add_argument("--events", type=int, default=1000)
    p.add_argument("--stored-threads", type=int, default=100000)
    args = p.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, args.idle + 1000)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    with bench_daemon("[server]\nmax_connections = 100000\n") as b:
        url = b.url

        async def run() -> None:
            keys = await _register(url, 104)
            await turn_bench(url, keys, args.obligations)
            await task_cycles(url, keys, args.cycles_seconds)
            await event_latency(url, keys, args.events)
            await idle(url, keys[39], b.daemon.pid, args.idle)
            if args.stored_threads:
                await stored_threads(url, keys[40:104], b.daemon.pid, args.stored_threads)

        asyncio.run(run())

if __name__ == "__main__":
    main()
