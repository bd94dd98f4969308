"""A2A round trip (issue 34, docs/a2a.md) against the same work over /v1, in one
run on one fresh daemon, with an in-process worker (kungfud.client over /v1).

    python bench/a2a.py [--tasks 30] [--blocks 4] [--profile]

One task, A2A: ``SendMessage`` (returnImmediately, the judging extension) → the
worker's ``task.take`` and ``task.deliver`` → ``SendMessage`` with the verdict
adopt, blocking until ``TASK_STATE_COMPLETED``; over raw HTTP as a stock client
sends it. The same over /v1: ``task.create`` (audience the worker, adoption
limit 1) → take, deliver → ``task.judge`` adopt. The two paths run in
alternating blocks of ``--tasks`` each (v1, a2a, v1, a2a, …: a shared machine's
load falls on both alike); each block prints one JSON line (tasks/s, the
daemon's CPU ms per task from ``/proc/PID/task/*/schedstat``, the 1-minute
load average), and the run ends with
the ratio of the paths' total daemon CPU per task (target: the A2A path ≤ 1.5×
the /v1 path's). ``--profile`` records the daemon with py-spy during the A2A
blocks (``pip install py-spy``) into ``a2a-profile-*.txt`` (folded stacks).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx  # noqa: E402
from action_cost import cpu_ns  # noqa: E402
from memory_create import bench_daemon  # noqa: E402

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


async def run(url: str, pid: int, tasks: int, blocks: int, profile: bool) -> None:
    worker = await _agent(url, "bench-worker")
    worker_id = (await worker.read("agent.whoami", {}))["agent"]
    card = await worker.act("a2a.card.set", {"content": {"name": "bench", "description": "bench worker"}})
    base = card["card_url"][: -len(CARD_TAIL)]
    caller = await _agent(url, "bench-caller")
    headers = {"Authorization": f"Bearer {caller.key}", "A2A-Version": "1.0", "A2A-Extensions": EXTENSION}
    async with httpx.AsyncClient(headers=headers, timeout=60) as http:
        await a2a_task(http, base, worker)  # warm both paths (imports, first connections)
        await v1_task(caller, worker, worker_id)
        totals = {"v1": [0.0, 0], "a2a": [0.0, 0]}
        for block in range(blocks * 2):
            path = ("v1", "a2a")[block % 2]
            spy = _spy(pid) if profile and path == "a2a" else None
            cpu0, t0 = cpu_ns(pid), time.perf_counter()
            for _ in range(tasks):
                if path == "a2a":
                    await a2a_task(http, base, worker)
                else:
                    await v1_task(caller, worker, worker_id)
            cpu, wall = (cpu_ns(pid) - cpu0) / 1e9, time.perf_counter() - t0
            if spy is not None:
                spy.terminate()
                spy.wait()
            totals[path][0] += cpu
            totals[path][1] += tasks
            print(json.dumps({"bench": "a2a", "path": path, "tasks": tasks, "tasks_per_s": round(tasks / wall, 1),
                              "daemon_cpu_ms_per_task": round(cpu / tasks * 1000, 2),
                              "load_1m": os.getloadavg()[0]}), flush=True)
        per = {p: c / n * 1000 for p, (c, n) in totals.items()}
        print(json.dumps({"bench": "a2a.ratio", "v1_cpu_ms_per_task": round(per["v1"], 2), "a2a_cpu_ms_per_task": round(per["a2a"], 2),
                          "a2a_over_v1_cpu": round(per["a2a"] / per["v1"], 2)}), flush=True)
    await worker.close()
    await caller.close()


def _spy(pid: int) -> subprocess.Popen:
    """py-spy sampling the daemon (its raw folded stacks, appended) until terminated."""
    spy = Path(sys.executable).with_name("py-spy")
    return subprocess.Popen(
        [str(spy), "record", "--pid", str(pid), "--format", "raw", "--rate", "200", "--nonblocking",
         "--output", f"a2a-profile-{time.monotonic_ns()}.txt"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=30, help="tasks per block")
    ap.add_argument("--blocks", type=int, default=4, help="blocks per path (alternating)")
    ap.add_argument("--profile", action="store_true", help="py-spy the daemon during the A2A blocks")
    ap.add_argument("--root", default=None, help="the checkout whose daemon is measured (an older build)")
    a = ap.parse_args()
    extra = {"root": Path(a.root).resolve()} if a.root else {}
    with bench_daemon(prefix="kungfud-bench-a2a-", **extra) as b:
        line = b.daemon.stdout.readline()
        assert line.startswith("kungfud a2a on "), line
        asyncio.run(run(b.url, b.daemon.pid, a.tasks, a.blocks, a.profile))


if __name__ == "__main__":
    main()
