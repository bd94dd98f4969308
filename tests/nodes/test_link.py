"""A node's link (kungfud/nodes/link.py, D139): local commits are announced
with their agents and dues; other nodes' announcements wake the feed and the
clock; and when an announcement is lost the safety poll notices that the
store moved and wakes everyone (R8-21: recovery never depends on a
notification)."""

from __future__ import annotations

import threading

import pytest

from kungfud.nodes import Nodes, SoleLease, single
from kungfud.nodes.link import Link
from tests.cluster import wait_for


class DeafBus:
    """Announcements go nowhere and none arrive (every datagram lost)."""

    def __init__(self):
        self.announced: list[tuple] = []

    def announce(self, seq, agents, dues):
        self.announced.append((seq, list(agents), dues))

    def start(self, on_remote, on_seen=None):
        self.on_remote = on_remote

    def close(self):
        pass


def _link(top: list[int]) -> tuple[Link, DeafBus, list, threading.Event]:
    bus = DeafBus()
    link = Link(Nodes(bus, SoleLease(), shared=True), lambda: top[0])
    woken: list = []
    clock = threading.Event()
    link.feed = woken.append
    link.clock = clock.set
    return link, bus, woken, clock


@pytest.mark.rules("R8-21")
def test_a_lost_announcement_is_covered_by_the_safety_poll_within_about_a_second():
    top = [5]
    link, _, woken, clock = _link(top)
    link.start()
    try:
        assert link.known == 5
        top[0] = 9  # another node committed; its announcement was lost
        assert wait_for(lambda: woken == [None] and clock.is_set(), 3), woken
        assert link.known == 9
        woken.clear()
        assert not wait_for(lambda: woken, 1.5)  # nothing moved since: no further wake
    finally:
        link.stop()


def test_local_commits_are_announced_and_remote_ones_wake_feed_and_clock():
    top = [0]
    link, bus, woken, clock = _link(top)
    link.start()
    try:
        link.committed(3, ["ag_a"], False)
        assert bus.announced == [(3, ["ag_a"], False)] and link.known == 3
        bus.on_remote(4, ["ag_b"], False)
        assert woken == [["ag_b"]] and not clock.is_set() and link.known == 4
        bus.on_remote(4, [], True)  # deadlines only: the clock, not the feed
        assert woken == [["ag_b"]] and clock.is_set()
    finally:
        link.stop()


def test_a_single_node_link_starts_nothing():
    link = Link(single(), lambda: 0)
    before = threading.active_count()
    link.start()
    assert threading.active_count() == before
    link.committed(1, ["ag_a"], True)  # a no-op bus
    link.stop()
