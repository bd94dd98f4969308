"""Issue 27, target 3: posts across many busy Threads cost what posts across a
few cost (D280: actors carried by a fixed set of threads).

    python bench/live_actors.py [--counts 64,1000,10000] [--seconds 4] [--blocks 3]
                                [--base DIR] [--actor-threads N[,N…]] [--pg]

64 connections, one agent each, each posting sequentially (one request in
flight), each cycling through its own share of N Threads: N = 64 is one busy
Thread per connection (the baseline), N = 1,000 and 10,000 are many. Every
Thread is created and posted to once before the measurements, so every actor is
live when measured (idle actors stop after 60 s; a block cycle is far shorter).
The counts are measured in alternating blocks (each count once per block, the
order rotating), so the machine's drift hits all alike.

Each build runs two daemons: ``many`` holds every Thread (all of them live, so
its 64-Thread blocks run beside 10,000 live actors), ``solo`` holds only 64
Threads (the issue's baseline: the rate into 64 busy Threads, nothing else
live).

Per (build, daemon, count): posts/s (median over the blocks), p50/p99, daemon CPU per
post (``/proc/PID/task/*/schedstat``), and after the count's last block the
daemon's RSS, its OS threads and its live actors. The ratio line holds, for
each count, its rate ÷ the rate of the same build's ``solo`` daemon (target
≥ 0.8), and ÷ the ``many`` daemon's own 64-Thread rate. With ``--base DIR`` a second daemon runs the checkout at DIR (an
older build, e.g. one OS thread per actor) through the same blocks.

No speed is asserted anywhere.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import urllib.request
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from action_cost import cpu_ns  # noqa: E402
from memory_create import ROOT, _dec, _enc, _knows, _memory_kb, _register, bench_daemon, connect, measure  # noqa: E402

CONNECTIONS = 64


def _os_threads(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    return 0


def _live_actors(url: str) -> int | None:
    http = url.replace("ws://", "http://", 1).rsplit("/", 1)[0] + "/metrics"
    with urllib.request.urlopen(http, timeout=10) as r:  # noqa: S310 (loopback)
        for line in r.read().decode().splitlines():
            if line.startswith("kungfud_live_actors "):
                return int(float(line.split()[1]))
    return None


def _median(xs) -> float | None:
    xs = [x for x in xs if x is not None]
    return round(statistics.median(xs), 3) if xs else None


async def _setup(url: str, keys: list[str], n: int) -> list[list[str]]:
    """``n`` Threads, connection c creating every 64th; returns each
    connection's Threads, then posts once into each (every actor live)."""
    mine: list[list[str]] = [[] for _ in keys]

    async def run(c: int, key: str) -> None:
        async with connect(url, compression=None, max_size=None,
                           additional_headers={"Authorization": f"Bearer {key}"}) as ws:
            for i in range(c, n, len(keys)):
                await ws.send(_enc.encode({"id": i, "op": "thread.create", "key": f"t{i}", "args": {}}).decode())
                resp = _dec.decode(await ws.recv())
                assert resp["ok"], resp
                mine[c].append(resp["result"]["thread"])
            for i, t in enumerate(mine[c]):
                frame = {"id": i, "op": "thread.post", "key": f"warm-{c}-{i}", "args": {"thread": t, "content": {"n": 0}}}
                await ws.send(_enc.encode(frame).decode())
                assert _dec.decode(await ws.recv())["ok"]

    await asyncio.gather(*(run(c, k) for c, k in enumerate(keys)))
    return mine


async def _block(side: dict, count: int, seconds: float, tag: str) -> dict:
    share = [ts[: max(1, count // CONNECTIONS + (1 if c < count % CONNECTIONS else 0))]
             for c, ts in enumerate(side["threads"])]
    args = lambda c, n: {"thread": share[c][n % len(share[c])], "content": {"n": n}}  # noqa: E731
    pid = side["pid"]
    before = cpu_ns(pid)
    row = await measure(side["url"], side["keys"], seconds, 0.3, tag, "thread.post", args)
    used = cpu_ns(pid) - before
    row["cpu_us"] = round(used / 1000 / max(1, row["round_trips"]), 1)
    return row


async def run(args: argparse.Namespace, sides: list[dict]) -> None:
    for side in sides:
        top = max(side["counts"])
        side["keys"] = await _register(side["url"], CONNECTIONS)
        side["threads"] = await _setup(side["url"], side["keys"], top)
        side["rows"] = {n: [] for n in side["counts"]}
        print(json.dumps({"bench": "live_actors setup", "build": side["name"], "daemon": side["daemon"], "threads": top,
                          "os_threads": _os_threads(side["pid"]), "live_actors": _live_actors(side["url"])}), flush=True)
    for b in range(args.blocks):
        order = args.counts[b % len(args.counts):] + args.counts[: b % len(args.counts)]
        for count in order:
            for side in sides if b % 2 == 0 else sides[::-1]:
                if count in side["counts"]:
                    row = await _block(side, count, args.seconds, f"{side['name']}-{side['daemon']}-{count}-{b}")
                    side["rows"][count].append(row)
    solo: dict[str, float] = {}
    for side in sorted(sides, key=lambda s: s["daemon"] != "solo"):
        pid = side["pid"]
        mem = _memory_kb(pid)
        rates = {}
        for count in side["counts"]:
            rows = side["rows"][count]
            rates[count] = _median(r["per_s"] for r in rows)
            print(json.dumps({
                "bench": "thread.post across busy Threads", "build": side["name"], "daemon": side["daemon"],
                "threads": count,
                "connections": CONNECTIONS, "per_s": rates[count],
                "p50_ms": _median(r["p50_ms"] for r in rows), "p99_ms": _median(r["p99_ms"] for r in rows),
                "cpu_us": _median(r["cpu_us"] for r in rows),
                "errors": sum(r["errors"] for r in rows), "blocks": len(rows),
            }), flush=True)
        low = min(side["counts"])
        if side["daemon"] == "solo":
            solo[side["name"]] = rates[low]
        ratios = {f"rate_{n}_vs_solo": round(rates[n] / solo[side["name"]], 3) for n in side["counts"] if solo.get(side["name"])}
        if side["daemon"] == "many":
            ratios.update({f"rate_{n}_vs_{low}_here": round(rates[n] / rates[low], 3) for n in side["counts"] if rates[low]})
        print(json.dumps({
            "bench": "live_actors ratio", "build": side["name"], "daemon": side["daemon"], **ratios,
            "daemon_rss_kb": mem["VmRSS"], "daemon_peak_rss_kb": mem["VmHWM"],
            "os_threads": _os_threads(pid), "live_actors": _live_actors(side["url"]),
            "target": ">= 0.8",
        }), flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--counts", type=lambda s: sorted(int(x) for x in s.split(",")), default=[64, 1000, 10000])
    p.add_argument("--seconds", type=float, default=4.0, help="measured seconds per (count, block)")
    p.add_argument("--blocks", type=int, default=3)
    p.add_argument("--base", help="another checkout measured beside this one")
    p.add_argument("--pg", action="store_true",
                   help="every daemon on a database of its own in a throwaway PostgreSQL cluster (tests/pg.py)")
    p.add_argument("--actor-threads", type=lambda s: [int(x) for x in s.split(",")], default=[],
                   help="[server] actor_threads for this build; several (1,8,32) measure each as a build of its own")
    args = p.parse_args()
    plan = [(f"this@{n}", f"[server]\nactor_threads = {n}\n", ROOT) for n in args.actor_threads] or [("this", "", ROOT)]
    if args.base:
        plan.append(("base", "", Path(args.base).resolve()))
    with ExitStack() as stack:
        cluster = None
        if args.pg:
            sys.path.insert(0, str(ROOT))
            from tests.pg import PgCluster, find_bindir  # noqa: PLC0415

            bindir = find_bindir()
            if bindir is None:
                sys.exit("bench/live_actors.py: no PostgreSQL binaries (initdb, pg_ctl) found")
            cluster = PgCluster(bindir)
            stack.callback(cluster.destroy)
        sides = []
        for name, extra, root in plan:
            # 64 registrations at once ([limits]).
            extra = (
                "registrations_per_minute = 1000000000\n" if _knows(root, "registrations_per_minute") else "") + extra
            for daemon, counts in (("solo", [min(args.counts)]), ("many", args.counts)):
                store = f'[storage]\nurl = "{cluster.new_database()}"\n' if cluster is not None else ""
                b = stack.enter_context(bench_daemon(extra + store, prefix=f"kungfud-live-{name}-{daemon}-", root=root))
                sides.append({"name": name, "daemon": daemon, "counts": counts, "url": b.url, "pid": b.daemon.pid})
        asyncio.run(run(args, sides))


if __name__ == "__main__":
    main()
