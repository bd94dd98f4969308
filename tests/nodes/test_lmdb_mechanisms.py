"""The LMDB node mechanisms between real processes (issue 16 items 4, 5;
docs/scaling.md "How nodes agree"): announcements over unix datagram sockets
reach a sibling process and a dead sibling's socket is dropped; the deadline
lease (flock) is held by one process at a time and passes to another within
5 s of its holder's kill -9."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import msgspec

from kungfud.nodes import MAX_AGENTS
from kungfud.nodes.lmdb import FileLease, SocketBus
from tests.cluster import ROOT, wait_for

# A sibling: its bus prints every announcement it hears as a JSON line and
# announces what it reads on stdin; it takes the lease when told.
SIBLING = r"""
import json, sys
from kungfud.nodes.lmdb import FileLease, SocketBus
bus = SocketBus(sys.argv[1])
bus.start(lambda seq, agents, dues: print(json.dumps([seq, agents, dues]), flush=True))
lease = FileLease(sys.argv[1])
print("ready", flush=True)
for line in sys.stdin:
    cmd = line.strip()
    if cmd == "lease":
        print("lease", lease.try_acquire(), flush=True)
    elif cmd.startswith("announce"):
        bus.announce(int(cmd.split()[1]), ["ag_x"], False)
"""


def sibling(data_dir: str) -> subprocess.Popen:
    p = subprocess.Popen(
        [sys.executable, "-c", SIBLING, data_dir], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True, cwd=ROOT,
    )
    assert p.stdout.readline().strip() == "ready"
    return p


def _kill(p: subprocess.Popen) -> None:
    if p.poll() is None:
        p.send_signal(signal.SIGKILL)
    p.wait(10)


def test_announcements_reach_a_sibling_process_and_its_replies_come_back(tmp_path):
    d = str(tmp_path)
    heard: list[tuple] = []
    bus = SocketBus(d, name="test")
    bus.start(lambda seq, agents, dues: heard.append((seq, agents, dues)))
    p = sibling(d)
    try:
        bus.announce(7, ["ag_a", "ag_b"], True)
        assert json.loads(p.stdout.readline()) == [7, ["ag_a", "ag_b"], True]
        # Too many agents to name: "maybe anyone".
        bus.announce(8, [f"ag_{i}" for i in range(MAX_AGENTS + 1)], False)
        assert json.loads(p.stdout.readline()) == [8, None, False]
        p.stdin.write("announce 9\n")
        p.stdin.flush()
        assert wait_for(lambda: (9, ["ag_x"], False) in heard, 5), heard
    finally:
        _kill(p)
        bus.close()


def test_a_dead_siblings_socket_is_dropped_and_announcing_never_fails(tmp_path):
    d = str(tmp_path)
    bus = SocketBus(d, name="test")
    p = sibling(d)
    theirs = os.path.join(d, "nodes", f"{p.pid}.sock")
    assert os.path.exists(theirs)
    _kill(p)  # no cleanup: its socket file stays behind, bound by nobody
    assert os.path.exists(theirs)
    bus._listed = 0.0  # list the directory again now
    bus.announce(1, ["ag_a"], False)  # ECONNREFUSED: never raised
    assert not os.path.exists(theirs)
    bus.close()
    assert not os.path.exists(bus.path)


def test_the_deadline_lease_is_held_by_one_process_and_passes_on_kill_9_within_5_s(tmp_path):
    d = str(tmp_path)
    p = sibling(d)
    mine = FileLease(d)
    try:
        p.stdin.write("lease\n")
        p.stdin.flush()
        assert p.stdout.readline().strip() == "lease True"
        assert mine.try_acquire() is False  # one holder at a time
        p.stdin.write("lease\n")
        p.stdin.flush()
        assert p.stdout.readline().strip() == "lease True"  # still held by it
        killed = time.monotonic()
        _kill(p)
        # The node's clock tries again every LEASE_RETRY_S (1 s); the kernel
        # released the flock with its holder.
        assert wait_for(mine.try_acquire, 5, step=1.0)
        assert time.monotonic() - killed < 5
        assert mine.try_acquire() is True  # held: True while held
    finally:
        _kill(p)
        mine.release()
    other = FileLease(d)
    assert other.try_acquire() is True  # released
    other.release()


def test_closing_a_bus_stops_its_receiver(tmp_path):
    bus = SocketBus(str(tmp_path), name="test")
    bus.start(lambda *a: None)
    bus.close()
    assert bus._thread is not None and not bus._thread.is_alive()


def test_a_seen_share_a_full_peer_refuses_is_sent_again_before_the_next_datagram(tmp_path):
    """WIRE.md ``admin.agent.list`` ``last_seen_at`` across LMDB workers (D175,
    D176): a sibling's receive buffer that is full refuses a "seen" datagram
    (EAGAIN); the sightings are kept for that peer, merged by max, and go
    first when anything is next sent to it — delayed, not lost."""
    d = str(tmp_path)
    bus = SocketBus(d, name="test")
    peer = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    peer.bind(os.path.join(d, "nodes", "peer.sock"))  # bound, never reading until told
    try:
        n = 0
        while bus.dropped == 0:  # fill its queue with commit announcements
            n += 1
            assert n < 10_000, "the peer's queue never filled"
            bus.announce(n, ["ag_x"], False)
        bus.announce_seen({"ag_a": 5})  # refused: the queue is full
        bus.announce_seen({"ag_a": 7, "ag_b": 1})  # refused too; merged by max
        bus.hello()  # and a hello
        peer.setblocking(False)
        heard = []
        while True:
            try:
                heard.append(msgspec.msgpack.decode(peer.recv(65536)))
            except BlockingIOError:
                break
        assert not [m for m in heard if isinstance(m, dict)]  # none of the three got through
        bus.announce(n + 1, ["ag_y"], False)  # the next send to it
        heard = [msgspec.msgpack.decode(peer.recv(65536)) for _ in range(3)]
        assert heard == [{}, {"ag_a": 7, "ag_b": 1}, [n + 1, ["ag_y"], False]], heard
        assert bus._unsent == {} and bus._unsent_hello == set()
    finally:
        peer.close()
        bus.close()
