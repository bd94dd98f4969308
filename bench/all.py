"""Run the whole benchmark suite, one benchmark after another, printing every
figure as a JSON line (issue 7: one command).

    python bench/all.py [--quick]

``--quick`` shortens every measurement (for a smoke run; the figures are then
noisier). Each benchmark starts its own daemon on a temporary data directory and
its own echo server; see bench/README.md.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

SUITE = [
    ("memory_create.py", [], ["--seconds", "1"]),
    ("webhooks.py", [], ["--quick"]),
    ("thread_bench.py", ["--history", "10,10000,100000"], ["--seconds", "1", "--history", "10,1000", "--deadlines", "100"]),
    ("scale_bench.py", [], ["--obligations", "1000", "--cycles-seconds", "1", "--idle", "1000", "--stored-threads", "5000", "--events", "100"]),
    ("scale_targets.py", [], ["--members", "100", "--member-posts", "100", "--creates", "2560", "--posts", "320", "--blocks", "4"]),
    ("action_cost.py", [], ["--blocks", "2", "--each", "5"]),  # issue 27 targets 1 and 2 (audit log on/off)
    ("task_engagements.py", [], ["--big", "1000", "--cycles", "32", "--blocks", "4"]),  # issue 27 target 4
    ("live_actors.py", [], ["--counts", "64,1000", "--seconds", "1", "--blocks", "2"]),  # issue 27 target 3
    ("a2a.py", [], ["--tasks", "5", "--blocks", "1"]),  # issue 34: A2A against /v1, daemon CPU per task
]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="short measurements (smoke run)")
    args = p.parse_args()
    failed = []
    for script, full, quick in SUITE:
        rc = subprocess.call([sys.executable, str(HERE / script), *(quick if args.quick else full)])
        if rc != 0:
            failed.append(script)
    if failed:
        print(f"bench: failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
