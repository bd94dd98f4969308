"""A fingerprint of every row the writer stores, for proving that a change to
the write path leaves the storage format byte-identical (issue 13, step 2).

The deterministic simulation (tests/sim) drives the real actors and the real
writer — group commits of random size, injected storage faults, restarts —
with ids, secrets and the clock all drawn from the seed, so one seed writes the
same rows every time. This runs seeds, dumps every table of each resulting
store and prints one SHA-256 per seed and one over all of them. Run it from the
repository root of each checkout (its own ``tests/sim`` and ``kungfud``) and
compare the lines::

    python bench/store_fingerprint.py 0:20
    (cd /path/to/old/checkout && python /path/to/this/bench/store_fingerprint.py 0:20)

Odd seeds run two nodes, as the simulation's CI run does.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.getcwd())

from kungfud.store import Store  # noqa: E402
from kungfud.store.layout import DBS  # noqa: E402
from tests.sim.harness import Sim  # noqa: E402


def fingerprint(data_dir: str) -> str:
    h = hashlib.sha256()
    store = Store(data_dir, map_size_mb=256)
    try:
        with store.read() as view:
            for table in DBS:
                for key, value in view.kv.scan(table):
                    h.update(table.encode() + b"\x00" + len(key).to_bytes(4, "big") + key + len(value).to_bytes(4, "big") + value)
    finally:
        store.close()
    return h.hexdigest()


def main() -> None:
    lo, _, hi = (sys.argv[1] if len(sys.argv) > 1 else "0:10").partition(":")
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 400
    total = hashlib.sha256()
    for seed in range(int(lo), int(hi)):
        d = tempfile.mkdtemp(prefix=f"kf-fp-{seed}-")
        try:
            sim = Sim(seed, data_dir=d, nodes=2 if seed % 2 else 1)
            try:
                sim.run(steps)
            finally:
                sim.close()
            fp = fingerprint(d)
        finally:
            shutil.rmtree(d, ignore_errors=True)
        total.update(fp.encode())
        print(f"seed {seed}: {fp}", flush=True)
    print(f"all: {total.hexdigest()}")


if __name__ == "__main__":
    main()
