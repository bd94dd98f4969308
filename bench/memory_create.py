"""``memory.create`` round trips against kungfud, and the same client pattern
against a raw websockets echo server measured in the same run (DESIGN.md
"Performance model": benchmarks report ratios against an echo server).

    python bench/memory_create.py [--seconds 5] [--warmup 0.5] [--connections 1,64]

Starts a fresh daemon as a subprocess on a temporary data directory and an echo
server in its own process, both on 127.0.0.1 only. For each connection count C
it opens C connections (for kungfud each is its own registered agent), and each
connection sends one request, waits for its reply, and sends the next, for
``--seconds`` after ``--warmup``. Prints one JSON line per measurement, one per
kungfud/echo ratio, and the daemon's memory at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, NamedTuple

import msgspec
from websockets.asyncio.client import connect

ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"

_enc = msgspec.json.Encoder()
_dec = msgspec.json.Decoder()


# --- the echo server (runs in its own process) ------------------------------------


class _Frame(msgspec.Struct):
    id: int | str


def echo_main(port: int = 0, reuse_port: bool = False) -> None:
    """Reply to every frame with a success response shaped like kungfud's reply
    to ``memory.create`` (same fields, same size). With ``reuse_port``, several
    echo processes share one port (SO_REUSEPORT), as ``--workers`` does."""
    from websockets.asyncio.server import serve

    frame_dec = msgspec.json.Decoder(_Frame)
    result = {"memory": "me_01m8pa0000000000000000000x", "version": 1, "visibility": "private"}

    async def handler(ws) -> None:
        async for message in ws:
            req = frame_dec.decode(message)
            await ws.send(_enc.encode({"id": req.id, "ok": True, "replayed": False, "result": result}).decode())

    async def main() -> None:
        async with serve(handler, HOST, port, compression=None, max_size=1 << 20, reuse_port=reuse_port or None) as server:
            bound = next(iter(server.sockets)).getsockname()[1]
            print(f"echo listening on ws://{HOST}:{bound}/v1", flush=True)
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            loop.add_signal_handler(signal.SIGTERM, stop.set)
            loop.add_signal_handler(signal.SIGINT, stop.set)
            await stop.wait()

    asyncio.run(main())


# --- processes ----------------------------------------------------------------------


def _start(cmd: list[str], ready: str, stderr, root: Path = ROOT) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(cmd, cwd=root, stdout=subprocess.PIPE, stderr=stderr, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith(ready):
        proc.kill()
        raise SystemExit(f"{cmd[2:4]} did not start: {line!r}")
    return proc, line.split()[-1]


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@contextmanager
def echo_servers(processes: int = 1) -> Iterator[str]:
    """``processes`` echo servers sharing one port (SO_REUSEPORT, as
    ``kungfud serve --workers N`` does), each its own process: their URL."""
    script = str(Path(__file__).resolve())
    procs: list[subprocess.Popen] = []
    try:
        first, url = _start([sys.executable, script, "--echo-server", "--echo-reuse-port"], "echo listening on ", None)
        procs.append(first)
        port = url.rsplit(":", 1)[1].split("/")[0]
        for _ in range(processes - 1):
            procs.append(_start([sys.executable, script, "--echo-server", "--echo-reuse-port", "--echo-port", port],
                                "echo listening on ", None)[0])
        yield url
    finally:
        for proc in procs:
            _stop(proc)


class Bench(NamedTuple):
    daemon: subprocess.Popen
    url: str
    echo_url: str | None
    data_dir: str


@contextmanager
def bench_daemon(
    extra_config: str = "", *, echo: bool = False, prefix: str = "kungfud-bench-", log_level: str = "WARNING",
    root: Path = ROOT,
) -> Iterator[Bench]:
    """A fresh daemon (``python -m kungfud serve``) on a temporary data directory
    and, with ``echo``, the echo server in its own process, both on 127.0.0.1
    only; both stopped and the directory deleted on exit. The per-agent action
    limit (default 1200/min would cap one sequential connection at 20/s) is
    raised: the benchmarks measure the daemon, not the limiter. ``log_level``:
    the daemon's (its stderr goes to a file); ``root``: the checkout whose
    ``kungfud`` runs (another worktree measures an older build)."""
    tmp = tempfile.mkdtemp(prefix=prefix)
    cfg = os.path.join(tmp, "bench.toml")
    with open(cfg, "w") as f:
        # (a build older than reads_per_minute, 8062914 say, refuses the key: root names another checkout)
        reads = "reads_per_minute = 1000000000\n" if Path(root) == ROOT or _knows(root, "reads_per_minute") else ""
        f.write("[limits]\nactions_per_minute = 1000000000\n" + reads + extra_config)
    data_dir = os.path.join(tmp, "data")
    stderr = open(os.path.join(tmp, "daemon.stderr"), "wb")
    daemon = echo_proc = None
    try:
        daemon, url = _start(
            [sys.executable, "-m", "kungfud", "serve", "--data-dir", data_dir,
             "--listen", f"{HOST}:0", "--config", cfg, "--log-level", log_level],
            "kungfud listening on ",
            stderr,
            Path(root),
        )
        echo_url = None
        if echo:
            echo_proc, echo_url = _start([sys.executable, str(Path(__file__).resolve()), "--echo-server"], "echo listening on ", None)
        yield Bench(daemon, url, echo_url, data_dir)
    finally:
        for proc in (echo_proc, daemon):
            if proc is not None:
                _stop(proc)
        stderr.close()
        shutil.rmtree(tmp, ignore_errors=True)


def _knows(root: Path, key: str) -> bool:
    """Whether the checkout at ``root`` has config key ``key``."""
    return key in (Path(root) / "kungfud" / "config.py").read_text()


def cpu_seconds(pid: int) -> float:
    """The CPU seconds (user + system) process ``pid`` has used (Linux)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _memory_kb(pid: int) -> dict[str, int]:
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM", "RssAnon"):
                out[key] = int(value.split()[0])
    return out


def cpu_snapshot(url: str) -> dict[str, float]:
    """The daemon's CPU seconds by thread group and mode, from its /metrics
    (``kungfud_thread_cpu_seconds``; Linux)."""
    import urllib.request

    http = url.replace("ws://", "http://", 1).rsplit("/", 1)[0] + "/metrics"
    with urllib.request.urlopen(http, timeout=10) as r:
        text = r.read().decode()
    out = {"actions": 0.0}
    for line in text.splitlines():
        if line.startswith("kungfud_actions_total{"):
            out["actions"] += float(line.rsplit(" ", 1)[1])
        elif line.startswith("kungfud_thread_cpu_seconds{"):
            labels, value = line.rsplit(" ", 1)
            group = labels.split('group="')[1].split('"')[0]
            mode = labels.split('mode="')[1].split('"')[0]
            out[f"{group}_{mode}"] = float(value)
    return out


def cpu_per_action(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """Microseconds of daemon CPU per action taken between two snapshots, by
    thread group and mode (an actor thread started in between counts from zero,
    which is what it used)."""
    actions = after["actions"] - before["actions"]
    per = {k: round((after[k] - before.get(k, 0.0)) / max(1.0, actions) * 1e6, 1) for k in after if k != "actions"}
    per = {k: v for k, v in per.items() if v > 0}
    per["total"] = round(sum(per.values()), 1)
    return per


# --- the client pattern -------------------------------------------------------------


async def _register(url: str, n: int) -> list[str]:
    keys = []
    async with connect(url, compression=None) as ws:
        for i in range(n):
            frame = {"id": i, "op": "agent.register", "key": f"bench-{i}", "args": {"content": {"name": f"bench{i}"}}}
            await ws.send(_enc.encode(frame).decode())
            resp = _dec.decode(await ws.recv())
            assert resp["ok"], resp
            keys.append(resp["result"]["key"])
    return keys


def _create_args(c: int, n: int) -> dict:
    return {"content": {"title": "bench", "n": n}}


async def measure(
    url: str | list[str],
    keys: list[str | None],
    seconds: float,
    warmup: float,
    tag: str,
    op: str = "memory.create",
    args_for=_create_args,
) -> dict:
    """Each connection sends ``op`` (args from ``args_for(connection, n)``)
    sequentially; round trips that start within [warmup, warmup + seconds) are
    counted. With several URLs (nodes), connection i goes to ``url[i % n]``."""
    urls = [url] if isinstance(url, str) else url
    conns = [
        await connect(urls[i % len(urls)], compression=None, max_size=None,
                      additional_headers={"Authorization": f"Bearer {k}"} if k else None)
        for i, k in enumerate(keys)
    ]
    latencies: list[float] = []
    errors = 0
    t0 = time.perf_counter()
    start, end = t0 + warmup, t0 + warmup + seconds

    async def run(ws, c: int) -> None:
        nonlocal errors
        n = 0
        while True:
            n += 1
            sent = time.perf_counter()
            if sent >= end:
                return
            frame = {"id": n, "op": op, "key": f"{tag}-{c}-{n}", "args": args_for(c, n)}
            await ws.send(_enc.encode(frame).decode())
            resp = _dec.decode(await ws.recv())
            done = time.perf_counter()
            if sent >= start:
                if resp.get("ok"):
                    latencies.append(done - sent)
                else:
                    errors += 1

    await asyncio.gather(*(run(ws, c) for c, ws in enumerate(conns)))
    for ws in conns:
        await ws.close()
    latencies.sort()
    n = len(latencies)
    pct = lambda q: round(latencies[min(n - 1, int(q * n))] * 1000, 3) if n else None  # noqa: E731
    return {
        "connections": len(keys),
        "seconds": seconds,
        "round_trips": n,
        "per_s": round(n / seconds, 1),
        "p50_ms": pct(0.50),
        "p99_ms": pct(0.99),
        "errors": errors,
    }


async def bench(args: argparse.Namespace, daemon_url: str, echo_url: str, keys: list[str]) -> None:
    for c in args.connections:
        rows = {}
        for target, url, ks in (("echo", echo_url, [None] * c), ("kungfud", daemon_url, keys[:c])):
            before = cpu_snapshot(url) if target == "kungfud" else {}
            row = {"bench": "memory.create", "target": target, **await measure(url, ks, args.seconds, args.warmup, f"{target}{c}")}
            if target == "kungfud":
                row["cpu_us_per_action"] = cpu_per_action(before, cpu_snapshot(url))
            rows[target] = row
            print(json.dumps(row), flush=True)
        k, e = rows["kungfud"], rows["echo"]
        print(
            json.dumps(
                {
                    "bench": "memory.create",
                    "ratio": "kungfud/echo",
                    "connections": c,
                    "per_s": round(k["per_s"] / e["per_s"], 3) if e["per_s"] else None,
                    "p50_ms": round(k["p50_ms"] / e["p50_ms"], 2) if k["p50_ms"] and e["p50_ms"] else None,
                    "p99_ms": round(k["p99_ms"] / e["p99_ms"], 2) if k["p99_ms"] and e["p99_ms"] else None,
                }
            ),
            flush=True,
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=5.0, help="measured time per measurement (default 5)")
    p.add_argument("--warmup", type=float, default=0.5, help="unmeasured time before each measurement (default 0.5)")
    p.add_argument(
        "--connections",
        type=lambda s: [int(x) for x in s.split(",")],
        default=[1, 64],
        help="comma-separated connection counts (default 1,64)",
    )
    p.add_argument("--echo-server", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--echo-port", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--echo-reuse-port", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.echo_server:
        echo_main(args.echo_port, args.echo_reuse_port)
        return
    if not 0 < args.seconds <= 600 or not 0 <= args.warmup <= 60 or not all(0 < c <= 1000 for c in args.connections):
        p.error("--seconds must be in (0, 600], --warmup in [0, 60], connection counts in 1..1000")

    with bench_daemon(echo=True) as b:
        keys = asyncio.run(_register(b.url, max(args.connections)))
        asyncio.run(bench(args, b.url, b.echo_url, keys))
        mem = _memory_kb(b.daemon.pid)
        print(json.dumps({"bench": "memory.create", "daemon_rss_kb": mem["VmRSS"], "daemon_peak_rss_kb": mem["VmHWM"]}), flush=True)

if __name__ == "__main__":
    main()
