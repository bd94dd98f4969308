"""Issue 13's scaling targets, each measured in one run against one daemon:

1. ``thread.post`` p50 into a Thread of 2,000 members ≤ 1.2× into one of 10
   (8 members of both post broadcasts concurrently, each sequentially; the two
   Threads measured in alternating blocks so drift hits both alike);
2. 100,000 ``thread.create`` by 64 agents (64 connections, sequential each) ≥
   0.8× the ``memory.create`` rate of the same 64 connections (as many
   ``memory.create``), the two in 20 alternating blocks of the same size;
3. 4,000 posts that each ask and assign ≤ 1.3× the time of 4,000 plain posts
   (8 concurrent posters, each kind in its own Thread, in 20 alternating
   blocks; nobody answers: pending responses and untaken assignments pile up
   to 4,000). With ``--parts`` posts that only ask and posts that only
   assign run in the same blocks, each kind's ratio to plain beside it.

Targets 2 and 3 alternate their two sides in blocks as target 1 does: on this
shared VM one side measured a minute after the other can differ 2x by drift
alone (docs/performance-log.md, 2026-12-02).

Concurrent posters keep the daemon busy, so the figures show CPU per post (the
size of the state decoded, folded and encoded), not one fsync per request.

    python bench/scale_targets.py [--members 2000] [--creates 100000] [--posts 4000] [--blocks 20] [--parts]

Every figure is one JSON line; the last line holds the three ratios. Run it from
any checkout: it speaks only the wire, so ``PYTHONPATH=<old checkout>`` measures
an older daemon with the same client code (docs/performance-log.md, issue 13).
No speed is asserted anywhere.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from memory_create import _dec, _enc, _register, bench_daemon, cpu_seconds  # noqa: E402
from websockets.asyncio.client import connect  # noqa: E402


def _pct(xs: list[float], q: float) -> float | None:
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(q * len(xs)))] * 1000, 3) if xs else None


class Conn:
    """One authenticated connection sending one request at a time."""

    def __init__(self, ws, tag: str):
        self.ws = ws
        self.tag = tag
        self.n = 0

    @classmethod
    async def open(cls, url: str, key: str, tag: str) -> "Conn":
        ws = await connect(url, compression=None, max_size=None, additional_headers={"Authorization": f"Bearer {key}"})
        return cls(ws, tag)

    async def call(self, op: str, args: dict) -> tuple[dict, float]:
        self.n += 1
        frame = {"id": self.n, "op": op, "args": args}
        if not op.endswith(".get"):
            frame["key"] = f"{self.tag}-{self.n}"
        sent = time.perf_counter()
        await self.ws.send(_enc.encode(frame).decode())
        resp = _dec.decode(await self.ws.recv())
        took = time.perf_counter() - sent
        if not resp.get("ok"):
            raise RuntimeError(f"{op} failed: {resp}")
        return resp["result"], took

    async def close(self) -> None:
        await self.ws.close()


async def _thread_with(url: str, gov: Conn, keys: list[str], tag: str) -> str:
    """A Thread created by ``gov`` with each key's agent joined as a speaker."""
    t = (await gov.call("thread.create", {}))[0]["thread"]
    token = (await gov.call("thread.admit", {"thread": t}))[0]["token"]

    async def join(i: int, key: str) -> None:
        c = await Conn.open(url, key, f"{tag}-j{i}")
        await c.call("thread.join", {"token": token})
        await c.close()

    for at in range(0, len(keys), 64):
        await asyncio.gather(*(join(at + i, k) for i, k in enumerate(keys[at : at + 64])))
    return t


async def _timed(conns: list[Conn], each: int, op: str, args_for) -> tuple[list[float], float]:
    """Every connection sends ``each`` requests of ``op`` in turn, all
    connections at once: (latencies, seconds)."""
    lat: list[float] = []
    t0 = time.perf_counter()

    async def run(i: int, c: Conn) -> None:
        for n in range(each):
            lat.append((await c.call(op, args_for(i, n)))[1])

    await asyncio.gather(*(run(i, c) for i, c in enumerate(conns)))
    return lat, time.perf_counter() - t0


async def _posting(url: str, keys: list[str], tag: str, args_for, total: int) -> tuple[list[float], float]:
    """``len(keys)`` connections post concurrently, each sequentially, ``total``
    posts in all: (latencies, seconds). Concurrent posters keep the Thread's
    actor and the writer busy, so the time is CPU (decoding, folding, encoding
    state), not the wait for one fsync per sequential post."""
    conns = [await Conn.open(url, k, f"{tag}{i}") for i, k in enumerate(keys)]
    try:
        return await _timed(conns, total // len(conns), "thread.post", args_for)
    finally:
        for c in conns:
            await c.close()


async def members_target(url: str, keys: list[str], members: int, posts: int, block: int, posters: int) -> dict:
    """Target 1: post latency into a 10-member Thread and a ``members`` one, by
    the same ``posters`` members of both, in alternating blocks."""
    gov = await Conn.open(url, keys[0], "t1")
    small = await _thread_with(url, gov, keys[1:10], "small")
    big = await _thread_with(url, gov, keys[1:members], "big")
    await gov.close()
    lat: dict[str, list[float]] = {"small": [], "big": []}
    took = {"small": 0.0, "big": 0.0}
    for name, t in (("small", small), ("big", big)):  # warm both
        await _posting(url, keys[:posters], f"w{name}", lambda i, n: {"thread": t, "content": {"text": "warm"}}, posters * 5)
    done = 0
    while done < posts:
        for name, t in (("small", small), ("big", big)):
            args = lambda i, n, t=t: {"thread": t, "content": {"text": "bench", "n": n}}  # noqa: E731
            ls, s = await _posting(url, keys[:posters], f"{name}{done}-", args, block)
            lat[name] += ls
            took[name] += s
        done += block
    row = {"bench": "scale.members", "members": [10, members], "posters": posters, "posts_each": len(lat["small"])}
    for name in ("small", "big"):
        row[f"{name}_p50_ms"] = _pct(lat[name], 0.5)
        row[f"{name}_p99_ms"] = _pct(lat[name], 0.99)
        row[f"{name}_per_s"] = round(len(lat[name]) / took[name], 1)
    row["ratio_p50"] = round(row["big_p50_ms"] / row["small_p50_ms"], 3)
    print(json.dumps(row), flush=True)
    return row


class Timed:
    """Latencies, wall seconds and the daemon's CPU seconds, summed over blocks."""

    def __init__(self, pid: int):
        self.pid = pid
        self.lat: list[float] = []
        self.wall = 0.0
        self.cpu = 0.0

    async def block(self, conns: list[Conn], each: int, op: str, args_for) -> None:
        c0 = cpu_seconds(self.pid)
        lat, took = await _timed(conns, each, op, args_for)
        self.cpu += cpu_seconds(self.pid) - c0
        self.lat += lat
        self.wall += took

    def cpu_us(self) -> float:
        return round(self.cpu / max(1, len(self.lat)) * 1e6, 1)


async def creates_target(url: str, pid: int, keys: list[str], creates: int, blocks: int) -> dict:
    """Target 2: ``creates`` ``thread.create`` by 64 agents against as many
    ``memory.create`` by the same 64 connections. Both run in ``blocks``
    blocks of the same size, alternating (and which goes first alternating
    too), so the machine's drift (this VM's speed moves 2x within a minute)
    and the wait for a block's slowest connection hit both rates alike. The
    Threads still pile up to ``creates``: the last tenth shows any growth.
    Beside the rates, the daemon's CPU per action of each side: the cost
    behind the rates, which the machine's load moves much less."""
    conns = [await Conn.open(url, k, f"tc{i}") for i, k in enumerate(keys)]
    each = creates // len(conns) // blocks
    memory = lambda i, n: {"content": {"title": "bench", "n": n}}  # noqa: E731
    thread = lambda i, n: {}  # noqa: E731
    await _timed(conns, 20, "memory.create", memory)  # warm both paths
    await _timed(conns, 20, "thread.create", thread)
    sides = {"thread.create": Timed(pid), "memory.create": Timed(pid)}
    for b in range(blocks):
        order = [("thread.create", thread), ("memory.create", memory)]
        for op, args_for in order if b % 2 == 0 else order[::-1]:
            await sides[op].block(conns, each, op, args_for)
    for c in conns:
        await c.close()
    t, m = sides["thread.create"], sides["memory.create"]
    row = {
        "bench": "scale.creates",
        "agents": len(keys),
        "thread_creates": len(t.lat),
        "blocks": blocks,
        "thread_create_per_s": round(len(t.lat) / t.wall, 1),
        "thread_create_p50_ms": _pct(t.lat, 0.5),
        "thread_create_p99_ms": _pct(t.lat, 0.99),
        "last_tenth_p50_ms": _pct(t.lat[-len(t.lat) // 10 :], 0.5),
        "memory_creates": len(m.lat),
        "memory_create_per_s": round(len(m.lat) / m.wall, 1),
        "memory_create_p50_ms": _pct(m.lat, 0.5),
        "daemon_cpu_us": {"thread.create": t.cpu_us(), "memory.create": m.cpu_us()},
    }
    row["ratio_rate"] = round(row["thread_create_per_s"] / row["memory_create_per_s"], 3)
    row["ratio_cpu"] = round(m.cpu_us() / t.cpu_us(), 3)  # as a rate: >= 0.8 is the target's side
    print(json.dumps(row), flush=True)
    return row


async def pending_target(url: str, pid: int, keys: list[str], posts: int, posters: int, blocks: int, parts: bool = False) -> dict:
    """Target 3: posts that each ask and assign against plain posts, by
    ``posters`` members posting concurrently, each kind into its own Thread,
    in ``blocks`` alternating blocks (as target 2, so drift hits both alike);
    poster i asks and assigns poster i+1, so nobody answers and pending
    responses and untaken assignments pile up to ``posts``. With ``parts``,
    posts that only ask and posts that only assign run in the same blocks,
    each in a Thread of its own: which half of the cost is which."""
    gov = await Conn.open(url, keys[0], "t3")
    names = ["plain", "ask_assign"] + (["ask", "assign"] if parts else [])
    threads = {name: await _thread_with(url, gov, keys[1 : posters + 1], name) for name in names}
    await gov.close()
    who = [m["agent"] for m in (await _read(url, keys[1], "thread.get", {"thread": threads["plain"]}))["members"]]
    ids = {k: a for k, a in zip(keys[1 : posters + 1], who[1:])}  # joined in key order (after the creator)
    posting = keys[1 : posters + 1]
    conns = [await Conn.open(url, k, f"t3p{i}") for i, k in enumerate(posting)]

    def to(i: int) -> str:
        return ids[posting[(i + 1) % posters]]

    def post(name: str, i: int) -> dict:
        """Poster i's post of kind ``name``: plain, or asking and/or assigning poster i+1."""
        args: dict = {"thread": threads[name], "content": {"text": "bench"}}
        if name in ("ask", "ask_assign"):
            args["ask"] = [to(i)]
        if name in ("assign", "ask_assign"):
            args["assign"] = {"to": to(i), "content": {"criteria": "x"}}
        return args

    row: dict = {"bench": "scale.pending", "posts": posts, "posters": posters, "blocks": blocks}
    sides = {name: Timed(pid) for name in names}
    each = posts // posters // blocks
    for b in range(blocks):
        for name in names if b % 2 == 0 else names[::-1]:
            await sides[name].block(conns, each, "thread.post", lambda i, n: post(name, i))  # noqa: B023 (awaited here)
    for c in conns:
        await c.close()
    for name, t in sides.items():
        row[f"{name}_posts"] = len(t.lat)
        row[f"{name}_s"] = round(t.wall, 3)
        row[f"{name}_p50_ms"] = _pct(t.lat, 0.5)
        row[f"{name}_p99_ms"] = _pct(t.lat, 0.99)
        row[f"{name}_last_tenth_p50_ms"] = _pct(t.lat[-len(t.lat) // 10 :], 0.5)
        row[f"{name}_daemon_cpu_us"] = t.cpu_us()
    row["ratio_time"] = round(row["ask_assign_s"] / row["plain_s"], 3)
    row["ratio_cpu"] = round(row["ask_assign_daemon_cpu_us"] / row["plain_daemon_cpu_us"], 3)
    for name in names[2:]:
        row[f"{name}_ratio_time"] = round(row[f"{name}_s"] / row["plain_s"], 3)
        row[f"{name}_ratio_cpu"] = round(row[f"{name}_daemon_cpu_us"] / row["plain_daemon_cpu_us"], 3)
    print(json.dumps(row), flush=True)
    return row


async def _read(url: str, key: str, op: str, args: dict) -> dict:
    c = await Conn.open(url, key, "read")
    try:
        return (await c.call(op, args))[0]
    finally:
        await c.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--members", type=int, default=2000)
    p.add_argument("--member-posts", type=int, default=1000, help="posts into each of the two Threads")
    p.add_argument("--creates", type=int, default=100_000)
    p.add_argument("--blocks", type=int, default=20, help="alternating blocks (targets 2 and 3)")
    p.add_argument("--posts", type=int, default=4000)
    p.add_argument("--posters", type=int, default=8, help="concurrent posters (targets 1 and 3)")
    p.add_argument("--only", default="members,creates,pending")
    p.add_argument("--parts", action="store_true", help="target 3 also times posts that only ask and only assign")
    args = p.parse_args()
    only = set(args.only.split(","))

    # 2,000 agents register in one run: the registration limit is raised too.
    with bench_daemon("registrations_per_minute = 1000000000\n", prefix="kungfud-scale-") as b:

        async def run() -> None:
            keys = await _register(b.url, max(args.members, 64))
            out = {}
            if "members" in only:
                out["members_p50_ratio"] = (await members_target(b.url, keys, args.members, args.member_posts, 200, args.posters))["ratio_p50"]
            if "creates" in only:
                out["creates_rate_ratio"] = (await creates_target(b.url, b.daemon.pid, keys[-64:], args.creates, args.blocks))["ratio_rate"]
            if "pending" in only:
                out["ask_assign_time_ratio"] = (await pending_target(b.url, b.daemon.pid, keys[-(args.posters + 1):], args.posts, args.posters, args.blocks, args.parts))["ratio_time"]
            print(json.dumps({"bench": "scale.targets", **out, "targets": {
                "members_p50_ratio": "<= 1.2", "creates_rate_ratio": ">= 0.8", "ask_assign_time_ratio": "<= 1.3"}}), flush=True)

        asyncio.run(run())


if __name__ == "__main__":
    main()
