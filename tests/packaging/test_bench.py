"""The benchmark suite runs from its one command and prints every figure issue 7
names as a JSON line (a smoke run: short measurements, no speed asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.long_test(100)  # seconds on the shared 2-core machine (D405): handed out first under -n
def test_bench_suite_quick_run_prints_every_figure():
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "all.py"), "--quick"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    by = {}
    for row in rows:
        by.setdefault((row["bench"], row.get("target"), row.get("connections")), []).append(row)
    # kungfud and the echo baseline, side by side, with a ratio
    for c in (1, 64):
        assert ("memory.create", "echo", c) in by and ("memory.create", "kungfud", c) in by
        k = by[("memory.create", "kungfud", c)][0]
        assert k["errors"] == 0 and k["round_trips"] > 0 and k["p50_ms"] is not None and k["p99_ms"] is not None
        assert k["cpu_us_per_action"]["total"] > 0 or sys.platform != "linux"
    ratios = [r for r in rows if r.get("ratio") == "kungfud/echo"]
    assert {r["bench"] for r in ratios} == {"memory.create", "thread.post one thread"}
    assert all(r["per_s"] > 0 for r in ratios)
    names = {r["bench"] for r in rows}
    for name in (
        "thread.post one thread", "thread.post 1000 threads", "thread.post vs history", "expiry lateness",
        "turn", "task cycle (take+deliver, judge)", "event delivery", "idle connections", "stored threads",
        "scale.members", "scale.creates", "scale.pending", "scale.targets",
        "action_cost.ratios", "task_engagements.ratio", "webhooks",
        "thread.post across busy Threads", "live_actors ratio",
    ):
        assert name in names, (name, sorted(names))
    assert all(r.get("errors", 0) == 0 for r in rows)
    expiry = next(r for r in rows if r["bench"] == "expiry lateness")
    assert expiry["recorded"] == expiry["deadlines"]
