"""Frames of one connection are handled in the order they arrive, whichever
path each takes (kungfud/server/connection.py ``FrameConnection``): small whole
text frames straight from the socket's callback, the rest — frames over 64 KiB,
frames past one callback's turn budget, frames behind others still queued —
through websockets' queue and the connection's handler. A connection's state
moves with its frames (a ``hello`` authenticates what follows it, WIRE.md
"Transport"), so a frame handled out of order would be answered as the wrong
caller. Nothing here is about speed."""

from __future__ import annotations

import asyncio
import json

import pytest
from websockets.asyncio.client import connect

from tests.e2e.helpers import register


@pytest.fixture
def daemon(shared_daemon):
    return shared_daemon


async def _send_at_once(url: str, *writes: list[str]) -> dict:
    """The frames of each list in one write to the socket (the daemon reads
    them back to back), the next list 10 ms later; the replies, by request id."""
    async with connect(url, compression=None, max_size=None) as ws:
        for i, frames in enumerate(writes):
            if i:
                await asyncio.sleep(0.01)
            for f in frames:
                ws.protocol.send_text(f.encode())
            ws.send_data()
        replies = [json.loads(await asyncio.wait_for(ws.recv(), 30)) for w in writes for _ in w]
    return {r["id"]: r for r in replies}


@pytest.mark.rules("R12-11")
@pytest.mark.parametrize("before", ["big", "many"])
async def test_frames_before_a_hello_are_answered_as_before_it(daemon, before):
    """``big``: a 200 KiB frame, then the hello: the big frame waits in
    websockets' queue, and the hello must not overtake it on the direct path.
    ``many``: 12,000 small frames, more than one turn of the loop handles:
    those past the turn wait in the queue and are handled by the connection's
    handler, a turn at a time; the hello, written 10 ms later, comes after
    all of them. (Which frame takes which path is
    tests/test_server_send.py's.)"""
    agent, key = await register(daemon.url, "orderly")
    if before == "big":
        early = [json.dumps({"id": 0, "op": "agent.whoami", "args": {"pad": "x" * 200_000}})]
    else:
        early = [json.dumps({"id": i, "op": "agent.whoami", "args": {}}) for i in range(12_000)]
    n = len(early)
    late = [
        json.dumps({"id": n, "op": "hello", "args": {"key": key}}),
        json.dumps({"id": n + 1, "op": "agent.whoami", "args": {}}),
    ]
    # big: all in one write; many: the hello written 10 ms after the 12,000
    got = await _send_at_once(daemon.url, early + late) if before == "big" else await _send_at_once(daemon.url, early, late)
    assert sorted(got) == list(range(n + 2))
    for i in range(n):  # before the hello: nothing but the envelope is read
        assert got[i].get("error", {}).get("code") == "unauthenticated", (i, got[i])
    assert "error" not in got[n], got[n]
    assert got[n + 1]["result"]["agent"] == agent, got[n + 1]
