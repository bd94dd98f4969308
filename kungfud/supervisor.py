"""``kungfud serve --workers N`` (N > 1): one supervisor, N worker processes
serving one LMDB data directory on one port (docs/operations.md "Workers").

The supervisor binds the listening address before it creates anything (a busy
port leaves nothing behind): N sockets on one port with SO_REUSEPORT, the first
bound alone so an address anything else holds is refused. It takes the
data-dir lock and keeps it for its whole life, opens the store, checks the log,
migrates and bootstraps the admin exactly as a single daemon does, closes the
store (keeping the lock), then starts N workers (kungfud.worker) as fresh
interpreters that inherit one socket each and the locked descriptor. It prints
the readiness line once every worker listens, then ``kungfud worker I pid P``
per worker (again for each replacement).

A worker that dies is logged and replaced after a short backoff, on a fresh
socket joined to the same port; one that dies before it listens three times in
a row stops the supervisor (exit 2). SIGTERM/SIGINT are forwarded as SIGTERM;
each worker finishes its in-flight requests; exit 0.

The supervisor sleeps in one ``select`` and wakes at once for what it acts on:
a stop signal and a worker's exit (SIGCHLD) through a self-pipe the signal
handlers write to (``signal.set_wakeup_fd``), a starting worker's control line,
and the next restart's time. It never polls.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import socket
import subprocess
import sys
import time

import msgspec

from .config import Config, ConfigError
from .a2a.card import a2a_url
from .daemon import loop_factory, bind_listener, bootstrap_admin, checked_store, new_runtime, ws_url
from .server.app import STOP_WITHIN_S
from .worker import PORTS_ENV, Spec, whole_lines

__all__ = ["run", "worker_count", "PORTS_ENV"]

log = logging.getLogger("kungfud")

START_FAILURES = 3  # a worker that dies before it listens this many times in a row stops the supervisor
START_WITHIN_S = 60.0  # a worker not listening by then has failed to start
BACKOFF_S = (0.2, 5.0)  # first restart delay, doubled per death in a row up to the second


def worker_count(value: int | str) -> int:
    """``[server] workers`` / ``--workers``: a number >= 1, or "auto" (one per core)."""
    return (os.cpu_count() or 1) if value == "auto" else int(value)


def _status(code: int) -> str:
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with status {code}"


def _why(w: "_Worker") -> str:
    return f": {w.failure}" if w.failure else ""


class _Worker:
    def __init__(self, index: int):
        self.index = index
        self.proc: subprocess.Popen | None = None
        self.control: socket.socket | None = None
        self.ready = False
        self.url = ""  # its own port (KUNGFUD_WORKER_PORTS=1)
        self.deaths = 0  # in a row, before it listened
        self.restart_at: float | None = None
        self.announce = False  # a replacement: print its line once it listens
        self.failure = ""  # why it could not start, as it said
        self.eof = False  # its control channel closed: it is dying (SIGCHLD tells when it is gone)


class Supervisor:
    def __init__(self, cfg: Config, n: int, lock_fd: int, addr: tuple, log_args: list[str], a2a_addr: tuple | None = None):
        self.cfg, self.n, self.lock_fd, self.addr, self.log_args = cfg, n, lock_fd, addr, log_args
        self.a2a_addr = a2a_addr  # the A2A port every worker joins (None: not served)
        self.workers = [_Worker(i) for i in range(1, n + 1)]
        self.stopping = False
        # The wake-up pipe: every handled signal writes its number here (install()).
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)

    def install(self) -> None:
        """SIGTERM/SIGINT stop it; SIGCHLD (a worker exited) only wakes it. Each
        handled signal writes its number to the wake-up pipe, so the wait in
        :meth:`_wait` returns at once, whenever the signal lands."""
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)
        signal.signal(signal.SIGCHLD, lambda _signum, _frame: None)
        signal.set_wakeup_fd(self._wake_w, warn_on_full_buffer=False)

    def _on_signal(self, signum: int, _frame: object) -> None:
        self.stopping = True

    def _wait(self, timeout: float | None, lines: bool = True) -> None:
        """Sleep until a signal, a line from a starting worker (``lines``) or
        ``timeout`` (None: no limit); read what woke it."""
        waiting = [w.control for w in self.workers if lines and w.control is not None and not (w.ready or w.eof)]
        readable, _, _ = select.select([self._wake_r, *waiting], [], [], None if timeout is None else max(0.0, timeout))
        if self._wake_r in readable:
            try:
                while signums := os.read(self._wake_r, 256):
                    if signal.SIGTERM in signums or signal.SIGINT in signums:
                        self.stopping = True  # whether or not its Python handler has run yet
            except BlockingIOError:
                pass
        for w in self.workers:
            if w.control is not None and w.control in readable:
                self._read_ready(w)

    def spawn(self, w: _Worker, sock: socket.socket | None, a2a: socket.socket | None = None) -> None:
        """Start worker ``w`` on ``sock`` (and ``a2a``, the A2A port's), or (a
        replacement: None) on sockets it joins to the ports itself once it can serve."""
        ours, theirs = socket.socketpair()
        own = [s for s in (sock, a2a) if s is not None]
        fds = (theirs.fileno(), self.lock_fd, *(s.fileno() for s in own))
        listen_fd = sock.fileno() if sock is not None else -1
        a2a_host, a2a_port = self.a2a_addr[:2] if self.a2a_addr else ("", -1)
        spec = Spec(
            index=w.index, workers=self.n, listen_fd=listen_fd, host=self.addr[0], port=self.addr[1],
            lock_fd=self.lock_fd, control_fd=theirs.fileno(), config=self.cfg,
            a2a_fd=a2a.fileno() if a2a is not None else -1, a2a_host=a2a_host, a2a_port=a2a_port,
        )
        try:
            w.proc = subprocess.Popen(
                [sys.executable, "-m", "kungfud", "serve", *self.log_args, "--worker", msgspec.json.encode(spec).decode()],
                pass_fds=fds,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,  # stdout is the supervisor's: its readiness lines only
            )
        finally:
            for s in own:
                s.close()  # the worker holds it now: a dead worker's socket leaves the port
            theirs.close()
        w.control, w.ready, w.url, w.restart_at, w.failure, w.eof = ours, False, "", None, "", False
        w.control.setblocking(False)

    def _read_ready(self, w: _Worker) -> None:
        """Take the worker's ``ready [URL]`` line from its control channel."""
        assert w.control is not None
        try:
            data = w.control.recv(4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:  # EOF: it is dying; watch() or start() sees its exit (SIGCHLD)
            w.eof = True
            return
        line = data.decode(errors="replace").strip()
        if line.startswith("ready"):
            w.ready, w.deaths = True, 0
            w.url = line[len("ready") :].strip()
        elif line.startswith("failed "):
            w.failure = line[len("failed ") :]

    def _line(self, w: _Worker) -> None:
        assert w.proc is not None
        print(f"kungfud worker {w.index} pid {w.proc.pid}{' ' + w.url if w.url else ''}", flush=True)

    def start(self, socks: list[socket.socket], a2a_socks: list[socket.socket] | None = None) -> int | None:
        """Start every worker; None when all listen, else the exit status."""
        for i, (w, sock) in enumerate(zip(self.workers, socks)):
            self.spawn(w, sock, a2a_socks[i] if a2a_socks else None)
        deadline = time.monotonic() + START_WITHIN_S
        while not all(w.ready for w in self.workers):
            if self.stopping:
                return self.stop()
            for w in self.workers:
                assert w.proc is not None
                if not w.ready and w.proc.poll() is not None:
                    self._read_ready(w)  # its last words, if any
                    return self._fail(f"worker {w.index} {_status(w.proc.returncode)} before it was listening{_why(w)}")
            if time.monotonic() > deadline:
                return self._fail(f"workers not listening within {START_WITHIN_S:.0f} s")
            self._wait(deadline - time.monotonic())
        print(f"kungfud listening on {ws_url(*self.addr[:2], self.cfg)}", flush=self.a2a_addr is None)
        if self.a2a_addr is not None:
            print(f"kungfud a2a on {a2a_url(*self.a2a_addr[:2])}", flush=True)
        for w in self.workers:
            self._line(w)
        return None

    def watch(self) -> int:
        """Until SIGTERM/SIGINT: replace the workers that die."""
        while not self.stopping:
            restarts = [w.restart_at for w in self.workers if w.restart_at is not None]
            self._wait(min(restarts) - time.monotonic() if restarts else None)
            if self.stopping:  # a signal while waiting: a worker it stopped is not replaced
                break
            now = time.monotonic()
            for w in self.workers:
                assert w.proc is not None
                if w.restart_at is None and w.proc.poll() is not None:
                    if not w.ready:
                        self._read_ready(w)  # its last words, if any
                        w.deaths += 1
                        if w.deaths >= START_FAILURES:
                            return self._fail(
                                f"worker {w.index} {_status(w.proc.returncode)} before it was listening, "
                                f"{w.deaths} times in a row{_why(w)}"
                            )
                    delay = min(BACKOFF_S[1], BACKOFF_S[0] * 2**w.deaths)
                    log.warning("worker %d (pid %d) %s; restarting it in %.1f s", w.index, w.proc.pid, _status(w.proc.returncode), delay)
                    if w.control is not None:
                        w.control.close()
                        w.control = None
                    w.ready, w.restart_at = False, now + delay
                elif w.restart_at is not None and now >= w.restart_at:
                    self.spawn(w, None)
                    w.announce = True
                elif w.ready and w.announce:
                    w.announce = False
                    self._line(w)
        return self.stop()

    def _fail(self, why: str) -> int:
        print(f"kungfud: {why}; stopping", file=sys.stderr, flush=True)
        self.stop()
        return 2

    def stop(self) -> int:
        """SIGTERM to every worker; each finishes its in-flight requests."""
        live = [w.proc for w in self.workers if w.proc is not None and w.proc.poll() is None]
        log.info("stopping: SIGTERM to %d worker(s)", len(live))
        for p in live:
            p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_WITHIN_S + 5
        while any(p.poll() is None for p in live) and time.monotonic() < deadline:
            self._wait(deadline - time.monotonic(), lines=False)  # SIGCHLD wakes it
        for p in live:
            if p.poll() is None:
                log.warning("worker pid %d did not stop in time: killing it", p.pid)
                p.kill()
                p.wait()
        return 0


def run(cfg: Config, n: int, log_args: list[str]) -> int:
    whole_lines()
    try:
        loop_factory(cfg.server.event_loop)  # refused here, before anything is created
    except ConfigError as e:
        print(f"kungfud: {e}", file=sys.stderr)
        return 2
    socks: list[socket.socket] = []
    a2a_socks: list[socket.socket] = []
    try:
        socks.append(bind_listener(*cfg.listen_addr(), reuse_port="open"))
        addr = socks[0].getsockname()
        for _ in range(n - 1):
            socks.append(bind_listener(addr[0], addr[1], reuse_port="join"))
    except OSError as e:
        for s in socks:
            s.close()
        print(f"kungfud: cannot listen on {cfg.server.listen}: {e.strerror or e}", file=sys.stderr)
        return 2
    a2a_addr = None
    if cfg.a2a.enabled:  # every worker serves A2A on one port too (SO_REUSEPORT, as above)
        try:
            a2a_socks.append(bind_listener(*cfg.a2a_listen(), reuse_port="open"))
            a2a_addr = a2a_socks[0].getsockname()
            for _ in range(n - 1):
                a2a_socks.append(bind_listener(a2a_addr[0], a2a_addr[1], reuse_port="join"))
        except OSError as e:
            for s in socks + a2a_socks:
                s.close()
            print(f"kungfud: cannot listen on {cfg.a2a_listen()} (A2A): {e.strerror or e}", file=sys.stderr)
            return 2
    try:
        lock_fd = _prepare(cfg)
    except Exception as e:  # StoreLocked, StoreDamaged, permissions, lmdb errors
        for s in socks + a2a_socks:
            s.close()
        print(f"kungfud: {e}", file=sys.stderr)
        return 2
    sup = Supervisor(cfg, n, lock_fd, addr, log_args, a2a_addr)
    sup.install()
    code = sup.start(socks, a2a_socks)
    return sup.watch() if code is None else code


def _prepare(cfg: Config) -> int:
    """Lock, check, migrate and bootstrap as a single daemon does; the store is
    closed again and the lock kept (the returned descriptor)."""
    store = checked_store(cfg)
    try:
        rt = new_runtime(store, cfg)
        rt.writer.start()
        try:
            admin = bootstrap_admin(rt)
        finally:
            rt.writer.stop()
        if admin:
            log.info("created admin agent %s; its key is in %s", admin, os.path.join(cfg.data_dir, "admin.key"))
        return store.hold_lock()
    finally:
        store.close()

