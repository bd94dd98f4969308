"""Run the pair against a daemon with open registration:

    python examples/pair/run.py [URL] [--dir DIR]

Registers a new lead and a new worker, puts both in a Thread, then starts lead.py
and worker.py as two processes, each with only its key (KUNGFU_KEY), the daemon's
URL and its own state file in DIR. Waits for both to end (each ends when its work
has ended and it has learned how) and prints both turns: empty. DIR/agents.json
keeps the two agents' ids and keys: DIR is a new folder under ./pair-state/ each
run unless --dir names one (it must not hold a previous run's state), made
readable by you only. Each run is its own pair: run it as often as you like, on
a daemon used for other things too."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
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


def new_folder(given: str | None) -> Path:
    folder = Path(given) if given else Path("pair-state") / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    if folder.exists() and any(folder.glob("*.json")):
        sys.exit(f"run: {folder} holds a previous run's state (and keys); pass a new --dir")
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    return folder


async def main(url: str, folder: Path, timeout: float) -> int:
    print(f"run: state and keys in {folder}", flush=True)
    agents = await setup(url)
    (folder / "agents.json").write_text(json.dumps(agents, indent=1))
    lead = await start(url, agents["lead"], "lead.py", "--thread", agents["thread"],
                       "--worker", agents["worker"]["agent"], "--state", str(folder / "lead.json"))
    worker = await start(url, agents["worker"], "worker.py", "--lead", agents["lead"]["agent"],
                         "--state", str(folder / "worker.json"))
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
    p.add_argument("--dir", help="state files and agents.json (default: a new folder under ./pair-state/)")
    p.add_argument("--timeout", type=float, default=120.0, help="give up after this many seconds")
    ns = p.parse_args()
    sys.exit(asyncio.run(main(ns.url, new_folder(ns.dir), ns.timeout)))
