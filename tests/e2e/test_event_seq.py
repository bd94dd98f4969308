"""Every event has its own seq (WIRE.md 1.2, D200), heard by every consumer.

The case that broke before format 4: a deadline ends a taker's work, and that
one fact makes two events for the taker — a ``turn`` event (its deliver
obligation ended, ``expired``) and an ``outcome`` event (``timed_out``). They
shared a seq, so the client library's subscription dropped the second, a
``kungfu watch --state-file`` restarted between them never saw it, and
``subscribe {since}`` could not resume between them. Here a taker whose
assignment expires, and one whose engagement expires, hears the outcome live,
on replay, and resumed from the seq of the ``turn`` event — through the
client library (:class:`kungfud.client.Subscription`) and through ``kungfu
watch --state-file``. (The console has its own test in tests/console.)
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kungfud.client import Client
from tests.conftest import ROOT
from tests.e2e.thread_kit import Member, agents, close_all, new_thread

CONTRACT = {"content": {"output": "a haiku", "criteria": "5-7-5"}, "deliver_within_s": 1}


async def expiring(url: str, kind: str) -> tuple[list[Member], tuple[str, dict]]:
    """A lead and a taker, and the take that starts a 1 s delivery deadline:
    of an assignment, or of an engagement of an open Task."""
    lead, w = await agents(url, "lead", "taker")
    if kind == "assignment":
        t = await new_thread(lead, (w, "speaker"))
        spec = {"to": w.id, "content": {"criteria": "tests pass"}, "deliver_within_s": 1}
        r = await lead.act("thread.post", {"thread": t, "content": {"text": "please"}, "ask": [], "assign": spec})
        return [lead, w], ("assignment.take", {"assignment": r["assignment"]})
    tk = (await lead.act("task.create", {"audience": "open", "contract": CONTRACT}))["task"]
    return [lead, w], ("task.take", {"task": tk})


def expiry(events: list[dict]) -> tuple[dict, dict]:
    """The expiry's ``turn`` event and the ``outcome`` event right after it."""
    [at] = [i for i, e in enumerate(events) if e["event"] == "outcome"]
    turn, outcome = events[at - 1], events[at]
    assert turn["event"] == "turn" and [x["why"] for x in turn["data"]["ended"]] == ["expired"], events
    assert outcome["data"]["state"] == "timed_out" and "by" not in outcome["data"], outcome
    assert outcome["seq"] > turn["seq"], (turn, outcome)  # WIRE.md 1.2: each its own seq
    return turn, outcome


async def until_outcome(sub, timeout: float = 15.0) -> list[dict]:
    """Events yielded by a Subscription up to and including an ``outcome``."""
    out: list[dict] = []

    async def run() -> None:
        async for ev in sub:
            out.append(ev)
            if ev["event"] == "outcome":
                return

    try:
        await asyncio.wait_for(run(), timeout)
    except asyncio.TimeoutError:
        raise AssertionError(f"no outcome event within {timeout} s; got {out}") from None
    return out


@pytest.mark.rules("R8-20", "R8-21")
@pytest.mark.parametrize("kind", ["assignment", "engagement"])
async def test_R8_20_the_client_library_hears_the_outcome_live_on_replay_and_resumed_from_the_turn(daemon, kind):
    (lead, w), (op, args) = await expiring(daemon.url, kind)
    sub = await w.c.subscribe()  # live, from the newest seq
    start = sub.seq
    await w.act(op, args)
    live = await until_outcome(sub)
    turn, outcome = expiry(live)
    assert len({e["seq"] for e in live}) == len(live) and all(e["seq"] > start for e in live)

    replay = await Client.connect(daemon.url, w.key)
    resumed = await Client.connect(daemon.url, w.key)
    try:
        # On replay: the same events, the outcome among them.
        assert await until_outcome(await replay.subscribe(since=start)) == live
        # Resumed from the turn event's seq (a client that handled it and
        # persisted its seq): the outcome comes next.
        assert await until_outcome(await resumed.subscribe(since=turn["seq"])) == [outcome]
    finally:
        await replay.close()
        await resumed.close()
    await close_all(lead, w)


def _watch(url: str, key: str, *args: str) -> list[dict]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUNGFU_")}
    env.update(KUNGFU_URL=url, KUNGFU_KEY=key, KUNGFU_CONFIG=os.devnull)
    r = subprocess.run(
        [sys.executable, "-m", "kungfud.agent_cli", "watch", "--json", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )
    assert r.returncode == 0, (r.stdout, r.stderr)
    return [json.loads(line) for line in r.stdout.splitlines()]


@pytest.mark.rules("R8-20", "R8-21")
@pytest.mark.parametrize("kind", ["assignment", "engagement"])
async def test_R8_20_kungfu_watch_restarted_after_the_turn_prints_the_outcome(daemon, tmp_path: Path, kind):
    (lead, w), (op, args) = await expiring(daemon.url, kind)
    state = tmp_path / "taker.seq"
    await asyncio.to_thread(_watch, daemon.url, w.key, "--state-file", str(state), "--timeout", "0.3")
    start = int(state.read_text())
    await w.act(op, args)
    # Live: the take's turn, then the expiry's turn — and the watch stops
    # there, its state file holding the seq of the expiry's turn event.
    first = await asyncio.to_thread(
        _watch, daemon.url, w.key, "--state-file", str(state), "--count", "2", "--timeout", "20"
    )
    assert [e["event"] for e in first] == ["turn", "turn"], first
    assert [x["why"] for x in first[1]["data"]["ended"]] == ["expired"], first
    assert int(state.read_text()) == first[1]["seq"]
    # Restarted: the outcome of the same fact is the next event.
    [outcome] = await asyncio.to_thread(
        _watch, daemon.url, w.key, "--state-file", str(state), "--count", "1", "--timeout", "20"
    )
    assert outcome["event"] == "outcome" and outcome["data"]["state"] == "timed_out", outcome
    assert int(state.read_text()) == outcome["seq"] > first[1]["seq"]
    # On replay from before: all three, in order, each its own seq.
    replay = await asyncio.to_thread(_watch, daemon.url, w.key, "--since", str(start), "--count", "3", "--timeout", "20")
    assert replay == first + [outcome]
    await close_all(lead, w)
