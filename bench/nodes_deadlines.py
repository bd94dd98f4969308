"""Deadline lateness across LMDB workers (issue 16 item 5: within 100 ms p99
when all nodes are up). ``--workers`` LMDB workers, each on its own port, or
PostgreSQL nodes (bench/nodes.py); delivery
deadlines of 1 s are set by takes sent through every worker in turn, while
only the lease holder runs the clock. Lateness of each = when its
``timed_out`` outcome event reaches a subscriber minus (when its take was sent
+ 1 s): an upper bound (the deadline is counted from the take's decision,
which comes after the send), and it includes the event's delivery.

    python bench/nodes_deadlines.py [--workers 2] [--deadlines 200] [--store postgresql://…]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.nodes import run_per_count  # noqa: E402
from kungfud.client import Client  # noqa: E402
from kungfud.core.timestamps import parse_rfc3339  # noqa: E402


async def measure(n: int, args: argparse.Namespace, urls: list[str], admin: Client, t: str) -> None:
    async with await Client.connect(urls[0]) as c:
        r = await c.act("agent.register", {"content": {"name": "x"}})
    x_id, x_key = r["agent"], r["key"]
    grant = await admin.act("thread.admit", {"thread": t, "role": "speaker"})
    xs = [await Client.connect(url, x_key) for url in urls]
    await xs[0].act("thread.join", {"token": grant["token"]})
    watch = await Client.connect(urls[-1], x_key)
    await watch.read("subscribe", {})
    asgs = []
    for i in range(args.deadlines):
        a = {"thread": t, "content": {"i": i}, "ask": [],
             "assign": {"to": x_id, "content": {"criteria": "done"}, "deliver_within_s": 1}}
        asgs.append((await admin.act("thread.post", a))["assignment"])
    sent: dict[str, float] = {}

    gates = [asyncio.Semaphore(32) for _ in xs]  # under the per-connection in-flight limit (64)

    async def take(i: int, asg: str) -> None:
        await asyncio.sleep(i * args.spread / args.deadlines)
        async with gates[i % len(xs)]:
            sent[asg] = time.monotonic()
            await xs[i % len(xs)].act("assignment.take", {"assignment": asg})

    late: list[float] = []
    seen: set[str] = set()

    async def listen() -> None:
        async for ev in watch.events():
            if ev["event"] == "outcome" and ev["data"]["state"] == "timed_out":
                ref = json.dumps(ev["data"]["ref"])
                for asg, at in sent.items():
                    if asg in ref and asg not in seen:
                        seen.add(asg)
                        late.append((time.monotonic() - at - 1.0) * 1000)
                if len(seen) == len(asgs):
                    return

    listener = asyncio.ensure_future(listen())
    await asyncio.gather(*(take(i, a) for i, a in enumerate(asgs)))
    await asyncio.wait_for(listener, 30)
    late.sort()
    decided = []  # exact: the expiry fact's time minus the deadline, from the store
    for asg in asgs:
        g = await admin.read("assignment.get", {"assignment": asg})
        decided.append(parse_rfc3339(g["ended_at"]) - parse_rfc3339(g["deliver_by"]))
    decided.sort()
    print(json.dumps({
        "bench": "nodes.deadlines", "workers": n, "deadlines": len(late),
        "decided_p50_ms": decided[len(decided) // 2], "decided_p99_ms": decided[int(len(decided) * 0.99)],
        "decided_max_ms": decided[-1],
        "event_p50_ms": round(late[len(late) // 2], 1), "event_p99_ms": round(late[int(len(late) * 0.99)], 1),
        "event_max_ms": round(late[-1], 1),
    }))
    for c in [*xs, watch]:
        await c.close()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--deadlines", type=int, default=200)
    ap.add_argument("--spread", type=float, default=2.0, help="seconds over which the takes are sent")
    run_per_count(ap, measure, "deadlines")
