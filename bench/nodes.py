"""Issue 16's figures: kungfud on several nodes, each measured in one run.

1. ``memory.create`` at C connections (default 64) with ``--workers 1`` and
   ``--workers 2`` on one LMDB data directory, against a raw websockets echo
   server with 1 and with 2 processes sharing its port (SO_REUSEPORT, as the
   workers do). Target: workers 2 / echo 2 >= 0.5.
2. One busy Thread: C members post into one Thread concurrently (each
   sequentially), with ``--workers 1`` and ``--workers 2`` (the kernel spreads
   the connections over the workers, so most posts race a post decided on the
   other worker: cross-node contention on one Thread).
3. PostgreSQL (``--pg``, on a throwaway cluster of the machine's PostgreSQL):
   one node and two nodes (two processes; connection i goes to node i mod 2),
   ``memory.create`` and ``thread.post`` at C connections, p50/p99.

    python bench/nodes.py [--seconds 5] [--connections 64] [--pg] [--only lmdb,thread,pg]

Each figure is one JSON line; ratios are within this run only. No speed is
asserted anywhere (docs/scaling.md has the figures and what they mean).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from memory_create import HOST, _register, _start, _stop, measure  # noqa: E402
from scale_targets import Conn, _pct  # noqa: E402

_LIMITS = (
    "[limits]\nactions_per_minute = 1000000000\nreads_per_minute = 1000000000\n"
    "registrations_per_minute = 1000000000\n"
)


@contextmanager
def _tmp(prefix: str) -> Iterator[str]:
    tmp = tempfile.mkdtemp(prefix=prefix)
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def echo(processes: int) -> Iterator[str]:
    """``processes`` echo servers sharing one port."""
    script = str(HERE / "memory_create.py")
    procs = []
    try:
        first, url = _start([sys.executable, script, "--echo-server", "--echo-reuse-port"], "echo listening on ", None)
        procs.append(first)
        port = url.rsplit(":", 1)[1].split("/")[0]
        for _ in range(processes - 1):
            p, _ = _start([sys.executable, script, "--echo-server", "--echo-reuse-port", "--echo-port", port],
                          "echo listening on ", None)
            procs.append(p)
        yield url
    finally:
        for p in procs:
            _stop(p)


@contextmanager
def lmdb_daemon(workers: int) -> Iterator[list[str]]:
    """A daemon on a fresh LMDB data directory with ``workers`` processes on
    one port: [its URL]."""
    with _tmp("kungfud-nodes-") as tmp:
        cfg = os.path.join(tmp, "bench.toml")
        Path(cfg).write_text(_LIMITS)
        extra = ["--workers", str(workers)] if workers > 1 else []
        stderr = open(os.path.join(tmp, "daemon.stderr"), "wb")
        proc, url = _start(
            [sys.executable, "-m", "kungfud", "serve", "--data-dir", os.path.join(tmp, "data"), "--listen",
             f"{HOST}:0", "--config", cfg, "--log-level", "WARNING", *extra],
            "kungfud listening on ", stderr,
        )
        try:
            yield [url]
        finally:
            _stop(proc)
            stderr.close()


@contextmanager
def pg_nodes(database_url: str, nodes: int) -> Iterator[list[str]]:
    """``nodes`` daemons on one PostgreSQL database, each its own process,
    port and node-local data directory; the first is started alone (it
    bootstraps the store)."""
    with _tmp("kungfud-pgnodes-") as tmp:
        cfg = os.path.join(tmp, "bench.toml")
        Path(cfg).write_text(_LIMITS)
        procs, urls = [], []
        stderr = open(os.path.join(tmp, "daemon.stderr"), "wb")
        try:
            for i in range(nodes):
                proc, url = _start(
                    [sys.executable, "-m", "kungfud", "serve", "--store", database_url, "--data-dir",
                     os.path.join(tmp, f"node{i}"), "--listen", f"{HOST}:0", "--config", cfg, "--log-level", "WARNING"],
                    "kungfud listening on ", stderr,
                )
                procs.append(proc)
                urls.append(url)
            yield urls
        finally:
            for p in procs:
                _stop(p)
            stderr.close()


async def _busy_thread(urls: list[str], keys: list[str], seconds: float, tag: str) -> dict:
    """``len(keys) - 1`` members post into one Thread concurrently, connection
    i on node ``i mod n``, for ``seconds``."""
    gov = await Conn.open(urls[0], keys[0], f"{tag}g")
    t = (await gov.call("thread.create", {}))[0]["thread"]
    token = (await gov.call("thread.admit", {"thread": t}))[0]["token"]
    await gov.close()
    posters = [await Conn.open(urls[i % len(urls)], k, f"{tag}{i}") for i, k in enumerate(keys[1:])]
    await asyncio.gather(*(c.call("thread.join", {"token": token}) for c in posters))
    lat: list[float] = []
    errors = 0
    end = time.perf_counter() + seconds

    async def run(c: Conn) -> None:
        nonlocal errors
        while time.perf_counter() < end:
            try:
                lat.append((await c.call("thread.post", {"thread": t, "content": {"text": "bench"}}))[1])
            except RuntimeError:
                errors += 1

    t0 = time.perf_counter()
    await asyncio.gather(*(run(c) for c in posters))
    took = time.perf_counter() - t0
    for c in posters:
        await c.close()
    return {"posters": len(posters), "posts": len(lat), "per_s": round(len(lat) / took, 1),
            "p50_ms": _pct(lat, 0.5), "p99_ms": _pct(lat, 0.99), "errors": errors}


def _row(**kw) -> dict:
    print(json.dumps(kw), flush=True)
    return kw


def lmdb_section(args: argparse.Namespace) -> None:
    c = args.connections
    rates = {}
    for procs in (1, 2):
        with echo(procs) as url:
            r = asyncio.run(measure(url, [None] * c, args.seconds, args.warmup, f"echo{procs}"))
            rates[f"echo{procs}"] = _row(bench="nodes.memory_create", target=f"echo x{procs}", **r)
    for workers in (1, 2):
        with lmdb_daemon(workers) as urls:
            keys = asyncio.run(_register(urls[0], c))
            r = asyncio.run(measure(urls, keys, args.seconds, args.warmup, f"w{workers}"))
            rates[f"w{workers}"] = _row(bench="nodes.memory_create", target=f"kungfud lmdb --workers {workers}", **r)
    ratio = lambda a, b: round(rates[a]["per_s"] / rates[b]["per_s"], 3) if rates[b]["per_s"] else None  # noqa: E731
    _row(bench="nodes.memory_create", ratio="workers2/echo2", connections=c, per_s=ratio("w2", "echo2"), target=">= 0.5")
    _row(bench="nodes.memory_create", ratio="workers1/echo1", connections=c, per_s=ratio("w1", "echo1"))
    _row(bench="nodes.memory_create", ratio="workers2/workers1", connections=c, per_s=ratio("w2", "w1"))


def thread_section(args: argparse.Namespace) -> None:
    rows = {}
    for workers in (1, 2):
        with lmdb_daemon(workers) as urls:
            keys = asyncio.run(_register(urls[0], args.connections + 1))
            r = asyncio.run(_busy_thread(urls, keys, args.seconds, f"t{workers}"))
            rows[workers] = _row(bench="nodes.busy_thread", target=f"kungfud lmdb --workers {workers}", **r)
    _row(bench="nodes.busy_thread", ratio="workers2/workers1",
         per_s=round(rows[2]["per_s"] / rows[1]["per_s"], 3) if rows[1]["per_s"] else None,
         p50_ms=round(rows[2]["p50_ms"] / rows[1]["p50_ms"], 2) if rows[1]["p50_ms"] else None)


def pg_section(args: argparse.Namespace) -> None:
    from tests.pg import PgCluster  # the tests' throwaway cluster (initdb in a temp dir)

    c = args.connections
    with PgCluster() as cluster:
        for n in (1, 2):
            with pg_nodes(cluster.new_database(), n) as urls:
                keys = asyncio.run(_register(urls[0], c + 1))
                r = asyncio.run(measure(urls, keys[:c], args.seconds, args.warmup, f"pg{n}"))
                _row(bench="nodes.memory_create", target=f"kungfud postgresql x{n} nodes", **r)
                r = asyncio.run(_busy_thread(urls, keys, args.seconds, f"pgt{n}"))
                _row(bench="nodes.busy_thread", target=f"kungfud postgresql x{n} nodes", **r)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=5.0, help="measured time per measurement (default 5)")
    p.add_argument("--warmup", type=float, default=0.5, help="unmeasured time before each measurement")
    p.add_argument("--connections", type=int, default=64, help="connections (default 64)")
    p.add_argument("--pg", action="store_true", help="also measure PostgreSQL (one and two nodes)")
    p.add_argument("--only", default="lmdb,thread,pg", help="sections to run (default all)")
    args = p.parse_args()
    if not 0 < args.seconds <= 600 or not 0 < args.connections <= 1000:
        p.error("--seconds must be in (0, 600], --connections in 1..1000")
    only = set(args.only.split(","))
    if "lmdb" in only:
        lmdb_section(args)
    if "thread" in only:
        thread_section(args)
    if args.pg and "pg" in only:
        pg_section(args)


if __name__ == "__main__":
    main()
