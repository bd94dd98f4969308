"""The writer's cost per action, repeatable under load (issue 13, targets 2
and 3): record what the actors hand the writer, then replay it on one thread.

``record`` runs the four workloads of ``bench/write_cost.py`` (memory.create
and thread.create by 64 agents, plain and ask+assign posts by 8 posters) on a
live Runtime and saves, per workload, a copy of the store as it was before the
workload and every batch of items the writer was given (pickled: facts and
states are the core's structs). ``replay`` writes those batches again with
``Writer.write_batch`` on a copy of that store, on the calling thread — the
same planner, kv writes and commits, no actor and no other thread — and
prints per workload the CPU per action (``time.thread_time``, the least of
``--repeat`` replays) and a SHA-256 over every table afterwards. Replays of
one recording by two checkouts must print the same hashes (the stored bytes
are identical); their CPU figures compare the two write paths::

    python bench/write_replay.py record /tmp/rec
    python bench/write_replay.py replay /tmp/rec
    PYTHONPATH=/path/to/old/checkout python bench/write_replay.py replay /tmp/rec

Under ``valgrind --tool=callgrind --collect-atstart=no
--toggle-collect=ffi_call`` only the replayed writes are counted (each
replay runs inside a ctypes call): instruction counts that load does not move.
No speed is asserted anywhere.
"""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import hashlib
import json
import os
import pickle
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kungfud.store import Store, Writer  # noqa: E402
from kungfud.store.layout import DBS  # noqa: E402

WORKLOADS = ("memory.create", "thread.create", "plain", "ask_assign")


def record(out: Path, n: int) -> None:
    from write_cost import Bench

    out.mkdir(parents=True, exist_ok=True)
    b = Bench()
    batches: list[list] = []
    inner = b.rt.writer._write_batch

    def recording(batch: list) -> None:
        # What the writer was given, as given (before it reports or clears anything).
        batches.append([dataclasses.replace(i, done=None, after=None) for i in batch])
        inner(batch)

    try:
        agents = b.register(64)
        posters = agents[:8]
        gov = agents[-1]
        plain = b.thread_with(gov, posters)
        work = b.thread_with(gov, posters)

        def ask(i: int) -> dict:
            to = posters[(i + 1) % len(posters)]
            return {"ask": [to], "assign": {"to": to, "content": {"criteria": "x"}}}

        calls = {
            "memory.create": lambda r: [(a, "memory.create", {"content": {"title": "bench", "n": r}}) for a in agents],
            "thread.create": lambda r: [(a, "thread.create", {}) for a in agents],
            "plain": lambda r: [(p, "thread.post", {"thread": plain, "content": {"text": "bench"}}) for p in posters],
            "ask_assign": lambda r: [
                (p, "thread.post", {"thread": work, "content": {"text": "bench"}, **ask(i)}) for i, p in enumerate(posters)
            ],
        }
        for name in WORKLOADS:
            b.act_many([])  # nothing in flight: the copy is what the workload starts from
            _copy(b.store, out / f"{name}.lmdb")
            b.rt.writer._write_batch = recording  # type: ignore[method-assign]
            batches.clear()
            per = len(calls[name](0))
            for r in range(max(1, n // per)):
                b.act_many(calls[name](r))
            b.rt.writer._write_batch = inner  # type: ignore[method-assign]
            (out / f"{name}.items").write_bytes(pickle.dumps(list(batches)))
            print(json.dumps({"recorded": name, "batches": len(batches), "items": sum(map(len, batches))}), flush=True)
    finally:
        b.close()


def _copy(store: Store, dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    store.env.copy(str(dest))


def fingerprint(store: Store) -> str:
    h = hashlib.sha256()
    with store.read() as view:
        for table in DBS:
            for key, value in view.kv.scan(table):
                h.update(table.encode() + b"\x00" + len(key).to_bytes(4, "big") + key + len(value).to_bytes(4, "big") + value)
    return h.hexdigest()


def replay_once(rec: Path, name: str) -> tuple[float, int, str]:
    """(CPU seconds of the writes, actions, fingerprint) of one replay."""
    batches = pickle.loads((rec / f"{name}.items").read_bytes())
    d = Path(tempfile.mkdtemp(prefix="kf-replay-"))
    try:
        (d / "lmdb").mkdir()
        shutil.copy(rec / f"{name}.lmdb" / "data.mdb", d / "lmdb" / "data.mdb")
        store = Store(str(d))
        # The recorded items' clock: deadlines were valid when they were decided.
        writer = Writer(store, clock=lambda: 0)
        outcomes: list = []
        for batch in batches:
            for item in batch:
                item.done = outcomes.append
        spent = [0.0]

        def run() -> None:
            t0 = time.thread_time()
            for batch in batches:
                writer.write_batch(batch)
            spent[0] = time.thread_time() - t0

        ctypes.CFUNCTYPE(None)(run)()  # under callgrind: the region --toggle-collect counts
        bad = [o for o in outcomes if type(o).__name__ != "Committed"]
        if bad:
            raise RuntimeError(f"{name}: {len(bad)} actions not committed on replay, e.g. {bad[0]}")
        fp = fingerprint(store)
        store.close()
        return spent[0], len(outcomes), fp
    finally:
        shutil.rmtree(d, ignore_errors=True)


def replay(rec: Path, repeat: int, only: str | None) -> None:
    for name in WORKLOADS:
        if only is not None and name != only:
            continue
        runs = [replay_once(rec, name) for _ in range(repeat)]
        fps = {fp for _, _, fp in runs}
        assert len(fps) == 1, f"{name}: replays of one recording stored different bytes"
        n = runs[0][1]
        print(json.dumps({
            "bench": "write_replay",
            "op": name,
            "actions": n,
            "writer_cpu_us_per_action_min": round(min(s for s, _, _ in runs) / n * 1e6, 1),
            "writer_cpu_us_per_action_all": [round(s / n * 1e6, 1) for s, _, _ in runs],
            "fingerprint": fps.pop(),
        }), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["record", "replay"])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--n", type=int, default=2048, help="actions per workload (record)")
    ap.add_argument("--repeat", type=int, default=5, help="replays per workload; the least CPU is reported")
    ap.add_argument("--only", choices=WORKLOADS)
    opts = ap.parse_args()
    if opts.mode == "record":
        record(opts.dir, opts.n)
    else:
        replay(opts.dir, opts.repeat, opts.only)


if __name__ == "__main__":
    main()
