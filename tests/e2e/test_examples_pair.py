"""examples/pair runs as it stands (issue 26 item 6): a lead and a worker, each a
process of its own over the client library, go through an ask, an assignment
with a deadline, a restricted Task and an open one; each learns how all of it
ended (the worker from outcome events and `outcomes`, the lead from its turn and
receipts), and both end with empty turns."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest

from kungfud.client import Client
from tests.e2e.test_cli import ROOT

PAIR = ROOT / "examples" / "pair"


async def _turn_and_outcomes(url: str, key: str) -> tuple[list, list]:
    async with await Client.connect(url, key) as c:
        return (await c.turn())["items"], [o async for o in c.items("outcomes")]


@pytest.mark.rules("R8-20", "R6.3-7", "R6.3-13", "R6.4-26")
@pytest.mark.timeout_s(180)
def test_examples_the_lead_and_worker_pair_ends_with_both_turns_empty(daemon, tmp_path):
    r = subprocess.run([sys.executable, str(PAIR / "run.py"), daemon.url, "--dir", str(tmp_path), "--timeout", "150"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=170)
    assert r.returncode == 0, (r.stdout, r.stderr)
    agents = json.loads((tmp_path / "agents.json").read_text())
    lead_turn, _ = asyncio.run(_turn_and_outcomes(daemon.url, agents["lead"]["key"]))
    worker_turn, outcomes = asyncio.run(_turn_and_outcomes(daemon.url, agents["worker"]["key"]))
    assert lead_turn == [] and worker_turn == []
    # The worker learned every outcome: the assignment adopted; each Task's first
    # delivery rejected with the judge's reason, and its redo adopted.
    by_work = sorted((("assignment" if "assignment" in o["ref"] else o["ref"]["task"]), o["state"]) for o in outcomes)
    learned = json.loads((tmp_path / "worker.json").read_text())
    assert sorted(learned["outcomes"].values()) == ["adopted", "adopted", "adopted", "rejected", "rejected"]
    assert [s for w, s in by_work if w == "assignment"] == ["adopted"]
    tasks = {w for w, _ in by_work if w != "assignment"}
    assert len(tasks) == 2 and all(sorted(s for w, s in by_work if w == t) == ["adopted", "rejected"] for t in tasks)
    assert all(o["content"] == {"reason": "it needs a title"} for o in outcomes if o["state"] == "rejected")
    # Each persisted the seq of the last event it handled.
    assert all(isinstance(json.loads((tmp_path / f"{n}.json").read_text())["seq"], int) for n in ("lead", "worker"))
    assert "lead: done" in r.stdout and "worker: done" in r.stdout, r.stdout
