"""The PostgreSQL node mechanisms against a throwaway cluster (tests/pg.py;
issue 16 items 4, 5): NOTIFY reaches another node's listener and not its
sender; after PostgreSQL restarts the listener listens again and says
"maybe anyone" (notifications may have been lost); the deadline lease
(pg_try_advisory_lock) is held by one session, passes to another within 5 s of
its holder's kill -9, and a session lost to a restart is a lost lease that is
taken again."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import psycopg

from kungfud.nodes import MAX_AGENTS
from kungfud.nodes.pg import AdvisoryLease, NotifyBus
from tests.cluster import ROOT, wait_for
from tests.pg import pg_server  # noqa: F401 (fixture)


def _bus(url: str) -> tuple[NotifyBus, list]:
    heard: list = []
    bus = NotifyBus(url)
    bus.start(lambda seq, agents, dues: heard.append((seq, agents, dues)))
    return bus, heard


def _listening(bus: NotifyBus) -> bool:
    return bus._listen_conn is not None


def test_an_announcement_reaches_the_other_node_and_not_its_sender(pg_server):
    url = pg_server.new_database()
    a, heard_a = _bus(url)
    b, heard_b = _bus(url)
    try:
        assert wait_for(lambda: _listening(a) and _listening(b), 10)
        time.sleep(0.2)  # LISTEN has run
        a.announce(5, ["ag_1", "ag_2"], True)
        assert wait_for(lambda: heard_b, 5)
        assert heard_b[0][0] == 5 and sorted(heard_b[0][1]) == ["ag_1", "ag_2"] and heard_b[0][2] is True
        a.announce(6, [f"ag_{i}" for i in range(MAX_AGENTS + 1)], False)
        assert wait_for(lambda: any(h[0] == 6 for h in heard_b), 5)
        assert [h for h in heard_b if h[0] == 6][0][1] is None  # too many to name: maybe anyone
        time.sleep(0.3)
        assert heard_a == []  # its own notifications are skipped
    finally:
        a.close()
        b.close()


def test_after_postgresql_restarts_the_listener_listens_again_and_wakes_everyone(pg_server):
    url = pg_server.new_database()
    a, _ = _bus(url)
    b, heard_b = _bus(url)
    try:
        assert wait_for(lambda: _listening(a) and _listening(b), 10)
        pg_server.restart()
        assert wait_for(lambda: (0, None, True) in heard_b, 15), heard_b  # notifications may be lost
        assert wait_for(lambda: _listening(b), 10)
        time.sleep(0.3)
        a.announce(9, ["ag_9"], False)
        assert wait_for(lambda: (9, ["ag_9"], False) in heard_b, 10), heard_b
    finally:
        a.close()
        b.close()


HOLDER = r"""
import sys, time
from kungfud.nodes.pg import AdvisoryLease
lease = AdvisoryLease(sys.argv[1])
print("lease", lease.try_acquire(), flush=True)
time.sleep(600)
"""


def test_the_lease_is_held_by_one_session_and_passes_on_kill_9_within_5_s(pg_server):
    url = pg_server.new_database()
    p = subprocess.Popen([sys.executable, "-c", HOLDER, url], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    mine = AdvisoryLease(url)
    try:
        assert p.stdout.readline().strip() == "lease True"
        assert mine.try_acquire() is False
        killed = time.monotonic()
        p.send_signal(signal.SIGKILL)
        p.wait(10)
        assert wait_for(mine.try_acquire, 5, step=1.0)  # the clock retries every second
        assert time.monotonic() - killed < 5
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(10)
        mine.release()
    other = AdvisoryLease(url)
    assert other.try_acquire() is True  # released with its session
    other.release()


def test_a_session_lost_to_a_restart_is_a_lost_lease_taken_again(pg_server):
    url = pg_server.new_database()
    lease = AdvisoryLease(url)
    try:
        assert lease.try_acquire() is True
        with psycopg.connect(url, autocommit=True) as admin:  # the holder's session ends
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE 'kungfud-node-%'"
            )
        lease._checked = 0.0  # check the session now rather than within CHECK_S
        assert lease.try_acquire() is False  # lost with its session
        assert lease.try_acquire() is True  # reconnected and taken again
    finally:
        lease.release()
