"""``search`` (WIRE.md 1.3; issue 37): its latency over a large store, and
what the index adds to ``thread.post``. In-process: ``Runtime`` on a temp LMDB
store (``--store postgresql://…`` for a PostgreSQL one), the real actors and
writer, reads through ``Runtime.read`` as the server calls them.

1. Fill: ``--n`` entries (default 1,000,000) posted by ``--posters`` agents into
   ``--threads`` Threads, each text 8–24 words drawn from a Zipf-like vocabulary
   of 20,000 words, so some words are in most entries and most in few.
2. Index build: the index caught up from the whole log (what the first search's
   thread does, and ``kungfud check --rebuild`` offline); its wall and CPU time.
3. Latency: p50/p99 (and max) of ``--reps`` searches per query shape, by a
   reader who is a member of one Thread in ten (so most matches are not
   readable, and are checked and dropped), each search after ``--writes-between``
   new posts so the catch-up before the read is in the figure: a rare word, a
   common word, two words, a phrase, a prefix, and a search in one Thread.
4. Write cost: CPU per ``thread.post`` (process CPU over every thread), and the
   CPU the next search spends catching the index up per post written since —
   the cost the index adds to a post, paid by the first search after it.

The filled LMDB store is kept under ``--cache`` (default
``/tmp/kungfud-searchbench-<n>-s<seed>``, never in the repository) and copied
to a temporary directory for each run, so 1,000,000 entries are posted once
(about 10 minutes on 2 busy cores) and every later run starts from the same
store; the index is built anew every run (``search.sqlite`` is not kept).
``--no-cache`` fills a temporary store. The write cost's baseline, the CPU of
a post without the index, is measured in the same run.

One JSON line per figure, with the load average. No speed is asserted anywhere::

    nice python bench/search.py --n 20000 --reps 50      # a quick look
    nice python bench/search.py                           # 1,000,000 entries: long the first time
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import tempfile
import threading
import time
from typing import Any

import msgspec

from kungfud.actors.runtime import Runtime
from kungfud.store import Committed
from kungfud.store.open import open_store
from kungfud.store.search_index import index_of
from kungfud.wire.ops import OPS

VOCAB = 20_000
_NO_INDEX = shutil.ignore_patterns("search.sqlite*", "*.lock")  # the index is built anew each run


def _words(rng: random.Random) -> list[str]:
    # Zipf-like: word k with weight 1/k; "w1" is in most texts, "w19999" in few.
    weights = [1 / k for k in range(1, VOCAB + 1)]
    return [f"w{k}" for k in rng.choices(range(1, VOCAB + 1), weights=weights, k=200_000)]


class Bench:
    def __init__(self, store_url: str | None, copy_of: str | None = None):
        self.dir = tempfile.mkdtemp(prefix="kf-searchbench-")
        if copy_of is not None:  # a cached filled store: this run works on a copy
            shutil.copytree(copy_of, self.dir, ignore=_NO_INDEX, dirs_exist_ok=True)
        self.store = open_store(store_url or "lmdb", self.dir)
        self.rt = Runtime(self.store)
        self.rt.start()
        self._key = 0
        self._run = os.urandom(4).hex()  # idempotency keys unique across runs on a cached store

    def close(self) -> None:
        self.rt.stop()
        self.store.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def act_many(self, calls: list[tuple[str | None, str, dict]], in_flight: int = 512) -> list[dict]:
        """Every call, up to ``in_flight`` at once; their results in order."""
        out: list[Any] = [None] * len(calls)
        gate = threading.Semaphore(in_flight)
        done = threading.Event()
        left = [len(calls)]
        lock = threading.Lock()

        def reply_for(i: int):
            def reply(outcome) -> None:
                out[i] = json.loads(outcome.result) if isinstance(outcome, Committed) else outcome
                gate.release()
                with lock:
                    left[0] -= 1
                    if left[0] == 0:
                        done.set()

            return reply

        if not calls:
            return []
        for i, (who, op, args) in enumerate(calls):
            gate.acquire()
            self._key += 1
            self.rt.act(who, op, f"b{self._run}.{self._key}", msgspec.convert(args, OPS[op].args), reply_for(i))
        done.wait()
        failed = [o for o in out if not isinstance(o, dict)]
        assert not failed, failed[:3]
        return out

    def act(self, who: str | None, op: str, **args) -> dict:
        return self.act_many([(who, op, args)])[0]

    def search(self, who: str, **args) -> dict:
        r = self.rt.read("search", who, msgspec.convert(args, OPS["search"].args))
        assert isinstance(r, dict), r
        return r


def _ms(xs: list[float]) -> dict[str, float]:
    xs = sorted(xs)
    return {
        "p50_ms": round(statistics.median(xs) * 1000, 2),
        "p99_ms": round(xs[min(len(xs) - 1, int(len(xs) * 0.99))] * 1000, 2),
        "max_ms": round(xs[-1] * 1000, 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1_000_000, help="entries to fill the store with")
    ap.add_argument("--threads", type=int, default=100)
    ap.add_argument("--posters", type=int, default=16)
    ap.add_argument("--reps", type=int, default=200, help="searches per query shape")
    ap.add_argument("--writes-between", type=int, default=4, help="posts between two searches")
    ap.add_argument("--store", default=None, help="postgresql://… (default: LMDB in a temp dir)")
    ap.add_argument("--seed", type=int, default=37)
    ap.add_argument("--cache", default=None, help="where the filled LMDB store is kept (default /tmp/kungfud-searchbench-<n>-s<seed>)")
    ap.add_argument("--no-cache", action="store_true", help="fill a temporary store, keep nothing")
    ap.add_argument("--fill-only", action="store_true", help="fill the cache and stop")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    words = _words(rng)
    cache = None if a.no_cache or a.store else (a.cache or f"/tmp/kungfud-searchbench-{a.n}-s{a.seed}")
    cached = json.loads(open(os.path.join(cache, "bench.json")).read()) if cache and os.path.exists(os.path.join(cache, "bench.json")) else None
    b = Bench(a.store, os.path.join(cache, "data") if cached else None)
    try:
        if cached:
            posters, reader, threads = cached["posters"], cached["reader"], cached["threads"]
            rng.setstate(tuple(cached["rng"][:1]) + (tuple(cached["rng"][1]),) + tuple(cached["rng"][2:]))
            print(json.dumps({"fill": a.n, "cached": cache}))
        else:
            posters, reader, threads = _fill(a, b, rng, words)
            if cache:
                b.rt.stop()
                shutil.copytree(b.dir, os.path.join(cache, "data"), ignore=_NO_INDEX, dirs_exist_ok=True)
                with open(os.path.join(cache, "bench.json"), "w") as f:
                    json.dump({"posters": posters, "reader": reader, "threads": threads, "rng": rng.getstate()}, f)
                b.rt = Runtime(b.store)
                b.rt.start()
        if not a.fill_only:
            _measure(a, b, rng, words, posters, reader, threads)
    finally:
        b.close()


def _post_calls(rng: random.Random, words: list[str], posters: list[str], threads: list[str], k: int) -> list:
    out = []
    for _ in range(k):
        text = " ".join(rng.sample(words, rng.randint(8, 24)))
        out.append((rng.choice(posters), "thread.post", {"thread": rng.choice(threads), "content": {"text": text}, "ask": []}))
    return out


def _fill(a: Any, b: Bench, rng: random.Random, words: list[str]) -> tuple[list[str], str, list[str]]:
    if True:
        posters = [r["agent"] for r in b.act_many([(None, "agent.register", {"content": {"name": f"p{i}"}}) for i in range(a.posters)])]
        reader = b.act(None, "agent.register", content={"name": "reader"})["agent"]
        threads = []
        for t in range(a.threads):
            gov = posters[t % len(posters)]
            th = b.act(gov, "thread.create")["thread"]
            members = [p for p in posters if p != gov] + ([reader] if t % 10 == 0 else [])
            for m in members:  # a new token voids the last: admit, then join, one by one
                b.act(m, "thread.join", token=b.act(gov, "thread.admit", thread=th)["token"])
            threads.append(th)

        t0, c0 = time.perf_counter(), time.process_time()
        for start in range(0, a.n, 20_000):
            b.act_many(_post_calls(rng, words, posters, threads, min(20_000, a.n - start)))
        fill_s, fill_cpu = time.perf_counter() - t0, time.process_time() - c0
        print(json.dumps({"fill": a.n, "wall_s": round(fill_s, 1), "cpu_per_post_ms": round(fill_cpu / a.n * 1000, 4)}))
    return posters, reader, threads


def _measure(a: Any, b: Bench, rng: random.Random, words: list[str], posters: list[str], reader: str, threads: list[str]) -> None:
    def post_calls(k: int) -> list:
        return _post_calls(rng, words, posters, threads, k)

    if True:
        t0, c0 = time.perf_counter(), time.process_time()
        with b.store.read() as view:  # what a search's thread does with a long backlog (D352), here inline
            index_of(b.store).catch_up(view)
        print(json.dumps({"index_build": a.n, "wall_s": round(time.perf_counter() - t0, 1),
                          "cpu_s": round(time.process_time() - c0, 1), "loadavg": os.getloadavg()}))

        shapes = {
            "rare word": {"q": "w15000"},
            "common word": {"q": "w1"},
            "two words": {"q": "w2 w3"},
            "phrase": {"q": '"w1 w2"'},
            "prefix": {"q": "w123*"},
            "one thread": {"q": "w5", "thread": threads[0]},
        }
        for name, args in shapes.items():
            times, found = [], 0
            for _ in range(a.reps):
                b.act_many(post_calls(a.writes_between))
                t0 = time.perf_counter()
                found = len(b.search(reader, **args)["items"])
                times.append(time.perf_counter() - t0)
            print(json.dumps({"query": name, "args": args, "reps": a.reps, "items": found, **_ms(times), "loadavg": os.getloadavg()}))

        # Write cost, in alternating rounds: CPU per post (the baseline: no index work), then
        # the CPU the next search spends catching the index up, per post written since.
        k, posts, index = 2000, [], []
        b.search(reader, q="w19999")  # warm: nothing left but what follows
        for _ in range(3):
            c0 = time.process_time()
            b.act_many(post_calls(k))
            posts.append((time.process_time() - c0) / k)
            c0 = time.process_time()
            b.search(reader, q="w19998")
            index.append((time.process_time() - c0) / k)
        post_cpu, index_cpu = statistics.median(posts), statistics.median(index)
        print(json.dumps({"post_cpu_ms": round(post_cpu * 1000, 4), "index_cpu_per_post_ms": round(index_cpu * 1000, 4),
                          "added": f"{index_cpu / post_cpu:.1%}", "loadavg": os.getloadavg()}))


if __name__ == "__main__":
    main()
