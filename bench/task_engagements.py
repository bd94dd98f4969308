"""Issue 27, target 4: an action on a Task costs the same however many
engagements run on it.

Two open Tasks of one author on one daemon: one with ``--small`` (10) live
engagements, one with ``--big`` (10,000) — each taken by an agent of its own
and left running. Then fresh agents take and deliver on each Task (``task.take``
then ``task.deliver``, each timed; ``--posters`` of them at once), the two
Tasks in alternating blocks so the machine's drift hits both alike. Each cycle
adds one more live (delivered) engagement, as a real Task would.

Printed: p50/p99 of take, deliver and the two together on each Task, the
daemon's CPU per cycle (``/proc/PID/task/*/schedstat``), and the ratio big /
small of the p50 of take + deliver (target ≤ 1.2).

    python bench/task_engagements.py [--big 10000] [--cycles 160] [--root <checkout>]

``--root`` runs the daemon of another checkout (an older build, for before and
after; the client speaks only the wire). No speed is asserted anywhere.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from action_cost import cpu_ns  # noqa: E402
from memory_create import ROOT, _dec, _enc, bench_daemon  # noqa: E402
from scale_targets import Conn, _pct  # noqa: E402
from websockets.asyncio.client import connect  # noqa: E402


async def _register_many(url: str, n: int, tag: str, conc: int = 32) -> list[str]:
    """``n`` agents registered over ``conc`` connections at once: their keys."""
    keys: list[str | None] = [None] * n

    async def worker(w: int) -> None:
        async with connect(url, compression=None) as ws:
            for i in range(w, n, conc):
                frame = {"id": i, "op": "agent.register", "key": f"{tag}-{i}", "args": {"content": {"name": f"{tag}{i}"}}}
                await ws.send(_enc.encode(frame).decode())
                resp = _dec.decode(await ws.recv())
                assert resp["ok"], resp
                keys[i] = resp["result"]["key"]

    await asyncio.gather(*(worker(w) for w in range(min(conc, n))))
    return keys  # type: ignore[return-value]


async def _take_all(url: str, task: str, keys: list[str], tag: str, conc: int = 32) -> None:
    """Every key's agent takes ``task`` and leaves its engagement running."""

    async def worker(w: int) -> None:
        for i in range(w, len(keys), conc):
            c = await Conn.open(url, keys[i], f"{tag}{i}")
            try:
                await c.call("task.take", {"task": task})
            finally:
                await c.close()

    await asyncio.gather(*(worker(w) for w in range(min(conc, len(keys)))))


class Side:
    def __init__(self, task: str, pid: int):
        self.task, self.pid = task, pid
        self.take: list[float] = []
        self.deliver: list[float] = []
        self.cycle: list[float] = []
        self.cpu_ns = 0

    async def block(self, url: str, keys: list[str], tag: str) -> None:
        conns = [await Conn.open(url, k, f"{tag}{i}") for i, k in enumerate(keys)]
        c0 = cpu_ns(self.pid)

        async def one(c: Conn) -> None:
            got, t1 = await c.call("task.take", {"task": self.task})
            _, t2 = await c.call("task.deliver", {"engagement": got["engagement"], "content": {"poem": "an old pond"}})
            self.take.append(t1)
            self.deliver.append(t2)
            self.cycle.append(t1 + t2)

        await asyncio.gather(*(one(c) for c in conns))
        self.cpu_ns += cpu_ns(self.pid) - c0
        for c in conns:
            await c.close()

    def row(self, name: str, live: int) -> dict:
        return {
            "bench": "task_engagements", "task": name, "live_before": live, "cycles": len(self.cycle),
            "take_p50_ms": _pct(self.take, 0.5), "deliver_p50_ms": _pct(self.deliver, 0.5),
            "cycle_p50_ms": _pct(self.cycle, 0.5), "cycle_p99_ms": _pct(self.cycle, 0.99),
            "daemon_cpu_us_per_cycle": round(self.cpu_ns / max(1, len(self.cycle)) / 1000, 1),
        }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--small", type=int, default=10, help="live engagements on the small Task")
    p.add_argument("--big", type=int, default=10_000, help="live engagements on the big Task")
    p.add_argument("--cycles", type=int, default=160, help="take+deliver cycles on each Task")
    p.add_argument("--blocks", type=int, default=10, help="alternating blocks")
    p.add_argument("--posters", type=int, default=8, help="agents taking and delivering at once")
    p.add_argument("--root", default=str(ROOT), help="the checkout whose daemon runs")
    args = p.parse_args()
    per_block = max(1, args.cycles // args.blocks)
    with bench_daemon("registrations_per_minute = 1000000000\n", prefix="kungfud-tasks-", root=Path(args.root)) as b:

        async def run() -> None:
            t0 = time.perf_counter()
            measuring = per_block * args.blocks * 2
            keys = await _register_many(b.url, 1 + args.small + args.big + measuring, "tk")
            author = await Conn.open(b.url, keys[0], "author")
            contract = {"content": {"output": "a poem", "criteria": "short"}}
            tasks = {}
            for name in ("small", "big"):
                tasks[name] = (await author.call("task.create", {"audience": "open", "contract": contract}))[0]["task"]
            await author.close()
            await _take_all(b.url, tasks["small"], keys[1 : 1 + args.small], "fs")
            await _take_all(b.url, tasks["big"], keys[1 + args.small : 1 + args.small + args.big], "fb")
            setup_s = time.perf_counter() - t0
            fresh = iter(keys[1 + args.small + args.big :])
            sides = {name: Side(t, b.daemon.pid) for name, t in tasks.items()}
            for blk in range(args.blocks):
                order = ["small", "big"] if blk % 2 == 0 else ["big", "small"]
                for name in order:
                    for at in range(0, per_block, args.posters):
                        group = [next(fresh) for _ in range(min(args.posters, per_block - at))]
                        await sides[name].block(b.url, group, f"m{name}{blk}-{at}-")
            rows = {name: s.row(name, args.small if name == "small" else args.big) for name, s in sides.items()}
            for row in rows.values():
                print(json.dumps(row), flush=True)
            print(json.dumps({
                "bench": "task_engagements.ratio", "setup_s": round(setup_s, 1),
                "ratio_cycle_p50": round(rows["big"]["cycle_p50_ms"] / rows["small"]["cycle_p50_ms"], 3),
                "ratio_cpu": round(rows["big"]["daemon_cpu_us_per_cycle"] / rows["small"]["daemon_cpu_us_per_cycle"], 3),
                "goal": "ratio_cycle_p50 <= 1.2",  # issue 27 item 4 ("target" names a side elsewhere)
            }), flush=True)

        asyncio.run(run())


if __name__ == "__main__":
    main()
