"""``LastSeen`` (kungfud/server/seen.py): the map behind ``last_seen_at`` in
``admin.agent.list`` (WIRE.md "Operating a deployment"; docs/decisions.md D32
amended by D175–D177). Merged by max; what a node sees is shared coalesced (one
share per interval, not one per request), at most ``most`` agents a share in the
order first seen, the rest in the next; a single node never shares nor arms a
timer."""

from __future__ import annotations

import pytest

from kungfud.server.seen import LastSeen


class Timers:
    """``loop.call_later`` and ``loop.time`` by hand: the test fires the timers,
    and the clock moves to each one's time as it fires."""

    def __init__(self):
        self.now = 100.0
        self.armed: list[tuple[float, "_Handle"]] = []  # (when, handle)

    def time(self) -> float:
        return self.now

    def call_later(self, delay, fn):
        handle = _Handle(fn)
        self.armed.append((self.now + delay, handle))
        return handle

    def delays(self) -> list[float]:
        return [when - self.now for when, h in self.armed if not h.cancelled]

    def fire(self) -> int:
        """Run the timers armed so far (those they arm wait for the next call)."""
        due, self.armed = sorted(self.armed, key=lambda t: t[0]), []
        for when, handle in due:
            self.now = max(self.now, when)
            if not handle.cancelled:
                handle.fn()
        return len(due)


class _Handle:
    def __init__(self, fn):
        self.fn, self.cancelled = fn, False

    def cancel(self):
        self.cancelled = True


def _sharing(most: int = 384) -> tuple[LastSeen, list[dict], Timers]:
    seen, shared, timers = LastSeen(), [], Timers()
    seen.most = most
    seen.start_sharing(shared.append, timers.call_later, timers.time)
    return seen, shared, timers


def test_one_node_keeps_its_map_and_never_arms_a_timer():
    seen = LastSeen()
    seen.saw("ag_a", 100)
    seen.saw("ag_a", 90)  # an earlier time never moves it back
    seen.saw("ag_b", 5)
    assert seen.map == {"ag_a": 100, "ag_b": 5} and seen.get("ag_a") == 100 and seen.get("ag_c") is None
    assert seen.drain_news() == {}  # nothing kept to share
    seen.flush()  # stopping: nothing to send, nowhere to send it


def test_merge_is_by_max_and_is_not_shared_again():
    seen, shared, timers = _sharing()
    seen.saw("ag_a", 100)
    seen.merge({"ag_a": 90, "ag_b": 70})  # another node's older sighting of a; b only there
    assert seen.map == {"ag_a": 100, "ag_b": 70}
    seen.merge({"ag_a": 120})
    assert seen.get("ag_a") == 120
    timers.fire()
    assert shared == [{"ag_a": 100}]  # what this node saw, not what it heard
    seen.saw("ag_a", 110)  # earlier than what another node saw: nothing new to tell
    assert seen.get("ag_a") == 120 and timers.armed == []


def test_many_sightings_make_one_share_per_interval():
    seen, shared, timers = _sharing()
    for ms in range(1000, 1100):  # one loop turn's sightings, the first after a quiet time
        seen.saw("ag_a", ms)
        seen.saw("ag_b", ms)
    assert timers.delays() == [0.0]  # one timer for all, at the end of the turn
    assert shared == []  # nothing sent per request
    assert timers.fire() == 1
    assert shared == [{"ag_a": 1099, "ag_b": 1099}]
    assert timers.armed == []  # nothing new: no timer fires while idle
    for ms in range(2000, 2100):  # busy: what follows waits a whole interval after that share
        seen.saw("ag_b", ms)
        seen.saw("ag_c", ms)
        timers.now += 0.001
    assert timers.delays() == [pytest.approx(seen.every_s - 0.1)] and shared[1:] == []
    timers.fire()
    assert shared[1:] == [{"ag_b": 2099, "ag_c": 2099}]  # only what was seen since the last share
    seen.saw("ag_a", 3000)
    assert timers.delays() == [pytest.approx(seen.every_s)]  # never two shares within an interval
    timers.fire()
    assert shared[2:] == [{"ag_a": 3000}]
    timers.now += seen.every_s  # a quiet interval passes
    seen.saw("ag_a", 4000)  # so it goes at once (end of the turn)
    assert timers.delays() == [0.0]


def test_a_share_is_capped_first_seen_first_and_the_rest_follow():
    seen, shared, timers = _sharing(most=3)
    for i in range(7):
        seen.saw(f"ag_{i}", 100 + i)
    seen.saw("ag_0", 200)  # seen again: keeps its place, with its newest time
    timers.fire()
    assert shared == [{"ag_0": 200, "ag_1": 101, "ag_2": 102}]
    timers.fire()
    timers.fire()
    assert shared[1:] == [{"ag_3": 103, "ag_4": 104, "ag_5": 105}, {"ag_6": 106}]
    assert timers.armed == []
    assert all(len(s) <= 3 for s in shared)


def test_a_hello_reshares_the_whole_map_and_stopping_flushes_what_is_left():
    seen, shared, timers = _sharing(most=2)
    seen.merge({"ag_x": 50})  # heard from another node
    seen.saw("ag_a", 100)
    timers.fire()
    shared.clear()
    seen.merge(None)  # a node joined: it gets everything this node knows
    timers.fire()
    seen.flush()
    assert timers.armed == [] or all(h.cancelled for _, h in timers.armed)
    merged: dict = {}
    for s in shared:
        merged.update(s)
    assert merged == {"ag_x": 50, "ag_a": 100}


def test_drain_news_takes_what_it_returns():
    seen, _, _ = _sharing()
    seen.saw("ag_a", 1)
    seen.saw("ag_b", 2)
    assert seen.drain_news(1) == {"ag_a": 1}
    assert seen.drain_news() == {"ag_b": 2}
    assert seen.drain_news() == {}
