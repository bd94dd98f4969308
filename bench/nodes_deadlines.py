"""Deadline lateness across LMDB workers (issue 16 item 5: within 100 ms p99
when all nodes are up). ``--workers`` workers, each on its own port; delivery
deadlines of 1 s are set by takes sent through every worker in turn, while
only the lease holder runs the clock. Lateness of each = when its
``timed_out`` outcome event reaches a subscriber minus (when its take was sent
+ 1 s): an upper bound (the deadline is counted from the take's decision,
which comes after the send), and it includes the event's delivery.

    python bench/nodes_deadlines.py [--workers 2] [--deadlines 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kungfud.client import Client  # noqa: E402
from kungfud.core.clock import parse_rfc3339  # noqa: E402
from tests.nodes.procs import Cluster  # noqa: E402


async def main(args: argparse.Namespace) -> None:
    cluster = Cluster(Path(tempfile.mkdtemp(prefix="kf-deadlines-")), args.workers)
    nodes = cluster.nodes
    try:
        admin = await Client.connect(nodes[0].url, cluster.admin_key)
        t = (await admin.act("thread.create", {"content": {"title": "deadlines"}}))["thread"]
        async with await Client.connect(nodes[0].url) as c:
            r = await c.act("agent.register", {"content": {"name": "x"}})
        x_id, x_key = r["agent"], r["key"]
        grant = await admin.act("thread.admit", {"thread": t, "role": "speaker"})
        xs = [await Client.connect(n.url, x_key) for n in nodes]
        await xs[0].act("thread.join", {"token": grant["token"]})
        watch = await Client.connect(nodes[-1].url, x_key)
        await watch.read("subscribe", {})
        asgs = []
        for i in range(args.deadlines):
            a = {"thread": t, "content": {"i": i}, "ask": [],
                 "assign": {"to": x_id, "content": {"criteria": "done"}, "deliver_within_s": 1}}
            asgs.append((await admin.act("thread.post", a))["assignment"])
        sent: dict[str, float] = {}

        async def take(i: int, asg: str) -> None:
            await asyncio.sleep(i * args.spread / args.deadlines)
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
            "bench": "nodes.deadlines", "workers": args.workers, "deadlines": len(late),
            "decided_p50_ms": decided[len(decided) // 2], "decided_p99_ms": decided[int(len(decided) * 0.99)],
            "decided_max_ms": decided[-1],
            "event_p50_ms": round(late[len(late) // 2], 1), "event_p99_ms": round(late[int(len(late) * 0.99)], 1),
            "event_max_ms": round(late[-1], 1),
        }))
        for c in [*xs, watch, admin]:
            await c.close()
    finally:
        cluster.stop()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--deadlines", type=int, default=200)
    ap.add_argument("--spread", type=float, default=2.0, help="seconds over which the takes are sent")
    asyncio.run(main(ap.parse_args()))
