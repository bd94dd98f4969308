"""A2A round trip (issue 34, docs/a2a.md) against the same work over /v1, in one
run on one fresh daemon, with an in-process worker (kungfud.client over /v1).

    python bench/a2a.py [--tasks 50]

One task, A2A: ``SendMessage`` (returnImmediately, the judging extension) → the
worker's ``task.take`` and ``task.deliver`` → ``SendMessage`` with the verdict
adopt, blocking until ``TASK_STATE_COMPLETED``; over raw HTTP as a stock client
sends it. The same over /v1: ``task.create`` (audience the worker, adoption
limit 1) → take, deliver → ``task.judge`` adopt. Prints one JSON line per path
(tasks/s, the daemon's CPU ms per task) and their ratio (target: the A2A path
≤ 1.5× the /v1 path's daemon CPU per task).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx  # noqa: E402
from memory_create import bench_daemon, cpu_seconds  # noqa: E402

from kungfud.a2a.card import EXTENSION  # noqa: E402
from kungfud.client import Client  # noqa: E402

CARD_TAIL = "/.well-known/agent-card.json"


async def _agent(url: str, name: str) -> Client:
    async with await Client.connect(url) as c:
        r = await c.act("agent.register", {"content": {"name": name}})
    return await Client.connect(url, r["key"])


def _rpc(method: str, params: dict) -> dict:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


async def a2a_task(http: httpx.AsyncClient, base: str, worker: Client) -> None:
    msg = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": "bench"}]}
    r = await http.post(base, json=_rpc("SendMessage", {"message": msg, "configuration": {"returnImmediately": True}}))
    tid = r.json()["result"]["task"]["id"]
    took = await worker.act("task.take", {"task": tid})
    await worker.act("task.deliver", {"engagement": took["engagement"], "content": {"text": "done"}})
    verdict = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "taskId": tid, "parts": [{"text": "adopted"}],
               "metadata": {EXTENSION: {"verdict": "adopt"}}}
    r = await http.post(base, json=_rpc("SendMessage", {"message": verdict}))
    state = json.loads(r.content)["result"]["task"]["status"]["state"]
    assert state == "TASK_STATE_COMPLETED", r.content[:300]


async def v1_task(caller: Client, worker: Client, worker_id: str) -> None:
    made = await caller.act("task.create", {
        "audience": {"agents": [worker_id]},
        "contract": {"content": {"output": "a summary", "criteria": "bench"}, "adoption_limit": 1},
    })
    took = await worker.act("task.take", {"task": made["task"]})
    await worker.act("task.deliver", {"engagement": took["engagement"], "content": {"text": "done"}})
    await caller.act("task.judge", {"engagement": took["engagement"], "verdict": "adopt"})


async def run(url: str, pid: int, tasks: int) -> None:
    worker = await _agent(url, "bench-worker")
    worker_id = (await worker.read("agent.whoami", {}))["agent"]
    card = await worker.act("a2a.card.set", {"content": {"name": "bench", "description": "bench worker"}})
    base = card["card_url"][: -len(CARD_TAIL)]
    caller = await _agent(url, "bench-caller")
    headers = {"Authorization": f"Bearer {caller.key}", "A2A-Version": "1.0", "A2A-Extensions": EXTENSION}
    async with httpx.AsyncClient(headers=headers, timeout=60) as http:
        figures = {}
        for path in ("v1", "a2a"):
            cpu0, t0 = cpu_seconds(pid), time.perf_counter()
            for _ in range(tasks):
                if path == "a2a":
                    await a2a_task(http, base, worker)
                else:
                    await v1_task(caller, worker, worker_id)
            cpu, wall = cpu_seconds(pid) - cpu0, time.perf_counter() - t0
            figures[path] = cpu / tasks * 1000
            print(json.dumps({"path": path, "tasks": tasks, "tasks_per_s": round(tasks / wall, 1),
                              "daemon_cpu_ms_per_task": round(figures[path], 2)}), flush=True)
        print(json.dumps({"a2a_over_v1_cpu": round(figures["a2a"] / figures["v1"], 2)}), flush=True)
    await worker.close()
    await caller.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=50)
    a = ap.parse_args()
    with bench_daemon(prefix="kungfud-bench-a2a-") as b:
        line = b.daemon.stdout.readline()
        assert line.startswith("kungfud a2a on "), line
        asyncio.run(run(b.url, b.daemon.pid, a.tasks))


if __name__ == "__main__":
    main()
