"""Webhook delivery (WIRE.md 1.2): latency, backlog drain, and the cost of idle
endpoints to actions, against a fresh daemon and a receiver in this process.

    python bench/webhooks.py [--quick] [--posts 200] [--backlog 10000] [--seconds 10] [--rounds 10]

Prints one JSON line per figure:

- ``latency``: a ``thread.post`` asking one agent, sent → that agent's webhook
  POST received (p50/p99), sequentially, with 1 and with 100 agents holding
  endpoints; and ``fanout``: one post asking all 100 → each POST received.
- ``backlog``: an endpoint that refuses (HTTP 503) while ``--backlog`` events
  are committed (the outage; the pause schedule is shortened with the
  test/bench-only ``[webhooks] retry_pauses_s = [0.1]``, so the outage's
  length does not matter), then accepts: events/s to drain it, and the
  daemon's CPU per delivery.
- ``memory.create`` throughput of a daemon with no endpoint and of one with 100
  idle endpoints, started together and measured in alternating windows in the
  same run, and their ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memory_create import _register, bench_daemon, cpu_seconds, measure  # noqa: E402

from kungfud.client import Client  # noqa: E402


class Receiver:
    """Records when each webhook-id first arrived; answers ``status``."""

    def __init__(self) -> None:
        self.arrived: dict[str, float] = {}
        self.status = 200
        self.count = 0
        self.waiters: list[tuple[str, asyncio.Future]] = []
        self.port = 0

    async def start(self) -> "Receiver":
        server = await asyncio.start_server(self._conn, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        return self

    def wait_for(self, msg_id: str) -> asyncio.Future:
        fut = asyncio.get_running_loop().create_future()
        if msg_id in self.arrived:
            fut.set_result(self.arrived[msg_id])
        else:
            self.waiters.append((msg_id, fut))
        return fut

    async def _conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                now = time.perf_counter()
                hdrs = {}
                for line in head.decode("latin-1").split("\r\n")[1:]:
                    k, _, v = line.partition(":")
                    hdrs[k.strip().lower()] = v.strip()
                await reader.readexactly(int(hdrs.get("content-length", "0")))
                status = self.status
                if 200 <= status < 300:
                    msg_id = hdrs.get("webhook-id", "")
                    agent = msg_id.rsplit(".", 1)[0]
                    if msg_id not in self.arrived:
                        self.count += 1
                        self.arrived[msg_id] = now
                        self.arrived.setdefault(agent, now)
                    for w in [w for w in self.waiters if w[0] in (msg_id, agent)]:
                        self.waiters.remove(w)
                        if not w[1].done():
                            w[1].set_result(now)
                writer.write(b"HTTP/1.1 %d X\r\ncontent-length: 0\r\n\r\n" % status)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        except asyncio.CancelledError:
            # The receiver closing at the end of a figure cancels its open
            # connections: end quietly (asyncio's stream callback would print
            # the cancellation as an error).
            pass
        finally:
            writer.close()


def _pct(xs: list[float], q: float) -> float | None:
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(q * len(xs)))] * 1000, 3) if xs else None


async def _setup(url: str, n: int, rx: Receiver, hooks: bool = True) -> tuple[Client, str, list[str], list[Client]]:
    """An asker, a Thread, ``n`` agents that joined it, each with an endpoint
    (without ``hooks``: the same, no endpoint)."""
    reg = await Client.connect(url)
    ka = (await reg.act("agent.register", {"content": {"name": "asker"}}))["key"]
    await reg.close()
    a = await Client.connect(url, ka)
    t = (await a.act("thread.create", {"content": {"title": "bench"}}))["thread"]
    agents, clients = [], []
    for _ in range(n):
        r = await a.act("agent.register", {"content": {"name": "hooked"}})
        c = await Client.connect(url, r["key"])
        g = await a.act("thread.admit", {"thread": t, "role": "speaker"})
        await c.act("thread.join", {"token": g["token"]})
        if hooks:
            await c.act("webhook.set", {"url": f"http://127.0.0.1:{rx.port}/{r['agent']}"})
        agents.append(r["agent"])
        clients.append(c)
    return a, t, agents, clients


async def latency(url: str, rx: Receiver, holders: int, posts: int) -> None:
    a, t, agents, _ = await _setup(url, holders, rx)
    lat = []
    for i in range(posts):
        who = agents[i % len(agents)]
        rx.arrived.pop(who, None)
        fut = rx.wait_for(who)
        sent = time.perf_counter()
        await a.act("thread.post", {"thread": t, "content": {"q": i}, "ask": [who]})
        lat.append(await asyncio.wait_for(fut, 30) - sent)
    print(json.dumps({"bench": "webhooks", "figure": "latency", "endpoints": holders, "posts": posts,
                      "p50_ms": _pct(lat, 0.5), "p99_ms": _pct(lat, 0.99)}), flush=True)
    if holders > 1:
        for who in agents:
            rx.arrived.pop(who, None)
        futs = [rx.wait_for(who) for who in agents]
        sent = time.perf_counter()
        await a.act("thread.post", {"thread": t, "content": {"q": "all"}, "ask": agents})
        got = [await asyncio.wait_for(f, 60) - sent for f in futs]
        print(json.dumps({"bench": "webhooks", "figure": "fanout", "endpoints": holders,
                          "p50_ms": _pct(got, 0.5), "p99_ms": _pct(got, 0.99)}), flush=True)


async def backlog(url: str, pid: int, rx: Receiver, events: int) -> None:
    a, t, (who,), _ = await _setup(url, 1, rx)
    rx.status = 503  # the outage: refused, retried every 0.1 s
    gate = asyncio.Semaphore(32)

    async def post(i: int) -> None:
        async with gate:
            await a.act("thread.post", {"thread": t, "content": {"q": i}, "ask": [who]})

    await asyncio.gather(*(post(i) for i in range(events)))
    before = rx.count
    cpu0, t0 = cpu_seconds(pid), time.perf_counter()
    rx.status = 200
    while rx.count - before < events:
        await asyncio.sleep(0.02)
        if time.perf_counter() - t0 > 600:
            break
    took = time.perf_counter() - t0
    done = rx.count - before
    cpu = cpu_seconds(pid) - cpu0
    print(json.dumps({"bench": "webhooks", "figure": "backlog", "events": events, "delivered": done,
                      "seconds": round(took, 2), "per_s": round(done / took, 1),
                      "cpu_us_per_delivery": round(cpu / max(1, done) * 1e6, 1)}), flush=True)


async def idle_cost(none_url: str, hooked_url: str, rx: Receiver, seconds: float, rounds: int) -> None:
    """Two daemons started together, one with 100 idle endpoints: measured in
    alternating windows (``rounds`` each, ``seconds`` in all), so the machine's
    load falls on both alike."""
    await _setup(none_url, 100, rx, hooks=False)  # the same agents and Thread on both daemons ...
    await _setup(hooked_url, 100, rx)  # ... and 100 endpoints (no events for them) on this one
    keys = {u: await _register(u, 1) for u in (none_url, hooked_url)}
    totals = {none_url: 0, hooked_url: 0}
    window = seconds / rounds
    for r in range(rounds):
        for u in ((none_url, hooked_url) if r % 2 == 0 else (hooked_url, none_url)):
            row = await measure(u, keys[u], window, 0.1, f"r{r}")
            totals[u] += row["round_trips"]
    for tag, u in (("none", none_url), ("100 idle endpoints", hooked_url)):
        print(json.dumps({"bench": "webhooks", "figure": "memory.create", "endpoints": tag, "connections": 1,
                          "seconds": seconds, "per_s": round(totals[u] / seconds, 1)}), flush=True)
    print(json.dumps({"bench": "webhooks", "figure": "memory.create", "ratio": "100 idle endpoints / none",
                      "per_s": round(totals[hooked_url] / max(1, totals[none_url]), 3)}), flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="short measurements (smoke run)")
    p.add_argument("--posts", type=int, default=200)
    p.add_argument("--backlog", type=int, default=10_000)
    p.add_argument("--seconds", type=float, default=10.0, help="memory.create time per daemon, in all")
    p.add_argument("--rounds", type=int, default=10, help="alternating windows per daemon")
    p.add_argument("--only", default="latency,backlog,idle", help="which figures (comma-separated)")
    args = p.parse_args()
    if args.quick:
        args.posts, args.backlog, args.seconds, args.rounds = 30, 500, 2.0, 4
    cfg = '[webhooks]\nallow_hosts = ["127.0.0.1:*"]\nretry_pauses_s = [0.1]\n'

    async def run(step) -> None:
        rx = await Receiver().start()
        await step(rx)

    only = set(args.only.split(","))
    for holders in (1, 100) if "latency" in only else ():
        with bench_daemon(cfg, prefix="kungfud-bench-webhooks-") as b:
            asyncio.run(run(lambda rx: latency(b.url, rx, holders, args.posts)))
    if "backlog" in only:
        with bench_daemon(cfg, prefix="kungfud-bench-webhooks-") as b:
            asyncio.run(run(lambda rx: backlog(b.url, b.daemon.pid, rx, args.backlog)))
    if "idle" in only:
        with bench_daemon(cfg, prefix="kungfud-bench-webhooks-") as b0, \
                bench_daemon(cfg, prefix="kungfud-bench-webhooks-") as b1:
            asyncio.run(run(lambda rx: idle_cost(b0.url, b1.url, rx, args.seconds, args.rounds)))


if __name__ == "__main__":
    main()
