"""``kungfud serve --workers N`` (issue 16 item 2; docs/operations.md "Workers"):
N processes serve one LMDB data directory on one port. Each test runs the CLI
in a subprocess with the test-only ``KUNGFUD_WORKER_PORTS=1``, so every worker
is also reachable on a port of its own and a test can choose the worker."""

from __future__ import annotations

import asyncio
import json
import os
import re
import select
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kungfud.client import Client, new_key
from kungfud.client.core import LOST
from kungfud.store import Store
from kungfud.supervisor import worker_count
from tests.conftest import DAEMON_LOGS, ROOT
from tests.e2e.helpers import call, register

READY = re.compile(r"kungfud listening on ws://127\.0\.0\.1:(\d+)/v1\n")
A2A_READY = re.compile(r"kungfud a2a on (http://127\.0\.0\.1:\d+)\n")
WORKER = re.compile(r"kungfud worker (\d+) pid (\d+) (ws://127\.0\.0\.1:\d+/v1)\n")


def _kungfud(*args: str) -> list[str]:
    return [sys.executable, "-m", "kungfud", *args]


def _run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(_kungfud(*args), cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def _alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


class Workers:
    """``kungfud serve --workers N`` with per-worker ports; stdout read line by line."""

    def __init__(self, data_dir: Path, n: int = 2, *extra: str, flag: bool = True):
        self.data_dir, self.n = data_dir, n
        self.stderr_path = data_dir.parent / f"{data_dir.name}-workers.log"
        DAEMON_LOGS.append(self.stderr_path)
        self._err = open(self.stderr_path, "ab")
        self.proc = subprocess.Popen(
            _kungfud("serve", *(["--workers", str(n)] if flag else []), "--data-dir", str(data_dir), "--listen", "127.0.0.1:0", *extra),
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=self._err,
            env={**os.environ, "KUNGFUD_WORKER_PORTS": "1"},
        )
        self._buf = b""
        first = self.line()
        m = READY.fullmatch(first)
        assert m, (first, self.stderr())
        self.url = f"ws://127.0.0.1:{m.group(1)}/v1"
        a2a = A2A_READY.fullmatch(self.line())  # every worker serves A2A on one port too (WIRE.md 1.3)
        assert a2a, self.stderr()
        self.a2a_url = a2a.group(1)
        self.pids: dict[int, int] = {}
        self.urls: dict[int, str] = {}
        for _ in range(n):
            self.take_worker_line()
        assert sorted(self.pids) == list(range(1, n + 1)), self.pids

    def line(self, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
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

    def take_worker_line(self, timeout: float = 30.0) -> int:
        text = self.line(timeout)
        m = WORKER.fullmatch(text)
        assert m, text
        i = int(m.group(1))
        self.pids[i], self.urls[i] = int(m.group(2)), m.group(3)
        return i

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def terminate(self, timeout: float = 30.0) -> int:
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        finally:
            self._err.close()

    def cleanup(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for pid in self.pids.values():
            if _alive(pid):
                os.kill(pid, signal.SIGCONT)
                os.kill(pid, signal.SIGKILL)
        self._err.close()


@pytest.fixture
def workers(tmp_path):
    started: list[Workers] = []

    def start(n: int = 2, *extra: str, name: str = "data", flag: bool = True) -> Workers:
        w = Workers(tmp_path / name, n, *extra, flag=flag)
        started.append(w)
        return w

    yield start
    for w in started:
        w.cleanup()


def _agents(data_dir: Path) -> list[str]:
    store = Store(str(data_dir), readonly=True, lock=False)
    try:
        with store.read() as view:
            return list(view.agents(None))
    finally:
        store.close()


@pytest.mark.rules("L1-4")
async def test_two_workers_serve_one_store_and_each_reads_the_others_writes(workers):
    w = workers(2)
    assert len(set(w.pids.values())) == 2 and w.proc.pid not in w.pids.values()
    _, key = await register(w.url, "alice")
    async with await Client.connect(w.urls[1], key) as one, await Client.connect(w.urls[2], key) as two:
        assert (await one.read("agent.whoami"))["agent"] == (await two.read("agent.whoami"))["agent"]
        m = (await one.act("memory.create", {"content": {"v": 1}}))["memory"]
        got = await two.read("memory.get", {"memory": m})
        assert got["latest"] == 1 and got["content"] == {"v": 1}
        # worker 1 has the memory's state cached: its next read must see worker 2's change
        assert (await two.act("memory.update", {"memory": m, "content": {"v": 2}}))["version"] == 2
        got = await one.read("memory.get", {"memory": m})
        assert got["latest"] == 2 and got["content"] == {"v": 2}
        # and a decision on worker 1 is made on the fresh state (a version check, not the cache)
        assert (await one.act("memory.update", {"memory": m, "content": {"v": 3}}))["version"] == 3
        assert (await two.read("memory.get", {"memory": m}))["content"] == {"v": 3}
    assert w.terminate() == 0
    for pid in w.pids.values():
        assert not _alive(pid)


@pytest.mark.rules("L1-4")
async def test_admin_is_bootstrapped_once_with_a_0600_key(workers):
    w = workers(2)
    key_file = w.data_dir / "admin.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    admin_key = key_file.read_text().strip()
    for url in w.urls.values():
        async with await Client.connect(url, admin_key) as admin:
            assert (await admin.read("agent.whoami"))["status"] == "active"
    assert w.terminate() == 0
    assert len(_agents(w.data_dir)) == 1  # the admin alone
    w = workers(2)  # again on the same directory: no second admin, the key untouched
    assert w.terminate() == 0
    assert len(_agents(w.data_dir)) == 1 and key_file.read_text().strip() == admin_key
    assert admin_key not in w.stderr()


@pytest.mark.rules("L3-1", "L3-2")
async def test_keyed_creates_retried_across_workers_take_effect_once(workers):
    """200 keyed creates, each sent to both workers at once: one takes effect,
    the other replays its receipt; `kungfud check` passes after the stop. Both
    workers append audit lines to one stderr, never mixing two within a line."""
    w = workers(2, "--log-format", "json")
    agents = [await register(w.url, f"a{i}") for i in range(4)]
    results: dict[str, list[dict]] = {}

    async def one_agent(key: str) -> None:
        async with await Client.connect(w.urls[1], key) as c1, await Client.connect(w.urls[2], key) as c2:
            gate = asyncio.Semaphore(16)

            async def send(c: Client, k: str, i: int) -> None:
                async with gate:
                    results.setdefault(k, []).append(await call(c, "memory.create", {"content": {"i": i}}, key=k))

            keys = [new_key() for _ in range(50)]
            await asyncio.gather(*(send(c, k, i) for i, k in enumerate(keys) for c in (c1, c2)))

    await asyncio.gather(*(one_agent(key) for _, key in agents))
    assert len(results) == 200
    for k, (a, b) in results.items():
        assert a["ok"] and b["ok"], (a, b)
        assert a["result"] == b["result"], (a, b)
        assert sorted([a["replayed"], b["replayed"]]) == [False, True], (a, b)
    for agent, key in agents:
        async with await Client.connect(w.url, key) as c:
            listed = (await c.read("memory.list", {"limit": 100}))["items"]
        assert len(listed) == 50
    assert w.terminate() == 0
    r = _run("check", "--data-dir", str(w.data_dir))
    assert r.returncode == 0, r.stdout + r.stderr
    lines = [json.loads(line) for line in w.stderr().splitlines()]  # every line whole
    creates = [x for x in lines if x["logger"] == "kungfud.audit" and x["op"] == "memory.create"]
    assert len(creates) == 400 and sum(x["replayed"] for x in creates) == 200, len(creates)


@pytest.mark.rules("L1-4")
async def test_data_dir_stays_locked_while_a_worker_lives_even_after_the_supervisor_is_killed(workers):
    w = workers(2)
    r = _run("serve", "--data-dir", str(w.data_dir), "--listen", "127.0.0.1:0")
    assert r.returncode == 2 and "in use" in r.stderr, r.stderr
    r = _run("serve", "--workers", "2", "--data-dir", str(w.data_dir), "--listen", "127.0.0.1:0")
    assert r.returncode == 2 and "in use" in r.stderr and "listening" not in r.stdout, r.stderr
    # Workers held still, so they cannot stop before the second serve is tried.
    for pid in w.pids.values():
        os.kill(pid, signal.SIGSTOP)
    w.proc.kill()
    w.proc.wait()
    r = _run("serve", "--data-dir", str(w.data_dir), "--listen", "127.0.0.1:0")
    assert r.returncode == 2 and "in use" in r.stderr, r.stderr
    for pid in w.pids.values():
        os.kill(pid, signal.SIGCONT)
    # The workers notice that their supervisor is gone and stop by themselves.
    deadline = time.monotonic() + 30
    while any(_alive(p) for p in w.pids.values()):
        assert time.monotonic() < deadline, "workers outlived their supervisor"
        await asyncio.sleep(0.1)
    assert "the supervisor is gone" in w.stderr()
    again = workers(2)  # the directory is free again
    assert again.terminate() == 0


@pytest.mark.rules("L1-4", "L3-2")
async def test_a_killed_worker_is_restarted_and_nothing_acknowledged_is_lost(workers):
    w = workers(2)
    _, key = await register(w.url, "alice")
    victim, victim_pid = 1, w.pids[1]
    acked: dict[str, tuple[int, str]] = {}  # idempotency key -> (args' i, memory)
    unacked: list[tuple[str, int]] = []
    survivor_ok = fresh_ok = 0

    async with await Client.connect(w.urls[2], key) as two:

        async def load_on_victim() -> None:
            c = await Client.connect(w.urls[victim], key, retries=0)
            for i in range(10_000):
                k = new_key()
                try:
                    resp = await call(c, "memory.create", {"content": {"i": i}}, key=k)
                except LOST:  # the kill can land while the request is being sent
                    unacked.append((k, i))
                    return
                assert resp["ok"] or resp["error"]["code"] == "unavailable", resp
                if resp["ok"]:
                    acked[k] = (i, resp["result"]["memory"])
                else:
                    unacked.append((k, i))

        async def survivor() -> None:
            nonlocal survivor_ok, fresh_ok
            deadline = time.monotonic() + 3.0
            while time.monotonic() < deadline:
                assert (await two.read("agent.whoami"))["status"] == "active"
                # Once the supervisor has seen the death (so the dead worker's
                # socket is closed), the shared port takes every new connection,
                # replacement or not. (One that raced the death in the dead
                # socket's queue is reset: docs/decisions.md D126.)
                if survivor_ok % 10 == 0 and "killed by signal SIGKILL" in w.stderr():
                    async with await Client.connect(w.url, key, open_timeout=2) as fresh:
                        assert (await fresh.read("agent.whoami"))["status"] == "active"
                    fresh_ok += 1
                survivor_ok += 1
                await asyncio.sleep(0.01)

        load = asyncio.create_task(load_on_victim())
        await asyncio.sleep(0.5)
        os.kill(victim_pid, signal.SIGKILL)
        await survivor()  # the other worker answers throughout
        await asyncio.wait_for(load, 10)
        assert acked and survivor_ok > 10 and fresh_ok > 3
        # the replacement takes its place, on the same port
        assert w.take_worker_line() == victim and w.pids[victim] != victim_pid
        assert re.search(rf"WARNING kungfud worker 1 \(pid {victim_pid}\) killed by signal SIGKILL", w.stderr())
        # every retry on the other worker replays the receipt, or takes effect once
        for k, (i, m) in acked.items():
            resp = await call(two, "memory.create", {"content": {"i": i}}, key=k)
            assert resp["ok"] and resp["replayed"] and resp["result"]["memory"] == m, resp
        for k, i in unacked:
            first = await call(two, "memory.create", {"content": {"i": i}}, key=k)
            again = await call(two, "memory.create", {"content": {"i": i}}, key=k)
            assert first["ok"] and again["replayed"] and again["result"] == first["result"], (first, again)
            acked[k] = (i, first["result"]["memory"])
    async with await Client.connect(w.urls[victim], key) as again:
        listed = set()
        cursor = None
        while True:
            page = await again.read("memory.list", {"limit": 100, **({"cursor": cursor} if cursor else {})})
            listed |= {x["memory"] for x in page["items"]}
            cursor = page.get("cursor")
            if not cursor:
                break
        # nothing acknowledged is lost, and each key made one memory
        assert {m for _, m in acked.values()} == listed
    assert w.terminate() == 0
    r = _run("check", "--data-dir", str(w.data_dir))
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.rules("L2-1", "L2-4")
def test_a_busy_port_leaves_no_data_directory(tmp_path):
    holder = socket.socket()
    try:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        data = tmp_path / "data"
        r = _run("serve", "--workers", "2", "--data-dir", str(data), "--listen", f"127.0.0.1:{port}")
        assert r.returncode == 2 and f"cannot listen on 127.0.0.1:{port}" in r.stderr, r.stderr
        assert "listening" not in r.stdout and not data.exists()
    finally:
        holder.close()


@pytest.mark.rules("L2-4")
@pytest.mark.parametrize("value", ["0", "abc", "-1", "1.5"])
def test_a_bad_worker_count_is_a_usage_error(tmp_path, value):
    r = _run("serve", "--workers", value, "--data-dir", str(tmp_path / "d"), "--listen", "127.0.0.1:0")
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "--workers" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "d").exists()


@pytest.mark.rules("L2-4")
def test_a_bad_worker_count_in_the_config_names_the_key(tmp_path):
    cfg = tmp_path / "k.toml"
    cfg.write_text("[server]\nworkers = 0\n")
    r = _run("serve", "--config", str(cfg), "--data-dir", str(tmp_path / "d"), "--listen", "127.0.0.1:0")
    assert r.returncode == 2 and "workers" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_the_worker_hooks_are_not_in_help():
    r = _run("serve", "--help")
    assert "--workers" in r.stdout and "--worker " not in r.stdout and "WORKER_PORTS" not in r.stdout


@pytest.mark.rules("L2-4")
async def test_a_worker_that_keeps_dying_at_start_stops_the_supervisor_with_its_message(workers):
    """Worker 1 killed, and its store gone before its replacement opens it: each
    replacement refuses to start (exit 2, saying why); after three in a row the
    supervisor stops every worker and exits 2."""
    w = workers(2)
    store = w.data_dir / "lmdb" / "data.mdb"
    os.kill(w.pids[1], signal.SIGKILL)
    store.rename(w.data_dir / "moved-away.mdb")
    assert w.proc.wait(60) == 2
    err = w.stderr()
    said = f"{store} is missing, but {w.data_dir} is not a new data directory"
    assert f"kungfud: worker 1: {said}" in err, err  # the worker's own message
    last = err.strip().splitlines()
    stop_line = next(x for x in last if x.startswith("kungfud: worker 1 exited"))
    assert stop_line.startswith("kungfud: worker 1 exited with status 2 before it was listening, 3 times in a row: "), err
    assert said in stop_line and stop_line.endswith("; stopping"), stop_line
    assert "Traceback" not in err
    deadline = time.monotonic() + 20
    while _alive(w.pids[2]):
        assert time.monotonic() < deadline, "worker 2 outlived its supervisor"
        await asyncio.sleep(0.1)


async def test_sigterm_to_every_process_at_once_stops_cleanly_without_restarts(workers):
    """As systemd's default stop does (SIGTERM to the whole control group)."""
    w = workers(2)
    _, key = await register(w.url, "alice")
    for pid in (w.proc.pid, *w.pids.values()):
        os.kill(pid, signal.SIGTERM)
    assert w.proc.wait(30) == 0
    assert "restarting" not in w.stderr()
    for pid in w.pids.values():
        assert not _alive(pid)
    assert w.proc.stdout.read() == b""  # no replacement was announced


async def test_the_worker_count_comes_from_the_config_file_and_auto_is_one_per_core(workers, tmp_path):
    cfg = tmp_path / "k.toml"
    cfg.write_text("[server]\nworkers = 3\n")
    w = workers(3, "--config", str(cfg), flag=False)
    assert w.terminate() == 0
    assert worker_count("auto") == os.cpu_count() and worker_count(2) == 2


def _wake_ups(pid: int) -> int:
    """How many times ``pid`` has gone to sleep (it wakes before each next one)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("voluntary_ctxt_switches:"):
                return int(line.split()[1])
    raise AssertionError(f"no voluntary_ctxt_switches in /proc/{pid}/status")


async def test_an_idle_supervisor_sleeps_until_a_signal_or_a_line_wakes_it(workers):
    """The supervisor does not poll: a stop signal, a worker's exit (SIGCHLD)
    and a starting worker's line wake it (supervisor.py), so while nothing
    happens it does not wake at all — no turn of a timer, whose period would
    delay a stop or a restart."""
    w = workers(2)
    settled = _wake_ups(w.proc.pid)
    for _ in range(100):  # until it is asleep: no wake-up between two looks
        time.sleep(0.05)
        settled, last = _wake_ups(w.proc.pid), settled
        if settled == last:
            break
    time.sleep(0.5)
    assert _wake_ups(w.proc.pid) == settled
    assert w.terminate() == 0


async def test_sigint_to_the_supervisor_stops_every_worker_with_exit_0(workers):
    w = workers(2)
    w.proc.send_signal(signal.SIGINT)
    assert w.proc.wait(30) == 0
    for pid in w.pids.values():
        assert not _alive(pid)
    assert "restarting" not in w.stderr()
