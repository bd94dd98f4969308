"""Soak: steady mixed load for minutes, sampling the daemon's anonymous RSS,
LMDB reader slots and map usage (issue 6, item 10).

    python bench/soak.py [--seconds 180] [--agents 16] [--sample 10]

Each agent loops over a mixed workload (memory create/update, thread posts that
ask and assign, handle, take/deliver/judge, Task take+deliver/judge, turn and
working-set reads). Prints one JSON line per sample and a summary with the
first/last values; stable means RSS and reader slots do not keep growing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from memory_create import _register, bench_daemon  # noqa: E402

from kungfud.client import Client, Rejected  # noqa: E402


def _status(pid: int) -> dict[str, int]:
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("RssAnon", "VmRSS", "Threads"):
                out[k] = int(v.split()[0])
    return out


def _metric(url: str, name: str) -> float | None:
    base = url.replace("ws://", "http://").rsplit("/", 1)[0]
    with urllib.request.urlopen(base + "/metrics", timeout=10) as r:  # noqa: S310 (loopback)
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    return None


def _readers(data_dir: str) -> int:
    import lmdb

    env = lmdb.open(os.path.join(data_dir, "lmdb"), readonly=True, lock=True, max_dbs=64)
    try:
        table = env.readers()
    finally:
        env.close()
    return max(0, len([ln for ln in table.splitlines() if ln.strip()]) - 1)  # minus the header


async def worker(url: str, key: str, me: str, peers: list[str], thread: str, task: str, end: float, rng: random.Random,
                 counts: dict[str, int]) -> None:
    async with await Client.connect(url, key) as c:
        mems: list[str] = []
        while time.monotonic() < end:
            try:
                r = rng.random()
                if r < 0.15 or not mems:
                    mems.append((await c.act("memory.create", {"content": {"n": rng.random()}}))["memory"])
                elif r < 0.25:
                    await c.act("memory.update", {"memory": rng.choice(mems[-20:]), "content": {"v": rng.random()}})
                elif r < 0.45:
                    args = {"thread": thread, "content": {"t": rng.random()}, "ask": [rng.choice(peers)]}
                    if rng.random() < 0.3:
                        args["assign"] = {"to": rng.choice(peers), "content": {"criteria": "c"}}
                    await c.act("thread.post", args)
                elif r < 0.65:
                    page = await c.read("turn", {"limit": 20})
                    for item in page["items"][:5]:
                        ref = item["ref"]
                        if item["obligation"] == "respond":
                            await c.act("thread.handle", {"thread": ref["thread"], "entry": ref["entry"]})
                        elif item["obligation"] == "deliver" and "assignment" in ref:
                            await c.act("assignment.deliver", {"assignment": ref["assignment"], "content": {"r": 1}})
                        elif item["obligation"] == "judge" and "assignment" in ref:
                            await c.act("assignment.judge", {"assignment": ref["assignment"], "verdict": "adopt"})
                        elif item["obligation"] == "deliver":
                            await c.act("task.deliver", {"engagement": ref["engagement"], "content": {"r": 1}})
                        elif item["obligation"] == "judge":
                            await c.act("task.judge", {"engagement": ref["engagement"], "verdict": "adopt"})
                elif r < 0.75:
                    opp = await c.read("opportunities", {"limit": 5})
                    for item in opp["items"][:2]:
                        if item["opportunity"] == "assignment":
                            await c.act("assignment.take", {"assignment": item["ref"]["assignment"]})
                elif r < 0.85:
                    await c.act("task.take", {"task": task, "deliver": {"content": {"a": rng.random()}}})
                else:
                    await c.read("thread.get", {"thread": thread})
                counts["ok"] += 1
            except Rejected as e:
                counts[e.code] = counts.get(e.code, 0) + 1


async def run(args: argparse.Namespace, url: str, pid: int, data_dir: str) -> None:
    keys = await _register(url, args.agents + 1)
    ids = []
    for k in keys:
        async with await Client.connect(url, k) as c:
            ids.append((await c.read("agent.whoami", {}))["agent"])
    async with await Client.connect(url, keys[-1]) as owner:
        thread = (await owner.act("thread.create", {}))["thread"]
        token = (await owner.act("thread.admit", {"thread": thread}))["token"]
        task = (await owner.act("task.create", {"audience": "open",
                                                "contract": {"content": {"output": "o", "criteria": "c"}}}))["task"]
    for k in keys[:-1]:
        async with await Client.connect(url, k) as c:
            await c.act("thread.join", {"token": token})
    end = time.monotonic() + args.seconds
    counts: dict[str, int] = {"ok": 0}
    rng = random.Random(20261130)
    workers = [
        asyncio.create_task(worker(url, keys[i], ids[i], [x for x in ids[:-1] if x != ids[i]], thread, task, end,
                                   random.Random(rng.getrandbits(64)), counts))
        for i in range(args.agents)
    ]
    samples = []
    t0 = time.monotonic()
    while time.monotonic() < end:
        await asyncio.sleep(args.sample)
        s = _status(pid)
        row = {"bench": "soak sample", "t_s": round(time.monotonic() - t0), "ok": counts["ok"],
               "rss_anon_kb": s.get("RssAnon"), "threads": s.get("Threads"),
               "lmdb_readers": _readers(data_dir),
               "map_used_mb": round((_metric(url, "kungfud_lmdb_map_used_bytes") or 0) / 2**20, 1),
               "facts": _metric(url, "kungfud_facts_total"), "live_actors": _metric(url, "kungfud_live_actors")}
        samples.append(row)
        print(json.dumps(row), flush=True)
    await asyncio.gather(*workers)
    first, last = samples[0], samples[-1]
    print(json.dumps({"bench": "soak", "seconds": args.seconds, "agents": args.agents, "requests_ok": counts["ok"],
                      "rejections": {k: v for k, v in counts.items() if k != "ok"},
                      "rss_anon_kb_first_last_max": [first["rss_anon_kb"], last["rss_anon_kb"],
                                                     max(r["rss_anon_kb"] for r in samples)],
                      "lmdb_readers_max": max(r["lmdb_readers"] for r in samples),
                      "map_used_mb_first_last": [first["map_used_mb"], last["map_used_mb"]]}), flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=180)
    p.add_argument("--agents", type=int, default=16)
    p.add_argument("--sample", type=float, default=10)
    args = p.parse_args()
    with bench_daemon(prefix="kungfud-soak-") as b:
        asyncio.run(run(args, b.url, b.daemon.pid, b.data_dir))

if __name__ == "__main__":
    main()
