"""Assemble and run the daemon: store, runtime, server, signals, bootstrap."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import sys
from typing import TYPE_CHECKING, Callable

from .actors import Runtime
from .actors.runtime import wall_ms
from .testing.offset_clock import OffsetClock
from .config import Config, ConfigError
from .core import agent
from .core.context import Ctx, Limits
from .core.facts import Decision
from .nodes import open_nodes
from .server import Server
from .testing import deaf, faults
from .webhooks import Deliveries
from .webhooks.push import Pushes, WithPushes
from .webhooks.precheck import prechecks
from .store import Committed, Item, StoreDamaged
from .store.interface import Backend
from .store.open import open_store
from .store.quota import Quota

if TYPE_CHECKING:
    from .a2a.serve import A2AServer

__all__ = [
    "run", "serve", "limits_of", "bootstrap_admin", "bind_listener", "checked_store", "new_runtime", "ws_url",
    "start_tracing", "stop_tracing", "loop_factory",
]

log = logging.getLogger("kungfud")


def limits_of(cfg: Config) -> Limits:
    return Limits(
        max_content_bytes=cfg.limits.max_content_bytes,
        deliver_within_s=cfg.defaults.deliver_within_s,
        judge_within_s=cfg.defaults.judge_within_s,
        open_registration=cfg.server.open_registration,
        max_members_per_thread=cfg.limits.max_members_per_thread,
        max_threads_per_agent=cfg.limits.max_threads_per_agent,
        webhook_allow_hosts=tuple(cfg.webhooks.allow_hosts),
        a2a_auto_adopt_s=cfg.a2a.auto_adopt_s,
        a2a_push_configs_per_task=cfg.a2a.push_configs_per_task,
        a2a_public_url=cfg.a2a_public_url(),
    )


def quota_of(cfg: Config) -> Quota:
    """The capacity limits (R12-11, D240/D241): per agent, and the store's reserve."""
    return Quota(
        agent_bytes=cfg.limits.max_bytes_per_agent,
        agent_percent=cfg.limits.max_store_percent_per_agent,
        reserve_percent=cfg.storage.reserve_percent,
    )


def _write_secret(path: str, text: str) -> None:
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, (text + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def _create_secret(path: str, text: str) -> None:
    """Write a new secret file; never replaces one that exists (FileExistsError)."""
    tmp = path + ".tmp"
    _write_secret(tmp, text)  # written and synced under a temporary name first
    try:
        os.link(tmp, path)  # fails if ``path`` exists: an existing key is never overwritten
    finally:
        os.unlink(tmp)


def bootstrap_admin(rt: Runtime) -> str | None:
    """On a data directory with no facts yet, create the admin agent and write its
    key to ``DIR/admin.key`` (0600). The key file is written before the agent is
    committed, so a crash in between leaves no admin whose key is lost. A store
    with facts never gets another admin, and an existing ``admin.key`` is never
    overwritten: a store with no facts beside one is refused (StoreDamaged).
    On a store shared by nodes (PostgreSQL) the check and the write hold the
    store's bootstrap lock, so nodes starting together create one admin (D112)."""
    lock = getattr(rt.store, "bootstrap_lock", None)
    if lock is not None:
        with lock():
            return _bootstrap_admin(rt)
    return _bootstrap_admin(rt)


def _bootstrap_admin(rt: Runtime) -> str | None:
    if rt.store.last_seq() != 0:
        return None
    key_path = os.path.join(rt.store.data_dir, "admin.key")
    if os.path.lexists(key_path):
        raise StoreDamaged(
            f"{key_path} exists but the store in {rt.store.data_dir} holds no facts: it is not a new "
            "data directory, and its admin key is never overwritten; restore the store from a backup, "
            "or remove admin.key if this directory never held data"
        )
    ctx = Ctx(now=wall_ms(), caller=None, new_id=rt.new_id, new_secret=rt.new_secret, limits=rt.limits)
    d = agent.decide_register(agent.Register(b'{"name":"admin"}', admin=True), ctx, bootstrap=True)
    assert isinstance(d, Decision)
    _create_secret(key_path, d.result["key"])
    outcome = rt.writer.write_now(
        Item(scope=None, req_hash=b"", facts=d.facts, states=d.states, expect={d.result["agent"]: 0}, result=d.result)
    )
    if not isinstance(outcome, Committed):
        raise RuntimeError(f"could not create the admin agent: {outcome}")
    return d.result["agent"]


def loop_factory(choice: str) -> tuple[Callable[[], asyncio.AbstractEventLoop] | None, str]:
    """The event loop to serve on: uvloop when chosen or, with "auto", when it
    is installed (it carries the same frames for less CPU: see
    docs/performance.md); asyncio's own loop otherwise."""
    if choice != "asyncio":
        try:
            import uvloop
        except ImportError:
            if choice == "uvloop":
                raise ConfigError(
                    "server.event_loop = \"uvloop\" but uvloop is not installed; "
                    "install it (pip install uvloop) or choose \"auto\" or \"asyncio\""
                ) from None
        else:
            return uvloop.new_event_loop, "uvloop"
    return None, "asyncio"


def bind_listener(host: str, port: int, *, reuse_port: str = "") -> socket.socket:
    """A listening socket on ``host:port`` (the first address the host resolves
    to; a numeric host, the documented form, resolves to itself).

    ``reuse_port``: "" binds it alone; "open" binds it alone too (so an address
    any other socket holds is refused), then lets later sockets join it;
    "join" joins such a socket (SO_REUSEPORT: the kernel spreads connections
    over every joined socket; kungfud.supervisor)."""
    family, kind, proto, _, addr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as asyncio does
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        if reuse_port == "join":
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(addr)
        if reuse_port == "open":
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.listen(100)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def _bind(cfg: Config) -> socket.socket:
    """The listening socket, bound before anything is created on disk: a daemon
    that cannot listen leaves no data directory and no admin key behind."""
    return bind_listener(*cfg.listen_addr())


def checked_store(cfg: Config, *, lock: bool = True) -> Backend:
    """The store, its log checked; raises what it refuses with (StoreLocked,
    StoreDamaged, OSError, storage errors). ``lock=False``: a worker, which holds
    the data-dir lock its supervisor took (kungfud.supervisor)."""
    store = open_store(cfg, cfg.data_dir, map_size_mb=cfg.storage.map_size_mb, lock=lock)
    try:
        store.require_consistent_log()
    except BaseException:
        store.close()
        raise
    return store


def new_runtime(store: Backend, cfg: Config, *, worker: int = 0, workers: int = 1) -> Runtime:
    """The runtime over ``store``. ``rt.worker``: this process's index under
    ``--workers N`` (1..N; 0 when it serves alone), ``rt.workers``: N (1 alone),
    for the node mechanisms (kungfud/nodes)."""
    test_clock = OffsetClock.from_env()  # tests only: KUNGFUD_TEST_CLOCK (kungfud/testing/offset_clock.py)
    nodes = open_nodes(cfg.storage.url, cfg.data_dir, workers)  # issue 16: the other nodes
    rt = Runtime(
        store, limits_of(cfg), clock=test_clock or wall_ms, nodes=nodes, quota=quota_of(cfg),
        actor_threads=cfg.server.actor_threads,
    )
    rt.worker, rt.workers = worker, workers  # type: ignore[attr-defined]
    deaf.install_from_env(rt.link)  # tests only: KUNGFUD_TEST_DEAF (kungfud/testing/deaf.py)
    if test_clock is not None:
        test_clock.on_advance = rt.clock_thread.wake
    return rt


def start_tracing(cfg: Config, worker: int = 0) -> None:
    """WIRE.md 1.3 "Tracing": spans to ``[tracing] otlp_endpoint`` when it is
    set (kungfud/tracing.py; TracingUnavailable without the extra); nothing
    of OpenTelemetry is imported when it is not."""
    if cfg.tracing.otlp_endpoint:
        from . import __version__, tracing

        node = f"{socket.gethostname()}:{os.path.abspath(cfg.data_dir)}" + (f"#{worker}" if worker else "")
        tracing.configure(cfg.tracing.otlp_endpoint, cfg.tracing.sample_ratio, node, __version__)


def run(cfg: Config) -> int:
    try:
        factory, loop_name = loop_factory(cfg.server.event_loop)
        start_tracing(cfg)
    except (ConfigError, RuntimeError) as e:  # RuntimeError: TracingUnavailable
        print(f"kungfud: {e}", file=sys.stderr)
        return 2
    try:
        listener = _bind(cfg)
    except OSError as e:
        print(f"kungfud: cannot listen on {cfg.server.listen}: {e.strerror or e}", file=sys.stderr)
        return 2
    try:
        store = checked_store(cfg)
    except Exception as e:  # StoreLocked, StoreDamaged, permissions, storage errors
        listener.close()
        print(f"kungfud: {e}", file=sys.stderr)
        return 2
    rt = new_runtime(store, cfg)
    rt.start()
    try:
        try:
            admin = bootstrap_admin(rt)
        except StoreDamaged as e:
            listener.close()
            print(f"kungfud: {e}", file=sys.stderr)
            return 2
        faults.install_from_env(rt.writer)  # tests only (KUNGFUD_FAULT_NTH); after the bootstrap
        if admin:
            log.info("created admin agent %s; its key is in %s", admin, os.path.join(cfg.data_dir, "admin.key"))
        log.info("event loop: %s", loop_name)
        with asyncio.Runner(loop_factory=factory) as runner:
            return runner.run(serve(rt, cfg, listener))
    finally:
        rt.stop()
        store.close()
        stop_tracing()


def stop_tracing() -> None:
    """Export the spans still queued, for a few seconds at most."""
    if "kungfud.tracing" in sys.modules:
        sys.modules["kungfud.tracing"].shutdown()


async def serve(
    rt: Runtime,
    cfg: Config,
    listener: socket.socket,
    *,
    private: socket.socket | None = None,
    control: socket.socket | None = None,
    a2a: socket.socket | None = None,
) -> int:
    """Serve until SIGTERM/SIGINT. Alone it prints the readiness line on
    stdout (then the A2A endpoint's); a worker (``control``: its channel to the
    supervisor) reports ``ready [URL of private]`` there instead, and stops
    when the channel reaches EOF (its supervisor is gone). ``a2a``: the A2A
    endpoint's socket, bound already (a worker's); else it is bound here when
    ``[a2a] enabled``."""
    # WIRE.md 1.2: each agent's events POSTed to its webhook. The runner lives on
    # the server's event loop and hears every commit from it, as its one sink;
    # the pre-checks the op catalogue names check against the runner's allow list.
    runner = Deliveries(rt, cfg.webhooks)
    # WIRE.md 1.3: A2A push configs on the same engine (kungfud/webhooks/push.py).
    sink = WithPushes(runner, Pushes(rt, cfg.webhooks)) if cfg.a2a.enabled else runner
    server = Server(rt, cfg, sink=sink, prechecks=prechecks(runner.allow))
    try:
        host, port = await server.start(sock=listener, private=private)
    except OSError as e:
        listener.close()
        print(f"kungfud: cannot listen on {cfg.server.listen}: {e.strerror or e}", file=sys.stderr)
        return 2
    endpoint = a2a_endpoint(server, cfg)
    if endpoint is not None:
        try:
            a2a_addr = await endpoint.start(a2a if a2a is not None else bind_listener(*cfg.a2a_listen()))
        except OSError as e:
            print(f"kungfud: cannot listen on {cfg.a2a.listen or cfg.a2a_listen()} (A2A): {e.strerror or e}", file=sys.stderr)
            await server.stop(1.0)
            return 2
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if control is None:
        print(f"kungfud listening on {ws_url(host, port, cfg)}", flush=endpoint is None)
        if endpoint is not None:
            print(f"kungfud a2a on {endpoint.url(*a2a_addr)}", flush=True)
    else:
        extra = "" if private is None else " " + ws_url(*private.getsockname()[:2], cfg)
        control.setblocking(True)
        control.sendall(f"ready{extra}\n".encode())
        control.setblocking(False)

        def _supervisor_gone() -> None:
            try:
                if control.recv(64):
                    return  # nothing is sent this way; ignored
            except BlockingIOError:
                return
            except OSError:
                pass
            loop.remove_reader(control.fileno())
            log.warning("the supervisor is gone: stopping")
            stop.set()

        loop.add_reader(control.fileno(), _supervisor_gone)
    await stop.wait()
    log.info("stopping: finishing in-flight requests")
    if endpoint is not None:
        await endpoint.stop()
    await server.stop()
    return 0


def a2a_endpoint(server: Server, cfg: Config) -> "A2AServer | None":
    """The A2A endpoint to start, when ``[a2a] enabled`` and the ``a2a`` extra
    (a2a-sdk, uvicorn) is installed; None (said in the log) otherwise."""
    if not cfg.a2a.enabled:
        return None
    from .a2a.serve import A2AServer, missing  # the app itself loads on the first connection (D400)

    lacking = missing()
    if lacking is not None:
        log.warning("A2A is not served: No module named %r (pip install 'kungfud[a2a]')", lacking)
        return None
    return A2AServer(server, cfg)


def ws_url(host: str, port: int, cfg: Config) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"ws://{shown}:{port}{cfg.server.path}"
