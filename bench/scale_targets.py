"""Issue 13's scaling targets, each measured in one run against one daemon:

1. ``thread.post`` p50 into a Thread of 2,000 members ≤ 1.2× into one of 10
   (8 members of both post broadcasts concurrently, each sequentially; the two
   Threads measured in alternating blocks so drift hits both alike);
2. 100,000 ``thread.create`` by 64 agents (64 connections, sequential each) ≥
   0.8× the ``memory.create`` rate of the same 64 connections, measured before
   and after the creates;
3. 4,000 posts that each ask and assign ≤ 1.3× the time of 4,000 plain posts
   (8 concurrent posters, each kind in its own Thread, nobody answers: pending
   responses and untaken assignments pile up to 4,000).

Concurrent posters keep the daemon busy, so the figures show CPU per post (the
size of the state decoded, folded and encoded), not one fsync per request.

    python bench/scale_targets.py [--members 2000] [--creates 100000] [--posts 4000]

Every figure is one JSON line; the last line holds the three ratios. Run it from
any checkout: it speaks only the wire, so ``PYTHONPATH=<old checkout>`` measures
an older daemon with the same client code (docs/performance.md, issue 13).
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

from memory_create import _dec, _enc, _register, bench_daemon, measure  # noqa: E402
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


async def _posting(url: str, keys: list[str], tag: str, args_for, total: int) -> tuple[list[float], float]:
    """``len(keys)`` connections post concurrently, each sequentially, ``total``
    posts in all: (latencies, seconds). Concurrent posters keep the Thread's
    actor and the writer busy, so the time is CPU (decoding, folding, encoding
    state), not the wait for one fsync per sequential post."""
    conns = [await Conn.open(url, k, f"{tag}{i}") for i, k in enumerate(keys)]
    lat: list[float] = []
    each = total // len(conns)
    t0 = time.perf_counter()

    async def run(i: int, c: Conn) -> None:
        for n in range(each):
            lat.append((await c.call("thread.post", args_for(i, n)))[1])

    await asyncio.gather(*(run(i, c) for i, c in enumerate(conns)))
    took = time.perf_counter() - t0
    for c in conns:
        await c.close()
    return lat, took


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


async def creates_target(url: str, keys: list[str], creates: int, seconds: float) -> dict:
    """Target 2: ``thread.create`` by 64 agents against ``memory.create``."""
    before = await measure(url, keys, seconds, 0.5, "mc-before")
    conns = [await Conn.open(url, k, f"tc{i}") for i, k in enumerate(keys)]
    each = creates // len(conns)
    lat: list[float] = []
    t0 = time.perf_counter()

    async def run(c: Conn) -> None:
        for _ in range(each):
            lat.append((await c.call("thread.create", {}))[1])

    await asyncio.gather(*(run(c) for c in conns))
    took = time.perf_counter() - t0
    for c in conns:
        await c.close()
    after = await measure(url, keys, seconds, 0.5, "mc-after")
    tail = lat[-len(lat) // 10 :]
    row = {
        "bench": "scale.creates",
        "agents": len(keys),
        "thread_creates": len(lat),
        "thread_create_per_s": round(len(lat) / took, 1),
        "thread_create_p50_ms": _pct(lat, 0.5),
        "thread_create_p99_ms": _pct(lat, 0.99),
        "last_tenth_p50_ms": _pct(tail, 0.5),
        "memory_create_per_s_before": before["per_s"],
        "memory_create_per_s_after": after["per_s"],
        "memory_create_p50_ms": [before["p50_ms"], after["p50_ms"]],
    }
    row["ratio_rate"] = round(row["thread_create_per_s"] / ((before["per_s"] + after["per_s"]) / 2), 3)
    print(json.dumps(row), flush=True)
    return row


async def pending_target(url: str, keys: list[str], posts: int, posters: int) -> dict:
    """Target 3: posts that each ask and assign against plain posts, by
    ``posters`` members posting concurrently, each kind into its own Thread;
    poster i asks and assigns poster i+1, so nobody answers and pending
    responses and untaken assignments pile up to ``posts``."""
    gov = await Conn.open(url, keys[0], "t3")
    plain = await _thread_with(url, gov, keys[1 : posters + 1], "plain")
    work = await _thread_with(url, gov, keys[1 : posters + 1], "work")
    await gov.close()
    who = [m["agent"] for m in (await _read(url, keys[1], "thread.get", {"thread": work}))["members"]]
    ids = {k: a for k, a in zip(keys[1 : posters + 1], who[1:])}  # joined in key order (after the creator)
    posting = keys[1 : posters + 1]
    row: dict = {"bench": "scale.pending", "posts": posts, "posters": posters}
    for name, t, extra in (
        ("plain", plain, lambda i: {}),
        ("ask_assign", work, lambda i: {"ask": [ids[posting[(i + 1) % posters]]], "assign": {
            "to": ids[posting[(i + 1) % posters]], "content": {"criteria": "x"}}}),
    ):
        lat, took = await _posting(url, posting, name, lambda i, n, t=t, extra=extra: {
            "thread": t, "content": {"text": "bench"}, **extra(i)}, posts)
        row[f"{name}_s"] = round(took, 3)
        row[f"{name}_p50_ms"] = _pct(lat, 0.5)
        row[f"{name}_p99_ms"] = _pct(lat, 0.99)
        row[f"{name}_last_tenth_p50_ms"] = _pct(lat[-posts // 10 :], 0.5)
    row["ratio_time"] = round(row["ask_assign_s"] / row["plain_s"], 3)
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
    p.add_argument("--seconds", type=float, default=5.0, help="each memory.create measurement")
    p.add_argument("--posts", type=int, default=4000)
    p.add_argument("--posters", type=int, default=8, help="concurrent posters (targets 1 and 3)")
    p.add_argument("--only", default="members,creates,pending")
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
                out["creates_rate_ratio"] = (await creates_target(b.url, keys[-64:], args.creates, args.seconds))["ratio_rate"]
            if "pending" in only:
                out["ask_assign_time_ratio"] = (await pending_target(b.url, keys[-(args.posters + 1):], args.posts, args.posters))["ratio_time"]
            print(json.dumps({"bench": "scale.targets", **out, "targets": {
                "members_p50_ratio": "<= 1.2", "creates_rate_ratio": ">= 0.8", "ask_assign_time_ratio": "<= 1.3"}}), flush=True)

        asyncio.run(run())


if __name__ == "__main__":
    main()
