"""One busy Thread, its posters spread over the nodes (LMDB workers, each on its
own port, or PostgreSQL nodes; bench/nodes.py) (issue 16: cross-node
contention; docs/scaling.md). Every poster sends ``thread.post`` one at a time
(no client retries: each rejection is counted as the daemon gave it) for
``--seconds``; with ``--op memory.create`` they create Memories instead (no
shared object: the nodes' write path alone). Reports ok/s, p50/p99 and the rejections by code. A
rejection ``unavailable`` "changed concurrently too often" is an action whose
re-decisions (MAX_ATTEMPTS) ran out under contention; ``internal`` must never
appear.

    python bench/nodes_contention.py [--nodes 1,2] [--posters 32] [--seconds 5] [--store postgresql://…]

``--nodes 1,2`` measures one node, then two, in the same run (one LMDB node is
``serve`` alone, as ``--workers 1`` is).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.nodes import run_per_count  # noqa: E402
from kungfud.client import Client, new_key  # noqa: E402


async def measure(n: int, args: argparse.Namespace, urls: list[str], admin: Client, t: str) -> None:
    posters = []
    for i in range(args.posters):
        url = urls[i % n]
        async with await Client.connect(url) as c:
            r = await c.act("agent.register", {"content": {"name": f"p{i}"}})
        grant = await admin.act("thread.admit", {"thread": t, "role": "speaker"})
        c = await Client.connect(url, r["key"])
        await c.act("thread.join", {"token": grant["token"]})
        posters.append(c)
    op = args.op
    codes: collections.Counter = collections.Counter()
    reasons: collections.Counter = collections.Counter()
    lat: list[float] = []
    stop_at = time.monotonic() + args.seconds

    async def run(c: Client) -> None:
        while time.monotonic() < stop_at:
            t0 = time.perf_counter()
            args = {"thread": t, "content": {"x": 1}, "ask": []} if op == "thread.post" else {"content": {"x": 1}}
            resp = await c.request(op, args, key=new_key())
            lat.append(time.perf_counter() - t0)
            if resp.get("ok"):
                codes["ok"] += 1
            else:
                codes[resp["error"]["code"]] += 1
                reasons[resp["error"]["reason"]] += 1

    t0 = time.monotonic()
    await asyncio.gather(*(run(c) for c in posters))
    took = time.monotonic() - t0
    lat.sort()
    print(f"op={op} nodes={n} posters={args.posters} seconds={took:.1f}")
    print(f"ok/s={codes['ok'] / took:.0f} p50={statistics.median(lat) * 1000:.1f}ms p99={lat[int(len(lat) * 0.99)] * 1000:.1f}ms")
    print("outcomes:", dict(codes))
    for reason, count in reasons.most_common():
        print(f"  {count} x {reason}")
    for c in posters:
        await c.close()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--posters", type=int, default=32)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--op", choices=("thread.post", "memory.create"), default="thread.post",
                    help="thread.post into the one busy Thread (default), or memory.create by the same agents")
    run_per_count(ap, measure, "contention")
