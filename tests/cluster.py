"""The daemon under test: one process, or two nodes on one store (issue 16).

The e2e suite runs against any of three set-ups, chosen by ``pytest --nodes=MODE``
or ``KUNGFUD_E2E_NODES=MODE`` (the option wins; default ``lmdb``):

- ``lmdb``: one ``kungfud serve`` on one LMDB data directory (:class:`Daemon`;
  exactly the suite as it was before issue 16);
- ``lmdb2``: one supervisor with ``--workers 2`` on one LMDB data directory, each
  worker also on a private port (``KUNGFUD_WORKER_PORTS=1``);
- ``pg2``: two ``kungfud serve --store postgresql://…`` processes, each with its
  own data directory, on a fresh database of the session's throwaway PostgreSQL
  cluster (``tests/pg.py``); they start together, and the one that bootstraps
  the admin (the store's bootstrap lock, D112) is the first node.

In the two-node modes the ``daemon``, ``clocked_daemon`` and ``make_daemon``
fixtures give a :class:`Cluster`, which has :class:`Daemon`'s interface; its
``url`` hands out the nodes' URLs in turn (each read the next node), so each
client of a test meets another node than the one before. Every node reads the
same test clock file. A test that is about one process or one LMDB directory by
nature carries ``@pytest.mark.single_node("why")`` and is deselected (not
skipped) in the two-node modes.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent

#: mode -> what it runs (the pytest header and the deselection summary print it)
MODES = {
    "lmdb": "one LMDB node",
    "lmdb2": "two LMDB workers (serve --workers 2)",
    "pg2": "two nodes on PostgreSQL (serve --store postgresql://…)",
}
ENV = "KUNGFUD_E2E_NODES"
#: an AF_UNIX socket path's limit (Linux: 108 bytes with the NUL), less a margin
SOCKET_PATH_MAX = 100
#: what an LMDB node adds to its data directory for its socket: /nodes/<pid up to 4194304>.sock
SOCKET_TAIL = len("/nodes/4194304.sock")
#: how long a daemon or a cluster may take to listen: about a second on an idle
#: 2-core machine, ten times more when it is shared (load 15-20); a hang guard only
START_S = 60.0

# Every daemon log written during the session, scanned at the end for secrets.
DAEMON_LOGS: list[Path] = []

_WORKER_LINE = re.compile(r"^kungfud worker (\d+) pid (\d+) (ws://\S+)$")


def mode_of(config) -> str:
    """The set-up this run tests against: ``--nodes``, else ``$KUNGFUD_E2E_NODES``, else lmdb."""
    mode = config.getoption("nodes") or os.environ.get(ENV) or "lmdb"
    if mode not in MODES:
        raise ValueError(f"--nodes / {ENV}: {mode!r} is not one of {', '.join(MODES)}")
    return mode


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def _kill9(pid: int, wait: float = 10.0) -> None:
    """SIGKILL a process that may not be our child, and wait until it is gone."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + wait
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.01)


def wait_for(pred, timeout: float, step: float = 0.05) -> bool:
    """Poll ``pred`` until it is true or ``timeout`` seconds pass; its last value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(step)
    return bool(pred())


#: put on a daemon's PYTHONPATH: its sitecustomize keeps trio out, as without the test extra
DAEMON_SITE = ROOT / "tests" / "daemon_site"


def daemon_env(env: dict | None) -> dict:
    """The environment a daemon of the suite starts with: this process's, with
    ``env`` over it and :data:`DAEMON_SITE` first on ``PYTHONPATH``."""
    merged = {**os.environ, **(env or {})}
    merged["PYTHONPATH"] = os.pathsep.join(p for p in (str(DAEMON_SITE), merged.get("PYTHONPATH")) if p)
    return merged


class Daemon:
    """A kungfud process on a data directory; restartable on the same directory."""

    def __init__(
        self,
        data_dir: Path,
        config: Path | None = None,
        extra: list[str] | None = None,
        env: dict | None = None,
        test_clock: bool = False,
        clock_path: Path | None = None,
        a2a: bool = True,
    ):
        self.data_dir = data_dir
        self.env = env
        self.config = config
        # test_clock: the daemon's clock is the wall clock plus an offset this
        # test moves forward (advance_clock; KUNGFUD_TEST_CLOCK, kungfud/testing/offset_clock.py).
        # clock_path: the file, when several daemons share one clock (a Cluster).
        self.clock_path: Path | None = None
        self.clock_offset_ms = 0
        if test_clock or clock_path is not None:
            self.clock_path = clock_path or data_dir.parent / f"{data_dir.name}.clock"
            self.env = {**(env or {}), "KUNGFUD_TEST_CLOCK": str(self.clock_path)}
        self.extra = extra or []
        self.proc: subprocess.Popen | None = None
        self._stopping = False  # stop(): SIGTERM sent, exit not yet seen
        self.url = ""
        # The A2A endpoint (WIRE.md 1.3), from the line after the readiness line;
        # "" when the daemon serves no A2A ([a2a] enabled = false: pass a2a=False).
        self.a2a_url = ""
        self.a2a = a2a
        self._link: str | None = None  # _short_dir's symlink, once made
        self.stderr_path = data_dir.parent / f"{data_dir.name}.stderr"
        DAEMON_LOGS.append(self.stderr_path)

    def start(self, listen: str = "127.0.0.1:0", timeout: float = START_S) -> "Daemon":
        self.spawn(listen)
        return self.ready(timeout)

    def spawn(self, listen: str = "127.0.0.1:0") -> None:
        """Start the process; :meth:`ready` waits until it listens."""
        cmd = [sys.executable, "-m", "kungfud", "serve", "--data-dir", self._short_dir(), "--listen", listen]
        config = self._a2a_pinned(self.config) if self.a2a and not listen.endswith(":0") else self.config
        if config is not None:
            cmd += ["--config", str(config)]
        cmd += self.extra
        self._stderr = open(self.stderr_path, "ab")
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=self._stderr, cwd=ROOT, text=True,
            env=daemon_env(self.env),
        )

    def _short_dir(self) -> str:
        """The data directory as the daemon is told it: ``data_dir`` itself, or,
        when its LMDB node sockets (``DATA_DIR/nodes/<pid>.sock``) would not fit
        AF_UNIX's 107 bytes (a deep ``--basetemp``, a long user name, a
        two-node test's own folder), a short symlink to it under /tmp, removed
        when this Daemon is."""
        path = str(self.data_dir)
        if len(path) + SOCKET_TAIL <= SOCKET_PATH_MAX:
            return path
        if self._link is None:
            os.makedirs(path, mode=0o700, exist_ok=True)  # a symlink to nothing is "not a directory"
            folder = tempfile.mkdtemp(prefix="kf-", dir="/tmp")
            self._link = os.path.join(folder, "data")
            os.symlink(os.path.abspath(path), self._link)
            weakref.finalize(self, shutil.rmtree, folder, True)
        return self._link

    def _a2a_pinned(self, config: Path | None) -> Path | None:
        """A start on a fixed websocket port (a restart a client reconnects to):
        A2A's default listen would be that port + 1 (wire.md 1.3), which any
        other process on the machine may hold (CI's console reconnect test met
        one). Keep the A2A port this daemon had, or a free one — unless the
        test's own config says where A2A listens."""
        text = config.read_text() if config is not None else ""
        if "[a2a]" in text:
            return config
        port = urlsplit(self.a2a_url).port if self.a2a_url else 0
        path = self.data_dir.parent / f"{self.data_dir.name}.fixed-port.toml"
        path.write_text(f'{text}\n[a2a]\nlisten = "127.0.0.1:{port}"\n')
        return path

    def ready(self, timeout: float = START_S) -> "Daemon":
        """Until the spawned process says it listens (its URL is then ``url``)."""
        deadline = time.monotonic() + timeout
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("kungfud listening on "):
            self.proc.kill()
            raise RuntimeError(f"daemon did not start: {line!r}; stderr: {self.stderr_path.read_text()[-2000:]}")
        assert time.monotonic() < deadline
        self.url = line.split()[-1]
        if self.a2a:
            line = self.proc.stdout.readline()
            if not line.startswith("kungfud a2a on "):
                self.proc.kill()
                raise RuntimeError(f"daemon serves no A2A: {line!r}; stderr: {self.stderr_path.read_text()[-2000:]}")
            self.a2a_url = line.split()[-1]
        return self

    def advance_clock(self, seconds: float) -> None:
        """Move the daemon's clock ``seconds`` forward, running or stopped. Its
        next request sees the new time (every request reads the clock), and that
        read wakes its deadline clock, which records every expiry now due."""
        assert self.clock_path is not None, "start this daemon with test_clock=True"
        assert seconds > 0, "the test clock only moves forward"
        self.clock_offset_ms += round(seconds * 1000)
        self._write_clock(f"{self.clock_offset_ms}")

    def freeze_clock(self) -> None:
        """Stop the daemon's clock a second ahead of now, until advance_clock
        moves it on: every action until then happens in one millisecond (D282)."""
        assert self.clock_path is not None, "start this daemon with test_clock=True"
        self._write_clock(f"={time.time_ns() // 1_000_000 + self.clock_offset_ms + 1000}")

    def _write_clock(self, text: str) -> None:
        assert self.clock_path is not None
        tmp = self.clock_path.with_name(self.clock_path.name + ".tmp")
        tmp.write_text(text + "\n")
        os.replace(tmp, self.clock_path)  # never half-written

    @property
    def admin_key(self) -> str:
        return (self.data_dir / "admin.key").read_text().strip()

    # What a Cluster has too, for tests written once for both.
    @property
    def urls(self) -> list[str]:
        """Every node's URL (one here)."""
        return [self.url]

    @property
    def a2a_urls(self) -> list[str]:
        """Every node's A2A endpoint (one here)."""
        return [self.a2a_url]

    @property
    def pids(self) -> list[int]:
        """The pid of every process that serves (one here)."""
        return [self.proc.pid] if self.proc else []

    @property
    def log_paths(self) -> list[Path]:
        """Every node's stderr log (one here)."""
        return [self.stderr_path]

    @property
    def store_args(self) -> list[str]:
        """How ``kungfud check``/``backup`` name this daemon's store."""
        return ["--data-dir", str(self.data_dir)]

    def kill(self) -> None:
        """SIGKILL: no cleanup at all."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def send_signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def wait(self, timeout: float = 20.0) -> int:
        """Until the daemon exits; its status."""
        assert self.proc is not None
        return self.proc.wait(timeout)

    def terminate(self, timeout: float = 20.0) -> int:
        self.send_signal(signal.SIGTERM)
        return self.wait(timeout)

    def restart(self) -> "Daemon":
        self.kill()
        return self.start()

    def stop(self) -> None:
        self.stopping()
        self.stopped()

    def stopping(self) -> None:
        """SIGTERM, once, if it runs; :meth:`stopped` waits for the exit."""
        if self.proc and self.proc.poll() is None and not self._stopping:
            self.proc.send_signal(signal.SIGTERM)
            self._stopping = True

    def stopped(self) -> None:
        """Until it has exited (SIGKILL after 15 s)."""
        if self.proc and self.proc.poll() is None:
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._stopping = False
        if self.proc and self.proc.stdout:
            self.proc.stdout.close()


class Cluster:
    """Two nodes on one store with :class:`Daemon`'s interface (``lmdb2`` or ``pg2``).

    ``url`` is the next node's URL at each read; ``urls``/``pids`` name every
    node; ``kill()``/``restart()``/``terminate()``/``stop()`` act on every node,
    ``kill_node(i)`` on one (kill -9); ``lease_holder()`` is the node that runs
    the deadline clock. ``data_dir`` is the LMDB directory (lmdb2) or the first
    node's directory, which holds ``admin.key`` (pg2). ``nodes``: how many (the
    node tests use three; the benches one, to compare: on LMDB one node is
    ``serve`` alone, as ``--workers 1`` is)."""

    def __init__(
        self,
        mode: str,
        data_dir: Path,
        config: Path | None = None,
        extra: list[str] | None = None,
        env: dict | None = None,
        test_clock: bool = False,
        store_url: str | None = None,
        nodes: int = 2,
    ):
        assert mode in ("lmdb2", "pg2"), mode
        self.mode = mode
        self.data_dir = data_dir
        self.store_url = store_url
        self.n = nodes
        self._supervised = mode == "lmdb2" and nodes > 1  # a supervisor and its workers
        clock = data_dir.parent / f"{data_dir.name}.clock" if test_clock else None
        self._turn = 0
        self._workers: dict[int, tuple[int, str]] = {}  # lmdb2: worker index (from 1) -> (pid, url)
        self._changed = threading.Condition()
        if self._supervised:
            env = {**(env or {}), "KUNGFUD_WORKER_PORTS": "1"}
            self.nodes = [Daemon(data_dir, config, [*(extra or []), "--workers", str(nodes)], env, clock_path=clock)]
        elif mode == "lmdb2":
            self.nodes = [Daemon(data_dir, config, extra, env, clock_path=clock)]
        else:
            assert store_url, "pg2 needs a PostgreSQL URL"
            self.nodes = [
                Daemon(
                    data_dir if i == 0 else data_dir.parent / f"{data_dir.name}-node{i + 1}",
                    config,
                    [*(extra or []), "--store", store_url],
                    env,
                    clock_path=clock,
                )
                for i in range(nodes)
            ]

    # --- the nodes -------------------------------------------------------------

    def start(self, listen: str = "127.0.0.1:0", timeout: float = START_S) -> "Cluster":
        assert listen == "127.0.0.1:0", "a cluster's nodes listen on free ports"
        if not self._supervised:
            # All at once: the store's bootstrap lock lets one of them create the
            # admin (D112); that one becomes node 0, whose directory holds admin.key.
            for node in self.nodes:
                node.spawn(listen)
            try:
                for node in self.nodes:
                    node.ready(timeout)
            except BaseException:
                for node in self.nodes:
                    node.kill()
                raise
            self.nodes.sort(key=lambda node: not (node.data_dir / "admin.key").exists())
            self.data_dir = self.nodes[0].data_dir
            return self
        sup = self.nodes[0].start(timeout=timeout)
        with self._changed:
            self._workers.clear()
        threading.Thread(target=self._read_workers, args=(sup.proc,), daemon=True).start()
        self._wait_workers(timeout)
        return self

    def _read_workers(self, proc: subprocess.Popen) -> None:
        """lmdb2: the supervisor's stdout, for as long as it runs: a line per
        worker started (again, after a restart), ``kungfud worker I pid P URL``."""
        try:
            for line in proc.stdout:
                m = _WORKER_LINE.match(line.strip())
                if m:
                    with self._changed:
                        self._workers[int(m.group(1))] = (int(m.group(2)), m.group(3))
                        self._changed.notify_all()
        except (ValueError, OSError):  # stop() closed the pipe
            pass

    def _wait_workers(self, timeout: float, gone: tuple[int, int] | None = None) -> None:
        """Until every worker has announced itself (and node ``gone[0]``'s pid is no longer ``gone[1]``)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while len(self._workers) < self.n or (gone is not None and self._node_pid(gone[0]) == gone[1]):
                left = deadline - time.monotonic()
                if left <= 0 or self.nodes[0].proc.poll() is not None:
                    raise RuntimeError(
                        f"workers not up: {self._workers}; stderr: {self.nodes[0].stderr_path.read_text()[-2000:]}"
                    )
                self._changed.wait(min(left, 0.2))

    @property
    def urls(self) -> list[str]:
        if not self._supervised:
            return [n.url for n in self.nodes]
        with self._changed:
            return [self._workers[i][1] for i in sorted(self._workers)]

    @property
    def a2a_urls(self) -> list[str]:
        """Every node's A2A endpoint: pg2, one per node; lmdb2, the one port every
        worker serves (SO_REUSEPORT spreads the connections over them)."""
        return [n.a2a_url for n in self.nodes]

    @property
    def a2a_url(self) -> str:
        """The next node's A2A endpoint, round robin as ``url``."""
        urls = self.a2a_urls
        u = urls[self._turn % len(urls)]
        self._turn += 1
        return u

    @property
    def pids(self) -> list[int]:
        """The pid of every serving process (lmdb2: the workers, not the supervisor)."""
        if not self._supervised:
            return [n.proc.pid for n in self.nodes if n.proc]
        with self._changed:
            return [self._workers[i][0] for i in sorted(self._workers)]

    @property
    def url(self) -> str:
        """The next node's URL: round robin over the nodes at each read."""
        urls = self.urls
        u = urls[self._turn % len(urls)]
        self._turn += 1
        return u

    @property
    def proc(self) -> subprocess.Popen | None:
        """The supervisor (lmdb2) or the first node (pg2)."""
        return self.nodes[0].proc

    @property
    def stderr_path(self) -> Path:
        return self.nodes[0].stderr_path

    @property
    def log_paths(self) -> list[Path]:
        """Every node's stderr log (lmdb2: the workers write to the supervisor's)."""
        return [n.stderr_path for n in self.nodes]

    @property
    def admin_key(self) -> str:
        return self.nodes[0].admin_key

    @property
    def store_args(self) -> list[str]:
        if self.mode == "pg2":
            return ["--store", self.store_url]
        return ["--data-dir", str(self.data_dir)]

    @property
    def clock_path(self) -> Path | None:
        return self.nodes[0].clock_path

    def advance_clock(self, seconds: float) -> None:
        """Every node reads the same clock file: moving it moves every node's clock
        (from the furthest offset any node wrote: start() may reorder the nodes)."""
        max(self.nodes, key=lambda node: node.clock_offset_ms).advance_clock(seconds)

    def freeze_clock(self) -> None:
        max(self.nodes, key=lambda node: node.clock_offset_ms).freeze_clock()

    def lease_holder(self) -> int | None:
        """The node (index into ``urls``) that holds the deadline lease, or None.
        lmdb2: the worker whose flock is on ``deadlines.lock`` (from /proc/locks,
        D144); pg2: the node whose session holds the advisory lock (its pid is in
        the session's name)."""
        holder = self._pg_lease_pid() if self.mode == "pg2" else self._flock_pid(self.data_dir / "deadlines.lock")
        pids = self.pids
        return pids.index(holder) if holder in pids else None

    @staticmethod
    def _flock_pid(path: Path) -> int | None:
        try:
            ino = os.stat(path).st_ino
        except FileNotFoundError:
            return None
        with open("/proc/locks") as f:
            for line in f:
                parts = line.split()
                if len(parts) > 5 and parts[1] == "FLOCK" and parts[5].rsplit(":", 1)[-1] == str(ino):
                    return int(parts[4])
        return None

    def _pg_lease_pid(self) -> int | None:
        import psycopg

        from kungfud.nodes.pg import LOCK_DEADLINES

        with psycopg.connect(self.store_url, autocommit=True) as conn:
            row = conn.execute(
                "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
                " WHERE l.locktype = 'advisory' AND l.granted AND l.classid = %s AND l.objid = %s",
                (LOCK_DEADLINES >> 32, LOCK_DEADLINES & 0xFFFFFFFF),
            ).fetchone()
        return None if row is None else int(row[0].rsplit("-", 1)[1])

    # --- ending nodes -------------------------------------------------------------

    def kill_node(self, i: int) -> int:
        """kill -9 node ``i`` alone; its pid. lmdb2: one worker (the supervisor
        starts another, whose URL replaces it in ``urls``); pg2: one process."""
        if not self._supervised:
            pid = self.nodes[i].proc.pid
            self.nodes[i].kill()
            return pid
        with self._changed:
            pid = self._node_pid(i)
        _kill9(pid)
        return pid

    def _node_pid(self, i: int) -> int:
        """lmdb2: the pid of node ``i`` (0-based: the i-th worker by index)."""
        return self._workers[sorted(self._workers)[i]][0]

    def wait_node(self, i: int, old_pid: int, timeout: float = START_S) -> None:
        """lmdb2: until the supervisor has replaced killed worker ``i``; pg2: start node ``i`` again."""
        if not self._supervised:
            self.nodes[i].start(timeout=timeout)
        else:
            self._wait_workers(timeout, gone=(i, old_pid))

    def kill(self) -> None:
        """SIGKILL every process at once (as a host crash would): no cleanup."""
        workers = self.pids if self._supervised else []
        for node in self.nodes:
            node.kill()
        for pid in workers:
            _kill9(pid)

    def send_signal(self, sig: int) -> None:
        """To every node (lmdb2: the supervisor, which forwards SIGTERM to its workers)."""
        for node in self.nodes:
            node.send_signal(sig)

    def wait(self, timeout: float = 20.0) -> int:
        """Until every node exits; the first non-zero exit status, else 0."""
        codes = [node.wait(timeout) for node in self.nodes]
        return next((c for c in codes if c), 0)

    def terminate(self, timeout: float = 20.0) -> int:
        """SIGTERM every node; the first non-zero exit status, else 0."""
        self.send_signal(signal.SIGTERM)
        return self.wait(timeout)

    def restart(self) -> "Cluster":
        self.kill()
        return self.start()

    def stop(self) -> None:
        for node in self.nodes:  # all at once: each finishes in its own time
            node.stopping()
        for node in self.nodes:
            node.stopped()
        if self._supervised:  # workers the supervisor could not stop (it was killed)
            for pid in self.pids:
                if _alive(pid):
                    _kill9(pid)
