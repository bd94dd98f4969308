"""``kungfud check``: wall time and peak memory against the store's size (issue 38 §2).

    python bench/check.py [--facts 100000,1000000] [--keep DIR]

For each N, a store of at least N facts is built in-process through the real
actors and writer (bench/write_cost.py's ``Bench``): 200 agents, 20 Threads of
10 members, then rounds of ``memory.create`` (a body of ~400 bytes),
``memory.update``/``publish`` of earlier ones and ``thread.post`` (which make
events for the other members). Then ``kungfud check`` runs in a subprocess and
this prints, as one JSON line per N: facts, the store's bytes on disk, the
check's wall time and exit status, its peak RSS (``ru_maxrss`` of the child,
which counts the pages of the store file it mapped as well as its own) and the
peak of its anonymous memory (``RssAnon`` sampled every 20 ms: what the check
itself holds), and the load average before and after. ``--rebuild`` times
``kungfud check --rebuild`` on the same (consistent) store too. With ``--keep``
the stores are built once under DIR and reused on the next run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.getcwd())

from write_cost import Bench  # noqa: E402

from kungfud.store import Store  # noqa: E402


def build(n: int, where: str) -> int:
    """A store of at least ``n`` facts under ``where``; its fact count."""
    b = Bench()
    try:
        rng = random.Random(n)
        agents = b.register(200)
        threads = [b.thread_with(agents[i * 10], agents[i * 10 + 1 : i * 10 + 10]) for i in range(20)]
        members = {t: agents[i * 10 : i * 10 + 10] for i, t in enumerate(threads)}
        mine: dict[str, list[str]] = {a: [] for a in agents}
        public: set[str] = set()
        with b.store.read() as view:
            facts = view.last_seq()
        last_said = time.monotonic()
        while facts < n:
            calls: list[tuple[str | None, str, dict]] = []
            for _ in range(min(2000, n - facts)):
                roll = rng.random()
                who = rng.choice(agents)
                if roll < 0.5 or not mine[who]:
                    calls.append((who, "memory.create", {"content": {"title": f"m{facts}", "body": "x" * rng.randint(200, 600)}}))
                elif roll < 0.7:
                    m = rng.choice(mine[who])
                    op = "memory.update" if rng.random() < 0.8 or m in public else "memory.publish"
                    if op == "memory.publish":
                        public.add(m)
                    calls.append((who, op, {"memory": m, **({"content": {"v": facts}} if op == "memory.update" else {})}))
                else:
                    t = rng.choice(threads)
                    calls.append((rng.choice(members[t]), "thread.post", {"thread": t, "content": {"text": "y" * 120}}))
            seen: set[str] = set()  # one action per Memory per round: no conflicts
            calls = [c for c in calls if c[2].get("memory") is None or not (c[2]["memory"] in seen or seen.add(c[2]["memory"]))]
            for (who, op, _), r in zip(calls, b.act_many(calls)):
                if op == "memory.create":
                    mine[who].append(r["memory"])
            with b.store.read() as view:
                facts = view.last_seq()
            if time.monotonic() - last_said > 10:
                print(f"  built {facts} facts", file=sys.stderr, flush=True)
                last_said = time.monotonic()
        b.rt.stop()
        b.store.close()
        shutil.copytree(b.dir, where)
        return facts
    finally:
        shutil.rmtree(b.dir, ignore_errors=True)


def measure(data: str, *extra: str) -> dict:
    """One ``kungfud check`` run: wall time, exit status, peak RSS and peak anonymous RSS."""
    t0 = time.monotonic()
    p = subprocess.Popen([sys.executable, "-m", "kungfud", "check", "--data-dir", data, *extra],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    anon = [0, 0]
    done = threading.Event()

    def sample() -> None:  # never waits for the child: wait4 below reaps it, with its rusage
        path = f"/proc/{p.pid}/status"
        while not done.is_set():
            try:
                with open(path) as f:
                    for line in f:
                        if line.startswith("RssAnon:"):
                            anon[0] = max(anon[0], int(line.split()[1]))
                        elif line.startswith("RssFile:"):
                            anon[1] = max(anon[1], int(line.split()[1]))
            except OSError:
                return
            time.sleep(0.02)

    s = threading.Thread(target=sample, daemon=True)
    s.start()
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    done.set()
    p.returncode = os.waitstatus_to_exitcode(status)
    out = p.stdout.read().decode().strip().splitlines()  # type: ignore[union-attr]
    s.join()
    return {
        "wall_s": round(wall, 2), "rc": p.returncode, "said": out[-1] if out else "",
        "peak_rss_mib": round(usage.ru_maxrss / 1024, 1), "peak_anon_mib": round(anon[0] / 1024, 1),
        "peak_file_mib": round(anon[1] / 1024, 1),
    }


def store_bytes(data: str) -> int:
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(data) for f in fs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--facts", default="100000,1000000")
    ap.add_argument("--keep", default=None, help="build the stores here once and reuse them")
    ap.add_argument("--rebuild", action="store_true", help="time check --rebuild as well")
    a = ap.parse_args()
    root = a.keep or os.path.join(os.environ.get("TMPDIR", "/tmp"), f"kf-check-bench-{os.getpid()}")
    try:
        for n in (int(x) for x in a.facts.split(",")):
            data = os.path.join(root, f"facts-{n}")
            t0 = time.monotonic()
            if not os.path.isdir(data):
                build(n, data)
            built = time.monotonic() - t0
            store = Store(data, readonly=True, lock=False)
            try:
                with store.read() as view:
                    facts = view.kv.count("log")
            finally:
                store.close()
            load = os.getloadavg()[0]
            row = {"bench": "check", "facts": facts, "store_mib": round(store_bytes(data) / 2**20, 1),
                   "build_s": round(built, 1), **measure(data)}
            if a.rebuild:
                row["rebuild"] = measure(data, "--rebuild")
            row["load"] = [round(load, 2), round(os.getloadavg()[0], 2)]
            print(json.dumps(row), flush=True)
    finally:
        if a.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
    sys.stdout.flush()
    os._exit(0)  # the builder's Runtime leaves threads behind after stop(); nothing is left to write
