"""Test helpers: ``kungfud serve --workers N`` on one LMDB data directory, each
worker also on a port of its own (the test-only ``KUNGFUD_WORKER_PORTS=1``),
so a test reaches and kills each node by itself."""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import DAEMON_LOGS, ROOT

WORKER = re.compile(r"kungfud worker (\d+) pid (\d+) (ws://127\.0\.0\.1:\d+/v1)\n")


class Node:
    """One worker: its url and pid."""

    def __init__(self, index: int, pid: int, url: str):
        self.index, self.pid, self.url = index, pid, url

    def kill(self) -> None:
        """SIGKILL: no cleanup at all (its supervisor starts a replacement)."""
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class Cluster:
    """``kungfud serve --workers n`` with per-worker ports."""

    def __init__(self, tmp_path: Path, n: int, env: dict | None = None):
        self.data_dir = tmp_path / "data"
        self.stderr_path = tmp_path / "workers.stderr"
        DAEMON_LOGS.append(self.stderr_path)
        self._err = open(self.stderr_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kungfud", "serve", "--workers", str(n), "--data-dir", str(self.data_dir),
             "--listen", "127.0.0.1:0"],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=self._err,
            env={**os.environ, "KUNGFUD_WORKER_PORTS": "1", **(env or {})},
        )
        self._buf = b""
        self.nodes: list[Node] = []
        first = self._line()
        assert first.startswith("kungfud listening on "), (first, self.stderr())
        for _ in range(n):
            m = WORKER.fullmatch(self._line())
            assert m, self.stderr()
            self.nodes.append(Node(int(m.group(1)), int(m.group(2)), m.group(3)))
        self.nodes.sort(key=lambda node: node.index)

    def _line(self, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()  # type: ignore[union-attr]
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise AssertionError(f"no line on stdout within {timeout} s; stderr: {self.stderr()}")
            chunk = os.read(fd, 4096)
            if not chunk:
                raise AssertionError(f"stdout closed (exit {self.proc.poll()}); stderr: {self.stderr()}")
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line.decode() + "\n"

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    @property
    def admin_key(self) -> str:
        return (self.data_dir / "admin.key").read_text().strip()

    def lease_holder(self) -> Node | None:
        """The worker whose flock holds ``deadlines.lock`` (from /proc/locks)."""
        try:
            ino = os.stat(self.data_dir / "deadlines.lock").st_ino
        except FileNotFoundError:
            return None
        with open("/proc/locks") as f:
            for line in f:
                parts = line.split()
                if len(parts) > 5 and parts[1] == "FLOCK" and parts[5].rsplit(":", 1)[-1] == str(ino):
                    pid = int(parts[4])
                    return next((n for n in self.nodes if n.pid == pid), None)
        return None

    def stop(self) -> None:
        """SIGTERM to the supervisor, which stops its workers; if it does not
        stop in time, kill it and the workers it was running."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
                for node in self.nodes:
                    node.kill()
        if not self._err.closed:
            self._err.close()


def wait_for(pred, timeout: float, step: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(step)
    return pred()


class PgCluster:
    """``n`` nodes ``kungfud serve --store URL``, each a process on its own port
    and node-local data directory, on one PostgreSQL database; the same
    interface as :class:`Cluster`."""

    def __init__(self, tmp_path: Path, n: int, url: str):
        from tests.conftest import Daemon

        self.url = url
        self.daemons = [Daemon(tmp_path / f"node{i}", extra=["--store", url]) for i in range(n)]
        self.nodes: list[Node] = []
        for i, d in enumerate(self.daemons):
            d.start()
            self.nodes.append(Node(i + 1, d.proc.pid, d.url))  # type: ignore[union-attr]
        self.data_dir = self.daemons[0].data_dir  # the first node bootstrapped the admin

    @property
    def admin_key(self) -> str:
        return (self.data_dir / "admin.key").read_text().strip()

    def lease_holder(self) -> Node | None:
        """The node whose session holds the deadline lease (its pid is in the session's name)."""
        import psycopg

        from kungfud.nodes.pg import LOCK_DEADLINES

        with psycopg.connect(self.url, autocommit=True) as conn:
            row = conn.execute(
                "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
                " WHERE l.locktype = 'advisory' AND l.granted AND l.classid = %s AND l.objid = %s",
                (LOCK_DEADLINES >> 32, LOCK_DEADLINES & 0xFFFFFFFF),
            ).fetchone()
        if row is None:
            return None
        pid = int(row[0].rsplit("-", 1)[1])
        return next((n for n in self.nodes if n.pid == pid), None)

    def stop(self) -> None:
        for d in self.daemons:
            d.stop()
