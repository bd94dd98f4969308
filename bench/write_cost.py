"""CPU per action of what one action writes, in-process (issue 13, targets 2
and 3): no socket, no event loop — ``Runtime.act`` on a temp LMDB store, the
real actors and the real writer thread, many actions in flight so the writer
groups them as the daemon does.

Four workloads, each N actions:
- ``memory.create`` by 64 agents (one object, two index rows);
- ``thread.create`` by 64 agents (three objects, five index rows);
- plain ``thread.post`` by 8 posters into one Thread (one fact, one object);
- ``thread.post`` that asks and assigns, 8 posters into another Thread (two
  facts, two new objects, pending/live/obligation/opportunity/event rows).

For each it prints one JSON line: process CPU per action (``time.process_time``
over every thread: actors, writer, this driver) and the writer thread's CPU per
action (``time.thread_time`` inside ``Writer._write_batch``: planning, encoding,
the kv puts, the commit's own CPU — not the wait for the fsync), and of it the planner's
(``Writer._plan``) and the kv writes' (``Writer._execute``). Then the two
ratios the issue's targets 2 and 3 are about: thread.create / memory.create
and ask+assign / plain, per action, process CPU. CPU time does not depend on
the machine's load the way wall time does (it grows a little with cache
contention), so before and after can be compared on a shared machine::

    python bench/write_cost.py [--n 4000] [--rounds 2] [--together]
    PYTHONPATH=/path/to/old/checkout python bench/write_cost.py   # before
    python bench/write_cost.py --profile thread.create            # writer-thread profile

``--together``: each round's jobs reach each actor in one message, as the
server's bridge sends the jobs of one loop turn (and as D281's one view per
message serves them); without it each job is its own message.

No speed is asserted anywhere.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import shutil
import tempfile
import threading
import time
from typing import Any

import msgspec

from kungfud.actors.runtime import Runtime
from kungfud.store import Committed, Store
from kungfud.wire.ops import OPS

_enc = msgspec.json.Encoder()


class Bench:
    """One Runtime over a fresh store, with the writer thread's CPU counted."""

    def __init__(self, profile: bool = False, together: bool = False):
        self.together = together  # each round's jobs to each actor in one message
        self.dir = tempfile.mkdtemp(prefix="kf-writecost-")
        self.store = Store(self.dir)
        self.rt = Runtime(self.store)
        self.writer_cpu = 0.0
        self.prof = cProfile.Profile() if profile else None
        self.profiling = False
        w = self.rt.writer
        inner = w._write_batch

        def timed(batch: list) -> None:
            t0 = time.thread_time()
            on = self.profiling and self.prof is not None
            if on:
                self.prof.enable()
            try:
                inner(batch)
            finally:
                if on:
                    self.prof.disable()
                self.writer_cpu += time.thread_time() - t0

        w._write_batch = timed  # type: ignore[method-assign]
        self.parts = {"_plan": 0.0, "_execute": 0.0}
        for part in self.parts:
            setattr(w, part, self._counted(part, getattr(w, part)))
        self.rt.start()
        self.n = 0

    def _counted(self, part: str, fn: Any) -> Any:
        def counted(*args: Any) -> Any:
            t0 = time.thread_time()
            try:
                return fn(*args)
            finally:
                self.parts[part] += time.thread_time() - t0

        return counted

    def close(self) -> None:
        self.rt.stop()
        self.store.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def act_many(self, calls: list[tuple[str | None, str, dict]]) -> list[dict]:
        """Enter every call at once; wait for all; their results (raises on a refusal)."""
        done = threading.Semaphore(0)
        out: list[Any] = [None] * len(calls)

        def reply_to(i: int):
            def reply(outcome: Any) -> None:
                out[i] = outcome
                done.release()

            return reply

        together: dict[str, list] = {}
        for i, (agent, op, args) in enumerate(calls):
            self.n += 1
            a = msgspec.json.decode(_enc.encode(args), type=OPS[op].args)
            if not self.together:
                self.rt.act(agent, op, f"k{self.n}", a, reply_to(i))
                continue
            job = self.rt.job(agent, op, f"k{self.n}", a, reply_to(i))
            together.setdefault(self.rt.route(job), []).append(job)
        for actor, jobs in together.items():  # as the server's bridge sends a loop turn's jobs
            self.rt.submit_many(jobs, actor)
        for _ in calls:
            done.acquire()
        results = []
        for (_, op, _), o in zip(calls, out):
            if not isinstance(o, Committed):
                raise RuntimeError(f"{op}: {o}")
            results.append(msgspec.json.decode(o.result))
        return results

    def register(self, n: int) -> list[str]:
        rs = self.act_many([(None, "agent.register", {"content": {"name": f"b{i}"}}) for i in range(n)])
        return [r["agent"] for r in rs]

    def thread_with(self, gov: str, agents: list[str]) -> str:
        t = self.act_many([(gov, "thread.create", {})])[0]["thread"]
        token = self.act_many([(gov, "thread.admit", {"thread": t})])[0]["token"]
        for a in agents:
            self.act_many([(a, "thread.join", {"token": token})])
        return t

    def run(self, name: str, calls_per_round, rounds: int, profile: bool = False) -> dict:
        """``rounds`` rounds of ``calls_per_round(r)`` (all in flight at once)."""
        c0, w0, b0, i0 = time.process_time(), self.writer_cpu, self.rt.writer.batches, self.rt.writer.items
        p0 = dict(self.parts)
        t0 = time.perf_counter()
        self.profiling = profile
        n = 0
        for r in range(rounds):
            calls = calls_per_round(r)
            self.act_many(calls)
            n += len(calls)
        self.profiling = False
        wall = time.perf_counter() - t0
        cpu, wcpu = time.process_time() - c0, self.writer_cpu - w0
        batches, items = self.rt.writer.batches - b0, self.rt.writer.items - i0
        return {
            "bench": "write_cost",
            "op": name,
            "actions": n,
            "cpu_us_per_action": round(cpu / n * 1e6, 1),
            "writer_cpu_us_per_action": round(wcpu / n * 1e6, 1),
            "plan_us_per_action": round((self.parts["_plan"] - p0["_plan"]) / n * 1e6, 1),
            "execute_us_per_action": round((self.parts["_execute"] - p0["_execute"]) / n * 1e6, 1),
            "items_per_batch": round(items / max(batches, 1), 1),
            "wall_s_noisy": round(wall, 3),
        }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=4000, help="actions per workload")
    ap.add_argument("--agents", type=int, default=64)
    ap.add_argument("--posters", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=2, help="repeat the four workloads, alternating")
    ap.add_argument("--profile", choices=["memory.create", "thread.create", "plain", "ask_assign"])
    ap.add_argument("--together", action="store_true", help="each round's jobs reach each actor in one message (as the server sends them)")
    ap.add_argument("--only", choices=["memory.create", "thread.create", "plain", "ask_assign"], help="run one workload (for an outside profiler)")
    opts = ap.parse_args()
    b = Bench(profile=opts.profile is not None, together=opts.together)
    try:
        agents = b.register(opts.agents)
        posters = agents[: opts.posters]
        gov = agents[-1]
        plain = b.thread_with(gov, posters)
        work = b.thread_with(gov, posters)
        k = len(posters)

        def ask(i: int) -> dict:
            to = posters[(i + 1) % k]
            return {"ask": [to], "assign": {"to": to, "content": {"criteria": "x"}}}

        workloads = {
            "memory.create": (lambda r: [(a, "memory.create", {"content": {"title": "bench", "n": r}}) for a in agents], opts.agents),
            "thread.create": (lambda r: [(a, "thread.create", {}) for a in agents], opts.agents),
            "plain": (lambda r: [(p, "thread.post", {"thread": plain, "content": {"text": "bench"}}) for p in posters], k),
            "ask_assign": (
                lambda r: [(p, "thread.post", {"thread": work, "content": {"text": "bench"}, **ask(i)}) for i, p in enumerate(posters)],
                k,
            ),
        }
        rows: dict[str, list[dict]] = {w: [] for w in workloads}
        for name, (calls, per) in workloads.items():  # warm every path once
            b.run(name, calls, 4)
        for _ in range(opts.rounds):
            for name, (calls, per) in workloads.items():
                if name != (opts.profile or opts.only or name):
                    continue
                row = b.run(name, calls, max(1, opts.n // per // opts.rounds), profile=opts.profile == name)
                print(json.dumps(row), flush=True)
                rows[name].append(row)
        if opts.profile is not None or opts.only is not None:
            if b.prof is not None:
                b.prof.disable()
                pstats.Stats(b.prof).sort_stats("tottime").print_stats(30)
            return

        def per(name: str, field: str) -> float:
            return sum(r[field] for r in rows[name]) / len(rows[name])

        out = {"bench": "write_cost.ratios"}
        for field in ("cpu_us_per_action", "writer_cpu_us_per_action", "plan_us_per_action", "execute_us_per_action"):
            out[f"thread_create_over_memory_create_{field}"] = round(per("thread.create", field) / per("memory.create", field), 3)
            out[f"ask_assign_over_plain_{field}"] = round(per("ask_assign", field) / per("plain", field), 3)
        print(json.dumps(out), flush=True)
    finally:
        b.close()


if __name__ == "__main__":
    main()
