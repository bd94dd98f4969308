"""examples/pair runs as it stands (issue 26 item 6): a lead and a worker, each a
process of its own over the client library, go through an ask, an assignment
with a deadline, a restricted Task and an open one; each learns how all of it
ended (the worker from outcome events and `outcomes`, the lead from its turn and
receipts), and both end with empty turns."""

from __future__ import annotations

import asyncio
import json
import re
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
@pytest.mark.timeout_s(300)
def test_examples_the_lead_and_worker_pair_ends_with_both_turns_empty_twice_on_one_daemon(daemon, tmp_path):
    """Issue 37: as documented (no --dir), twice in one folder on one daemon that
    also has another agent's open Task: each run is a pair of its own, in a new
    state folder under pair-state/, whose worker leaves the stranger's Task alone."""
    stranger = asyncio.run(_open_task(daemon.url))
    folders = []
    for _ in range(2):
        r = subprocess.run([sys.executable, str(PAIR / "run.py"), daemon.url, "--timeout", "150"],
                           capture_output=True, text=True, cwd=tmp_path, timeout=170)
        assert r.returncode == 0, (r.stdout, r.stderr)
        assert "lead: done" in r.stdout and "worker: done" in r.stdout, r.stdout
        folder = tmp_path / re.search(r"run: state and keys in (\S+)", r.stdout).group(1)
        assert folder.parent == tmp_path / "pair-state" and folder.stat().st_mode & 0o077 == 0
        folders.append(folder)
        check_pair(daemon.url, folder)
    assert folders[0] != folders[1]
    # Nobody took the stranger's open Task: its author has nothing to judge.
    turn, _ = asyncio.run(_turn_and_outcomes(daemon.url, stranger))
    assert turn == []
    # A folder that holds a run's state (and keys) is not reused.
    r = subprocess.run([sys.executable, str(PAIR / "run.py"), daemon.url, "--dir", str(folders[0])],
                       capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert r.returncode != 0 and "holds a previous run's state" in r.stderr, (r.stdout, r.stderr)
    assert "pair-state/" in (ROOT / ".gitignore").read_text().splitlines()  # it holds keys


async def _open_task(url: str) -> str:
    """Another agent's open Task, there before the pair runs; its key."""
    async with await Client.connect(url) as anon:
        me = await anon.register("stranger")
    async with await Client.connect(url, me["key"]) as c:
        await c.act("task.create", {"audience": "open", "contract": {"content": {"output": "a poem", "criteria": "any"}}})
    return me["key"]


def check_pair(url: str, folder) -> None:
    agents = json.loads((folder / "agents.json").read_text())
    lead_turn, _ = asyncio.run(_turn_and_outcomes(url, agents["lead"]["key"]))
    worker_turn, outcomes = asyncio.run(_turn_and_outcomes(url, agents["worker"]["key"]))
    assert lead_turn == [] and worker_turn == []
    # The worker learned every outcome: the assignment adopted; each Task's first
    # delivery rejected with the judge's reason, and its redo adopted.
    by_work = sorted((("assignment" if "assignment" in o["ref"] else o["ref"]["task"]), o["state"]) for o in outcomes)
    learned = json.loads((folder / "worker.json").read_text())
    assert sorted(learned["outcomes"].values()) == ["adopted", "adopted", "adopted", "rejected", "rejected"]
    assert [s for w, s in by_work if w == "assignment"] == ["adopted"]
    tasks = {w for w, _ in by_work if w != "assignment"}
    assert len(tasks) == 2 and all(sorted(s for w, s in by_work if w == t) == ["adopted", "rejected"] for t in tasks)
    assert all(o["content"] == {"reason": "it needs a title"} for o in outcomes if o["state"] == "rejected")
    # Each persisted the seq of the last event it handled.
    assert all(isinstance(json.loads((folder / f"{n}.json").read_text())["seq"], int) for n in ("lead", "worker"))
