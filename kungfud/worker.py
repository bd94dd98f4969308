"""One worker of ``kungfud serve --workers N`` (kungfud.supervisor): a fresh
interpreter that serves on the listening socket its supervisor bound, over the
store its supervisor opened, checked and bootstrapped.

It inherits three descriptors: its listening socket (SO_REUSEPORT, shared with
its siblings' on one port), the data-dir lock (held while any worker lives,
even if the supervisor is killed) and its control channel (a socketpair: it
reports ``ready`` there once it listens, and stops when the channel reaches
EOF, i.e. when its supervisor is gone). It opens the store without taking the
lock: the inherited descriptor is the lock.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import sys

import msgspec

from .config import Config
from .daemon import loop_factory, stop_tracing, bind_listener, checked_store, new_runtime, serve, start_tracing
from .testing import faults

__all__ = ["Spec", "run", "PORTS_ENV", "whole_lines"]

log = logging.getLogger("kungfud")

#: Tests only: each worker also listens on a port of its own (docs/operations.md "Workers").
PORTS_ENV = "KUNGFUD_WORKER_PORTS"


class Spec(msgspec.Struct, frozen=True):
    """What the supervisor hands a worker (the hidden ``serve --worker`` argument)."""

    index: int  # 1..workers
    workers: int
    listen_fd: int  # its listening socket; -1: a replacement, which joins host:port itself
    host: str
    port: int
    lock_fd: int
    control_fd: int
    config: Config
    a2a_fd: int = -1  # its A2A listening socket; -1: none, or a replacement, which joins a2a_host:a2a_port
    a2a_host: str = ""
    a2a_port: int = -1  # -1: A2A is not served


class _WholeLines:
    """A log stream that writes each record with one write(2), so lines from
    several processes on one stderr never interleave within a line (a file
    opened with O_APPEND, or a pipe for lines up to PIPE_BUF)."""

    def __init__(self, fd: int):
        self.fd = fd
        self._parts: list[str] = []

    def write(self, text: str) -> None:
        self._parts.append(text)

    def flush(self) -> None:
        data, self._parts = "".join(self._parts).encode(errors="replace"), []
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view) :]


def whole_lines() -> None:
    """Make every handler on stderr write whole records (after logs.setup)."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler) and handler.stream is sys.stderr:
            handler.setStream(_WholeLines(sys.stderr.fileno()))  # type: ignore[arg-type]


def run(spec_text: str) -> int:
    try:
        spec = msgspec.json.decode(spec_text, type=Spec)
    except msgspec.DecodeError as e:
        print(f"kungfud: --worker is internal to kungfud serve --workers: {e}", file=sys.stderr)
        return 2
    whole_lines()
    cfg = spec.config
    control = socket.socket(fileno=spec.control_fd)
    # spec.lock_fd stays open, untouched, for this process's whole life.
    store = None
    try:
        factory, _ = loop_factory(cfg.server.event_loop)
        start_tracing(cfg, spec.index)  # WIRE.md 1.3 (nothing imported when off)
        private = bind_listener(spec.host, 0) if os.environ.get(PORTS_ENV) == "1" else None
        store = checked_store(cfg, lock=False)
        rt = new_runtime(store, cfg, worker=spec.index, workers=spec.workers)
        rt.start()
    except Exception as e:  # ConfigError, StoreDamaged, permissions, lmdb errors, a private port
        if store is not None:
            store.close()
        return _failed(spec, control, e)
    try:
        faults.install_from_env(rt.writer)  # tests only (KUNGFUD_FAULT_NTH)
        if spec.listen_fd >= 0:
            listener = socket.socket(fileno=spec.listen_fd)
            listener.setblocking(False)
        else:
            # A replacement joins the port itself, only now that it can serve:
            # no connection waits on its socket while it starts.
            try:
                listener = bind_listener(spec.host, spec.port, reuse_port="join")
            except OSError as e:
                return _failed(spec, control, e)
        a2a = None
        if spec.a2a_fd >= 0:
            a2a = socket.socket(fileno=spec.a2a_fd)
            a2a.setblocking(False)
        elif spec.a2a_port >= 0:
            try:
                a2a = bind_listener(spec.a2a_host, spec.a2a_port, reuse_port="join")
            except OSError as e:
                return _failed(spec, control, e)
        with asyncio.Runner(loop_factory=factory) as runner:
            return runner.run(serve(rt, cfg, listener, private=private, control=control, a2a=a2a))
    finally:
        rt.stop()
        store.close()
        stop_tracing()


def _failed(spec: Spec, control: socket.socket, e: BaseException) -> int:
    """Say why it cannot start, on stderr and to the supervisor (which repeats
    it if it stops for it); exit status 2."""
    why = f"{e.strerror or e}" if isinstance(e, OSError) and e.strerror else f"{e}"
    print(f"kungfud: worker {spec.index}: {why}", file=sys.stderr)
    try:
        control.sendall(f"failed {why}".replace("\n", " ").encode(errors="replace") + b"\n")
    except OSError:
        pass
    return 2
