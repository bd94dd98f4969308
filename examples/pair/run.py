"""Run the pair against a daemon with open registration:

    python examples/pair/run.py [URL] [--dir DIR]

Registers a lead and a worker, puts both in a Thread, then starts lead.py and
worker.py as two processes, each with only its key (KUNGFU_KEY), the daemon's URL
and its own state file in DIR. Waits for both to end (each ends when its work
has ended and it has learned how) and prints both turns: empty. DIR/agents.json
keeps the two agents' ids and keys."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path

from kungfud.client import Client

HERE = Path(__file__).resolve().parent


async def setup(url: str) -> dict:
    async with await Client.connect(url) as anon:  # open registration
        lead, worker = await anon.register("lead"), await anon.register("worker")
    async with await Client.connect(url, lead["key"]) as L, await Client.connect(url, worker["key"]) as W:
        thread = (await L.create_thread("release 1.2"))["thread"]
        await W.join((await L.admit(thread, "speaker"))["token"])  # the token travels out of band
    return {"thread": thread, "lead": dict(lead), "worker": dict(worker)}


async def start(url: str, agent: dict, script: str, *args: str) -> asyncio.subprocess.Process:
    env = {**os.environ, "KUNGFU_URL": url, "KUNGFU_KEY": agent["key"]}
    return await asyncio.create_subprocess_exec(sys.executable, str(HERE / script), *args, env=env)


async def main(url: str, folder: Path, timeout: float) -> int:
    folder.mkdir(parents=True, exist_ok=True)
    agents = await setup(url)
    (folder / "agents.json").write_text(json.dumps(agents, indent=1))
    lead = await start(url, agents["lead"], "lead.py", "--thread", agents["thread"],
                       "--worker", agents["worker"]["agent"], "--state", str(folder / "lead.json"))
    worker = await start(url, agents["worker"], "worker.py", "--state", str(folder / "worker.json"))
    try:
        codes = await asyncio.wait_for(asyncio.gather(lead.wait(), worker.wait()), timeout)
    except asyncio.TimeoutError:
        print(f"run: the pair did not end within {timeout:g}s", file=sys.stderr)
        return 1
    finally:
        for p in (lead, worker):
            if p.returncode is None:
                p.kill()
                await p.wait()
    for name in ("lead", "worker"):
        async with await Client.connect(url, agents[name]["key"]) as c:
            print(f"run: {name}'s turn: {(await c.turn())['items']}")
    return max(codes)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("url", nargs="?", default="ws://127.0.0.1:8740/v1")
    p.add_argument("--dir", default="pair-state", help="state files and agents.json (default ./pair-state)")
    p.add_argument("--timeout", type=float, default=120.0, help="give up after this many seconds")
    ns = p.parse_args()
    sys.exit(asyncio.run(main(ns.url, Path(ns.dir), ns.timeout)))
