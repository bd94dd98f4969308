"""Shared fixtures. Async test functions run in a fresh event loop (no plugin
needed). ``daemon`` starts the real daemon as a subprocess on a free port."""

from __future__ import annotations

import asyncio
import inspect
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Every daemon log written during the session, scanned at the end for secrets.
DAEMON_LOGS: list[Path] = []
# Agent keys (kf_…) and admission tokens (kt_…) are 43 base64url characters.
SECRET_SHAPE = re.compile(rb"k[ft]_[A-Za-z0-9_-]{43}")


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    if inspect.iscoroutinefunction(pyfuncitem.obj):
        funcargs = pyfuncitem.funcargs
        args = {name: funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
        # A hung test fails instead of stalling the suite; a test whose length
        # is its point (the crash loop, the storage-fault walk) names its own
        # limit with @pytest.mark.timeout_s(N).
        limit = pyfuncitem.get_closest_marker("timeout_s")
        asyncio.run(asyncio.wait_for(pyfuncitem.obj(**args), timeout=limit.args[0] if limit else 120))
        return True
    return None


class Daemon:
    """A kungfud process on a data directory; restartable on the same directory."""

    def __init__(
        self,
        data_dir: Path,
        config: Path | None = None,
        extra: list[str] | None = None,
        env: dict | None = None,
        test_clock: bool = False,
    ):
        self.data_dir = data_dir
        self.env = env
        self.config = config
        # test_clock: the daemon's clock is the wall clock plus an offset this
        # test moves forward (advance_clock; KUNGFUD_TEST_CLOCK, kungfud/testing/clock.py).
        self.clock_path: Path | None = None
        self.clock_offset_ms = 0
        if test_clock:
            self.clock_path = data_dir.parent / f"{data_dir.name}.clock"
            self.env = {**(env or {}), "KUNGFUD_TEST_CLOCK": str(self.clock_path)}
        self.extra = extra or []
        self.proc: subprocess.Popen | None = None
        self.url = ""
        self.stderr_path = data_dir.parent / f"{data_dir.name}.stderr"
        DAEMON_LOGS.append(self.stderr_path)

    def start(self, listen: str = "127.0.0.1:0", timeout: float = 20.0) -> "Daemon":
        cmd = [sys.executable, "-m", "kungfud", "serve", "--data-dir", str(self.data_dir), "--listen", listen]
        if self.config is not None:
            cmd += ["--config", str(self.config)]
        cmd += self.extra
        self._stderr = open(self.stderr_path, "ab")
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=self._stderr, cwd=ROOT, text=True,
            env=None if self.env is None else {**os.environ, **self.env},
        )
        deadline = time.monotonic() + timeout
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("kungfud listening on "):
            self.proc.kill()
            raise RuntimeError(f"daemon did not start: {line!r}; stderr: {self.stderr_path.read_text()[-2000:]}")
        assert time.monotonic() < deadline
        self.url = line.split()[-1]
        return self

    def advance_clock(self, seconds: float) -> None:
        """Move the daemon's clock ``seconds`` forward, running or stopped. Its
        next request sees the new time (every request reads the clock), and that
        read wakes its deadline clock, which records every expiry now due."""
        assert self.clock_path is not None, "start this daemon with test_clock=True"
        assert seconds > 0, "the test clock only moves forward"
        self.clock_offset_ms += round(seconds * 1000)
        tmp = self.clock_path.with_name(self.clock_path.name + ".tmp")
        tmp.write_text(f"{self.clock_offset_ms}\n")
        os.replace(tmp, self.clock_path)  # never half-written

    @property
    def admin_key(self) -> str:
        return (self.data_dir / "admin.key").read_text().strip()

    def kill(self) -> None:
        """SIGKILL: no cleanup at all."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def terminate(self, timeout: float = 20.0) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def restart(self) -> "Daemon":
        self.kill()
        return self.start()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self.proc and self.proc.stdout:
            self.proc.stdout.close()


@pytest.fixture
def daemon(tmp_path):
    d = Daemon(tmp_path / "data").start()
    yield d
    d.stop()


@pytest.fixture
def clocked_daemon(tmp_path):
    """``daemon`` whose clock the test moves: ``clocked_daemon.advance_clock(s)``
    instead of sleeping until a deadline passes."""
    d = Daemon(tmp_path / "data", test_clock=True).start()
    yield d
    d.stop()


@pytest.fixture
def make_daemon(tmp_path):
    """Factory for daemons with a config file or extra flags."""
    made: list[Daemon] = []

    def make(config_text: str | None = None, name: str = "data", start: bool = True) -> Daemon:
        cfg = None
        if config_text is not None:
            cfg = tmp_path / f"{name}.toml"
            cfg.write_text(config_text)
        d = Daemon(tmp_path / name, cfg)
        made.append(d)
        return d.start() if start else d

    yield make
    for d in made:
        d.stop()


def pytest_configure(config):
    os.environ.setdefault("PYTHONUNBUFFERED", "1")


def pytest_sessionfinish(session, exitstatus):
    """§12, issue 6.9: no daemon ever logs a key or a token. Every log of every
    daemon the suite started is searched for anything shaped like a secret."""
    leaks = []
    for path in DAEMON_LOGS:
        if path.exists():
            for m in SECRET_SHAPE.finditer(path.read_bytes()):
                leaks.append(f"{path}: {m.group()[:8]}…")
    if leaks:
        print("\nSECRETS FOUND IN DAEMON LOGS (§12):\n" + "\n".join(leaks[:20]))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
