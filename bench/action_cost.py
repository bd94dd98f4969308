"""Issue 27, targets 1 and 2: what one action costs the daemon, by thread
group, with the audit log on (the default) and off, and against an older
build — every side in the same run, in alternating blocks.

Sides (each its own daemon at ``--log-level INFO``, stderr to a file, as a
deployment runs; started together, loaded one at a time):

- ``audit`` — this checkout, the audit log on (the default);
- ``no_audit`` — this checkout, ``[server] audit_log = false``;
- ``control`` — with ``--control``: a second daemon the same as ``audit``
  (an A/A pair: the ratio the machine's noise alone gives);
- ``base`` — with ``--base DIR``: the checkout at DIR (e.g. a worktree of an
  older commit), the audit log on.

Workloads: ``create`` (``memory.create`` by 64 connections, one agent each,
sequential each), ``post`` (plain ``thread.post`` by 8 members, concurrently,
into one Thread) and ``ask_assign`` (posts that ask and assign the next
poster; nobody answers). For each block, every (workload, side) runs once, the
order alternating, so the machine's drift hits all sides alike.

Printed per (workload, side): actions/s over its blocks, p50, and the daemon's
CPU per action from ``/proc/PID/task/*/schedstat`` (``cpu_us``, in ns; what
load moves least) with its breakdown by thread group from ``/metrics``
(``kungfud_thread_cpu_seconds``, in 10 ms ticks: coarse unless blocks are
long). The last line holds the ratios: the audit
log's cost (``audit`` / ``no_audit``, rate and CPU: target < 5 %) and, with
``--base``, this build's CPU per action against the base's.

    python bench/action_cost.py [--base /work/wt/perf-base] [--blocks 6] [--each 10]

No speed is asserted anywhere.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from memory_create import ROOT, _knows, _register, bench_daemon, cpu_snapshot  # noqa: E402
from scale_targets import Conn, _pct, _thread_with, _timed  # noqa: E402

WORKLOADS = ("create", "post", "ask_assign")


def cpu_ns(pid: int) -> int:
    """Nanoseconds on a CPU of every live thread of process ``pid``
    (``/proc/PID/task/*/schedstat``, Linux): finer than ``/proc/PID/stat``'s
    10 ms ticks, which a short block cannot resolve."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # a thread that ended meanwhile
    return total
POSTERS = 8


class Side:
    """One daemon: its connections per workload and what each block cost."""

    def __init__(self, name: str, url: str, pid: int):
        self.name, self.url, self.pid = name, url, pid
        self.conns: dict[str, list[Conn]] = {}
        self.args: dict[str, object] = {}
        self.rows: dict[str, dict] = {w: {"lat": [], "wall": 0.0, "cpu": 0.0, "groups": {}} for w in WORKLOADS}

    async def setup(self, workloads: list[str]) -> None:
        keys = await _register(self.url, 64 + POSTERS + 1)
        if "create" in workloads:
            self.conns["create"] = [await Conn.open(self.url, k, f"c{i}") for i, k in enumerate(keys[:64])]
            self.args["create"] = lambda i, n: {"content": {"title": "bench", "n": n}}
        posting = keys[65 : 65 + POSTERS]
        gov = await Conn.open(self.url, keys[64], "gov")
        for w in ("post", "ask_assign"):
            if w not in workloads:
                continue
            t = await _thread_with(self.url, gov, posting, w)
            got = (await gov.call("thread.get", {"thread": t}))[0]
            ids = [m["agent"] for m in got["members"]][1:]  # joined in key order, after the creator
            self.conns[w] = [await Conn.open(self.url, k, f"{w}{i}") for i, k in enumerate(posting)]
            if w == "post":
                self.args[w] = lambda i, n, t=t: {"thread": t, "content": {"text": "bench", "n": n}}
            else:
                self.args[w] = lambda i, n, t=t, ids=ids: {
                    "thread": t, "content": {"text": "bench"}, "ask": [ids[(i + 1) % POSTERS]],
                    "assign": {"to": ids[(i + 1) % POSTERS], "content": {"criteria": "x"}},
                }
        await gov.close()

    async def block(self, w: str, each: int, measure: bool = True) -> None:
        op = "memory.create" if w == "create" else "thread.post"
        before, c0 = cpu_snapshot(self.url), cpu_ns(self.pid)
        lat, took = await _timed(self.conns[w], each, op, self.args[w])
        c1, after = cpu_ns(self.pid), cpu_snapshot(self.url)
        if not measure:
            return
        row = self.rows[w]
        row["lat"] += lat
        row["wall"] += took
        row["cpu"] += (c1 - c0) / 1e9
        row.setdefault("block_rates", []).append(len(lat) / took)
        for k, v in after.items():
            if k != "actions":
                row["groups"][k] = row["groups"].get(k, 0.0) + v - before.get(k, 0.0)

    def summary(self, w: str) -> dict:
        row = self.rows[w]
        n = max(1, len(row["lat"]))
        groups = {k: round(v / n * 1e6, 1) for k, v in sorted(row["groups"].items()) if v > 0}
        return {
            "bench": "action_cost", "workload": w, "side": self.name, "actions": len(row["lat"]),
            "per_s": round(len(row["lat"]) / row["wall"], 1) if row["wall"] else None,
            "block_per_s_median": round(statistics.median(row["block_rates"]), 1) if row.get("block_rates") else None,
            "p50_ms": _pct(row["lat"], 0.5), "p99_ms": _pct(row["lat"], 0.99),
            "cpu_us": round(row["cpu"] / n * 1e6, 1), "cpu_us_per_action": groups,
        }

    async def close(self) -> None:
        for conns in self.conns.values():
            for c in conns:
                await c.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base", help="another checkout to measure beside this one (its daemon, the audit log on)")
    p.add_argument("--blocks", type=int, default=6, help="alternating blocks")
    p.add_argument("--each", type=int, default=10, help="requests per connection per block")
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--no-audit-side", action="store_true", help="leave out the audit-off side")
    p.add_argument("--control", action="store_true", help="a second daemon the same as ``audit`` (A/A: the noise)")
    args = p.parse_args()
    workloads = [w for w in args.workloads.split(",") if w]
    plan = [("audit", "", ROOT)]
    if not args.no_audit_side:
        plan.append(("no_audit", "[server]\naudit_log = false\n", ROOT))
    if args.control:
        plan.append(("control", "", ROOT))
    if args.base:
        plan.append(("base", "", Path(args.base).resolve()))
    registrations = "registrations_per_minute = 1000000000\n"
    with ExitStack() as stack:
        benches = []
        for name, extra, root in plan:
            # an older build may not know the registration limit (72 agents fit the default anyway)
            extra = (registrations if _knows(root, "registrations_per_minute") else "") + extra
            b = stack.enter_context(bench_daemon(extra, prefix=f"kungfud-cost-{name}-", log_level="INFO", root=root))
            benches.append(Side(name, b.url, b.daemon.pid))

        async def run() -> None:
            for s in benches:
                await s.setup(workloads)
                for w in workloads:  # warm every path
                    await s.block(w, 3, measure=False)
            for b in range(args.blocks):
                for w in workloads:
                    for s in benches if b % 2 == 0 else benches[::-1]:
                        await s.block(w, args.each)
            out: dict = {"bench": "action_cost.ratios"}
            for w in workloads:
                rows = {s.name: s.summary(w) for s in benches}
                for row in rows.values():
                    print(json.dumps(row), flush=True)
                if "no_audit" in rows:
                    out[f"{w}_audit_rate_ratio"] = round(rows["audit"]["per_s"] / rows["no_audit"]["per_s"], 3)
                    out[f"{w}_audit_cpu_ratio"] = round(rows["audit"]["cpu_us"] / rows["no_audit"]["cpu_us"], 3)
                if "control" in rows:  # the same daemon twice: what the noise alone gives
                    out[f"{w}_control_cpu_ratio"] = round(rows["control"]["cpu_us"] / rows["audit"]["cpu_us"], 3)
                    out[f"{w}_control_rate_ratio"] = round(rows["control"]["per_s"] / rows["audit"]["per_s"], 3)
                if "base" in rows:
                    out[f"{w}_cpu_vs_base"] = round(rows["audit"]["cpu_us"] / rows["base"]["cpu_us"], 3)
                    out[f"{w}_rate_vs_base"] = round(rows["audit"]["per_s"] / rows["base"]["per_s"], 3)
            for s in benches:
                await s.close()
            out["targets"] = {"*_audit_rate_ratio": ">= 0.95 (the audit log costs < 5 %)", "*_cpu_vs_base": "< 1"}
            print(json.dumps(out), flush=True)

        asyncio.run(run())


if __name__ == "__main__":
    main()
