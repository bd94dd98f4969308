"""``memory.create`` on one node: LMDB against PostgreSQL, same run.

Starts a throwaway PostgreSQL cluster (tests/pg.py: initdb in a temporary
directory, a free port on 127.0.0.1, fsync on) and, in alternating rounds, a
fresh daemon on LMDB and a fresh daemon on a new PostgreSQL database
(``[storage] url``), each measured with the same client code as
``bench/memory_create.py`` (each connection its own agent, one request at a
time). Prints one JSON row per measurement and the PG/LMDB ratios.

    python bench/pg_store.py                       # 64 connections, 5 s, 2 rounds
    python bench/pg_store.py --connections 1,64 --seconds 3 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.memory_create import _register, bench_daemon, cpu_per_action, cpu_snapshot, measure  # noqa: E402
from tests.pg import PgCluster, find_bindir  # noqa: E402


async def _one(url: str, conns: list[int], seconds: float, warmup: float, store: str, rnd: int) -> list[dict]:
    keys = await _register(url, max(conns))
    rows = []
    for c in conns:
        before = cpu_snapshot(url)
        row = {"bench": "memory.create", "store": store, "round": rnd,
               **await measure(url, keys[:c], seconds, warmup, f"{store}{rnd}-{c}")}
        row["cpu_us_per_action"] = cpu_per_action(before, cpu_snapshot(url))
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--warmup", type=float, default=0.5)
    p.add_argument("--rounds", type=int, default=2, help="alternating LMDB/PostgreSQL rounds (default 2)")
    p.add_argument("--connections", type=lambda s: [int(x) for x in s.split(",")], default=[64])
    args = p.parse_args()
    bindir = find_bindir()
    if bindir is None:
        sys.exit("bench/pg_store.py: no PostgreSQL binaries (initdb, pg_ctl) found")
    cluster = PgCluster(bindir)
    results: dict[tuple[str, int], list[dict]] = {}
    try:
        for rnd in range(args.rounds):
            for store in ("lmdb", "postgresql"):
                extra = "" if store == "lmdb" else f'[storage]\nurl = "{cluster.new_database()}"\n'
                with bench_daemon(extra, prefix=f"kungfud-bench-{store}-") as b:
                    for row in asyncio.run(_one(b.url, args.connections, args.seconds, args.warmup, store, rnd)):
                        results.setdefault((store, row["connections"]), []).append(row)
    finally:
        cluster.destroy()
    for c in args.connections:
        med = {
            s: {k: statistics.median(r[k] for r in results[(s, c)]) for k in ("per_s", "p50_ms", "p99_ms")}
            for s in ("lmdb", "postgresql")
        }
        print(json.dumps({"bench": "memory.create", "connections": c, "median_of_rounds": med,
                          "ratio_pg_over_lmdb": {k: round(med["postgresql"][k] / med["lmdb"][k], 2) for k in med["lmdb"]}}),
              flush=True)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
