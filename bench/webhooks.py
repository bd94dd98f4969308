"""Webhook delivery (WIRE.md 1.2): fan-out, latency, backlog drain, the HTTP
clients, and the cost of idle endpoints to actions, against fresh daemons and
receivers in this process.

    python bench/webhooks.py [--quick] [--only fanout,backlog,clients,...] [--fanout 1000,10000]
                             [--baseline /work/main] [--rounds 3]

Prints one JSON line per figure, each with the load average when it was taken:

- ``fanout`` (issue 38 §1): ``n`` agents, each with an endpoint, are asked in
  posts of at most 1,000 (the ``ask`` bound) sent together → every POST
  received: all-in seconds, p50/p99 per delivery (sent → received), the
  daemon's CPU per delivery. ``--baseline DIR`` (another checkout, e.g. the
  main checkout) runs the same agents on a second daemon from there, the
  posts alternating between the two in ``--rounds`` rounds; ``slow_half``:
  the same with half the agents' receivers answering after ``SLOW_ANSWER_S``
  (another origin): the fast half's all-in time is what fairness promises.
- ``clients``: CPU per POST of httpx, aiohttp (when installed) and kungfud's
  own client (webhooks/http1.py, D390), 4 at a time to a keep-alive receiver
  in another process, alternating rounds.

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
import contextlib
import json
import multiprocessing
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memory_create import _register, bench_daemon, cpu_seconds, measure  # noqa: E402

from kungfud.client import Client  # noqa: E402

ROOT_DIR = Path(__file__).resolve().parent.parent


class Receiver:
    """Records when each webhook-id first arrived; answers ``status``."""

    def __init__(self) -> None:
        self.arrived: dict[str, float] = {}
        self.status = 200
        self.delay = 0.0  # seconds before each answer (a slow receiver)
        self.count = 0
        self.waiters: dict[str, list[asyncio.Future]] = {}
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
            self.waiters.setdefault(msg_id, []).append(fut)
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
                if self.delay:
                    await asyncio.sleep(self.delay)
                status = self.status
                if 200 <= status < 300:
                    msg_id = hdrs.get("webhook-id", "")
                    agent = msg_id.rsplit(".", 1)[0]
                    if msg_id not in self.arrived:
                        self.count += 1
                        self.arrived[msg_id] = now
                        self.arrived.setdefault(agent, now)
                    for key in (msg_id, agent):
                        for w in self.waiters.pop(key, ()):
                            if not w.done():
                                w.set_result(now)
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


async def backlog(url: str, pid: int, rx: Receiver, events: int, build: str = "this") -> None:
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
    print(json.dumps({"bench": "webhooks", "figure": "backlog", "build": build, "load": _load(),
                      "events": events, "delivered": done,
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

SLOW_ANSWER_S = 0.2  # a slow receiver's answer (below the 1 s that marks an origin slow: it holds its slots)


def _load() -> float:
    return round(os.getloadavg()[0], 2)


PER_THREAD = 5000


async def _setup_many(url: str, n: int, url_for) -> tuple[Client, list[str], list[str]]:
    """An asker, Threads of ``PER_THREAD`` agents, ``n`` agents that joined them, agent i's endpoint
    ``url_for(i, agent)``; at most 16 set up at a time."""
    reg = await Client.connect(url)
    ka = (await reg.act("agent.register", {"content": {"name": "asker"}}))["key"]
    await reg.close()
    a = await Client.connect(url, ka)
    threads, grants = [], []
    for _ in range(0, n, PER_THREAD):  # a Thread holds at most 10,000 members by default
        threads.append((await a.act("thread.create", {"content": {"title": "fanout"}}))["thread"])
        grants.append(await a.act("thread.admit", {"thread": threads[-1], "role": "speaker"}))  # one grant, all join
    agents: list[str] = [""] * n
    gate = asyncio.Semaphore(16)

    async def one(i: int) -> None:
        async with gate:
            r = await a.act("agent.register", {"content": {"name": f"h{i}"}})
            c = await Client.connect(url, r["key"])
            try:
                await c.act("thread.join", {"token": grants[i // PER_THREAD]["token"]})
                await c.act("webhook.set", {"url": url_for(i, r["agent"])})
            finally:
                await c.close()
            agents[i] = r["agent"]

    await asyncio.gather(*(one(i) for i in range(n)))
    return a, threads, agents


async def _fan_once(d: dict, rxs: list[Receiver], wait_for: list[str], q: int) -> dict:
    """One round on one daemon: posts asking all its agents (1,000 per post,
    sent together) → the POSTs of ``wait_for`` received."""
    for rx in rxs:
        for who in d["agents"]:
            rx.arrived.pop(who, None)
    futs = [next(rx for rx in rxs if who in d["where"][rx.port]).wait_for(who) for who in wait_for]
    cpu0 = cpu_seconds(d["pid"])
    sent = time.perf_counter()
    agents = d["agents"]
    await asyncio.gather(*(
        d["asker"].act("thread.post", {"thread": d["thread"][i // PER_THREAD], "content": {"q": q},
                                       "ask": agents[i:i + 1000]})
        for i in range(0, len(agents), 1000)
    ))
    got = [t - sent for t in await asyncio.wait_for(asyncio.gather(*futs), 600)]
    all_in = max(got)
    await asyncio.sleep(0.2)  # the batched cursor write after the last POST
    cpu = cpu_seconds(d["pid"]) - cpu0
    return {"all_in_s": round(all_in, 3), "p50_ms": _pct(got, 0.5), "p99_ms": _pct(got, 0.99),
            "cpu_us_per_delivery": round(cpu / len(got) * 1e6, 1), "load": _load()}


async def fanout(daemons: dict[str, dict], n: int, rounds: int, slow_half: bool) -> None:
    fast, slow = await Receiver().start(), await Receiver().start()
    slow.delay = SLOW_ANSWER_S
    for name, d in daemons.items():
        def url_for(i: int, agent: str) -> str:
            rx = slow if slow_half and i % 2 else fast
            return f"http://127.0.0.1:{rx.port}/{agent}"

        d["asker"], d["thread"], d["agents"] = await _setup_many(d["url"], n, url_for)
        d["where"] = {fast.port: set(d["agents"][0::2] if slow_half else d["agents"]),
                      slow.port: set(d["agents"][1::2] if slow_half else [])}
    rows: dict[str, list[dict]] = {name: [] for name in daemons}
    names = list(daemons)
    for r in range(rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            d = daemons[name]
            wait_for = d["agents"][0::2] if slow_half else d["agents"]  # the fast half: what fairness promises
            rows[name].append(await _fan_once(d, [fast, slow], wait_for, r))
            if slow_half:  # the slow half drains before the next round (not timed)
                await asyncio.wait_for(asyncio.gather(*(slow.wait_for(w) for w in d["agents"][1::2])), 600)
    for name, got in rows.items():
        print(json.dumps({"bench": "webhooks", "figure": "fanout" + (" slow_half (fast half timed)" if slow_half else ""),
                          "build": name, "agents": n, "rounds": got}), flush=True)


def _serve_204(port_q) -> None:
    """A keep-alive receiver in its own process (its CPU is not the client's)."""
    async def conn(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await r.readuntil(b"\r\n\r\n")
                i = head.lower().find(b"content-length:")
                await r.readexactly(int(head[i + 15:head.index(b"\r\n", i)]) if i >= 0 else 0)
                w.write(b"HTTP/1.1 204 No Content\r\n\r\n")
        except Exception:
            pass
        finally:
            w.close()

    async def main() -> None:
        s = await asyncio.start_server(conn, "127.0.0.1", 0, backlog=1000)
        port_q.put(s.sockets[0].getsockname()[1])
        await asyncio.Event().wait()

    asyncio.run(main())


async def _client_cpu(kind: str, port: int, n: int, conc: int = 4) -> float:
    """CPU seconds per POST of ``kind``, ``conc`` at a time, signed as a delivery is."""
    from kungfud.webhooks import post as P
    from kungfud.webhooks.guard import target
    from kungfud.webhooks.sign import signature

    body = b'{"agent":"ag_x","seq":1,"event":"turn","data":{"added":[{"thread":"th_x","kind":"respond"}],"ended":[]}}'
    url = f"http://127.0.0.1:{port}/hook"
    hdrs = lambda i: {"webhook-id": f"ag_x.{i}", "webhook-timestamp": "1",  # noqa: E731
                      "webhook-signature": signature(b"k" * 32, f"ag_x.{i}", 1, body), "content-type": "application/json"}
    if kind == "httpx":
        import httpx
        c = httpx.AsyncClient(limits=httpx.Limits(max_connections=conc), trust_env=False)

        async def one(i: int) -> None:
            async with c.stream("POST", url, content=body, headers=hdrs(i)) as r:
                async for _ in r.aiter_raw():
                    pass
        close = c.aclose
    elif kind == "aiohttp":
        import aiohttp
        c = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=conc), auto_decompress=False)

        async def one(i: int) -> None:
            async with c.post(url, data=body, headers=hdrs(i), allow_redirects=False) as r:
                await r.content.read(4096)
        close = c.close
    else:
        c = P.new_client(conc)

        async def one(i: int) -> None:
            t = await target(url, (f"127.0.0.1:{port}",))
            assert await P.send(c, t, b"k" * 32, f"ag_x.{i}", 1, body) is None
        close = c.aclose
    gate = asyncio.Semaphore(conc)

    async def limited(i: int) -> None:
        async with gate:
            await one(i)

    await asyncio.gather(*(limited(i) for i in range(50)))  # connections made
    c0 = time.process_time()
    await asyncio.gather(*(limited(i) for i in range(n)))
    cpu = time.process_time() - c0
    await close()
    return cpu / n


def clients(n: int, rounds: int) -> None:
    import importlib.util

    kinds = ["httpx", "kungfud http1"] + (["aiohttp"] if importlib.util.find_spec("aiohttp") else [])
    q: multiprocessing.Queue = multiprocessing.Queue()
    proc = multiprocessing.Process(target=_serve_204, args=(q,), daemon=True)
    proc.start()
    port = q.get()
    try:
        run = asyncio.run
        try:
            import uvloop  # the daemon's loop when installed
            run = uvloop.run
        except ImportError:
            pass
        got: dict[str, list] = {k: [] for k in kinds}
        for r in range(rounds):
            for kind in (kinds if r % 2 == 0 else kinds[::-1]):
                got[kind].append((round(run(_client_cpu(kind, port, n)) * 1e6, 1), _load()))
        for kind, rows in got.items():
            print(json.dumps({"bench": "webhooks", "figure": "clients", "client": kind, "posts": n,
                              "cpu_us_per_post_and_load": rows}), flush=True)
    finally:
        proc.kill()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="short measurements (smoke run)")
    p.add_argument("--posts", type=int, default=200)
    p.add_argument("--backlog", type=int, default=10_000)
    p.add_argument("--seconds", type=float, default=10.0, help="memory.create time per daemon, in all")
    p.add_argument("--rounds", type=int, default=10, help="alternating windows per daemon (idle)")
    p.add_argument("--fanout", default="1000,10000", help="agents per fan-out figure (comma-separated)")
    p.add_argument("--fan-rounds", type=int, default=3, help="fan-outs per daemon, alternating")
    p.add_argument("--baseline", default="", help="another checkout run beside this one (fanout, backlog)")
    p.add_argument("--only", default="fanout,slow_half,backlog,clients,latency,idle", help="which figures")
    args = p.parse_args()
    if args.quick:
        args.posts, args.backlog, args.seconds, args.rounds, args.fanout, args.fan_rounds = 30, 500, 2.0, 4, "200", 2
    # (the first line lands in bench_daemon's [limits]: 10,000 agents register within a minute)
    cfg = 'registrations_per_minute = 1000000000\n[webhooks]\nallow_hosts = ["127.0.0.1:*"]\nretry_pauses_s = [0.1]\n'
    roots = {"this": ROOT_DIR, **({"baseline": Path(args.baseline)} if args.baseline else {})}

    async def run(step) -> None:
        rx = await Receiver().start()
        await step(rx)

    only = set(args.only.split(","))
    if "clients" in only:
        clients(300 if args.quick else 2000, 2 if args.quick else 4)
    for kind in ("fanout", "slow_half"):
        if kind not in only:
            continue
        for n in (int(x) for x in args.fanout.split(",") if x):
            with contextlib.ExitStack() as stack:
                daemons = {}
                for name, root in roots.items():
                    b = stack.enter_context(bench_daemon(cfg, prefix="kungfud-bench-webhooks-", root=root))
                    daemons[name] = {"url": b.url, "pid": b.daemon.pid}
                asyncio.run(fanout(daemons, n, args.fan_rounds, kind == "slow_half"))
    if "backlog" in only:
        for r, (name, root) in enumerate([*roots.items(), *list(roots.items())[::-1]][: 2 * len(roots)]):
            with bench_daemon(cfg, prefix="kungfud-bench-webhooks-", root=root) as b:
                asyncio.run(run(lambda rx: backlog(b.url, b.daemon.pid, rx, args.backlog, name)))
    for holders in (1, 100) if "latency" in only else ():
        with bench_daemon(cfg, prefix="kungfud-bench-webhooks-") as b:
            asyncio.run(run(lambda rx: latency(b.url, rx, holders, args.posts)))
    if "idle" in only:
        with bench_daemon(cfg, prefix="kungfud-bench-webhooks-") as b0, \
                bench_daemon(cfg, prefix="kungfud-bench-webhooks-") as b1:
            asyncio.run(run(lambda rx: idle_cost(b0.url, b1.url, rx, args.seconds, args.rounds)))


if __name__ == "__main__":
    main()
