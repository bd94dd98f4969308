"""A made-up id costs no actor (review M5, issue 12).

Every action naming a Thread or Task was routed to that object's actor, and the
registry started an actor — an OS thread living 60 s — for any key: 300 actions
on made-up ids meant 300 more threads. Now an actor is started only for an
object that exists; a made-up id is decided by the caller's own agent actor,
with the same answer as before, byte for byte.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import urllib.request

import pytest

from tests.e2e.helpers import Raw, fake_id, register

# (op, argument naming the object, its prefix, the kind named in the reason)
_SHAPES = [
    ("thread.post", "thread", "th_", "thread", {"content": {"t": 1}}),
    ("thread.admit", "thread", "th_", "thread", {}),
    ("thread.leave", "thread", "th_", "thread", {}),
    ("task.take", "task", "tk_", "task", {}),
    ("task.pause", "task", "tk_", "task", {}),
    ("assignment.take", "assignment", "as_", "assignment", {}),
    ("task.deliver", "engagement", "en_", "engagement", {"content": {"x": 1}}),
]


def _metric(url: str, name: str) -> float:
    base = url.replace("ws://", "http://").rsplit("/", 1)[0]
    with urllib.request.urlopen(base + "/metrics", timeout=10) as r:  # noqa: S310 (loopback only)
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    raise AssertionError(f"{name} not in /metrics")


def _os_threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


@pytest.mark.skipif(sys.platform != "linux", reason="counts the daemon's threads in /proc")
@pytest.mark.rules("L4-5", "R12-11", "R12-9")
async def test_L4_5_actions_on_made_up_ids_start_no_actor_and_answer_not_found_as_before(daemon):
    _, key = await register(daemon.url, "prober")
    url = daemon.url  # one node: its threads and its actors are counted
    pid = daemon.pids[daemon.urls.index(url)]
    async with await Raw.connect(url, key) as raw:

        def frame(n: int) -> tuple[dict, str]:
            op, field, prefix, kind, extra = _SHAPES[n % len(_SHAPES)]
            ident = fake_id(prefix)
            req = {"id": raw.next_id(), "op": op, "key": f"k{n}", "args": {field: ident, **extra}}
            # The answer of the code before the fix, byte for byte (R12-9 wording).
            want = json.dumps(
                {"id": req["id"], "ok": False, "error": {"code": "not_found", "reason": f"{kind} {ident} was not found, or you may not read it", "next": "stop"}},
                separators=(",", ":"),
            )
            return req, want

        # Warm up: the caller's agent actor exists from here on.
        for n in range(len(_SHAPES)):
            req, want = frame(n)
            assert await raw.call_text(req) == want
        threads_before = _os_threads(pid)
        actors_before = _metric(url, "kungfud_live_actors")

        sent = [frame(n) for n in itertools.islice(itertools.count(len(_SHAPES)), 300)]
        for wave in range(0, len(sent), 50):  # pipelined, within the in-flight limit
            for req, _ in sent[wave : wave + 50]:
                await raw.send(req)
            for req, want in sent[wave : wave + 50]:
                assert await raw.reply_text(req["id"], timeout=60) == want

        assert _metric(url, "kungfud_live_actors") == actors_before
        # No actor thread per id (before the fix: +300). A margin of 2 for threads
        # the runtime may start for its own reasons.
        assert _os_threads(pid) <= threads_before + 2
