"""Websocket server: one connection task, one sender task, requests pipelined.

Frame rules (WIRE.md "Transport", "Frames"): text frames only (binary → close
1003); over ``max_frame_bytes`` → close 1009 (websockets' ``max_size``); any other
bad frame → ``bad_request`` and the connection stays open. Replies are queued to a
per-connection sender so a client that stops reading blocks only itself, and is
disconnected after ``send_timeout_s``.
"""

from __future__ import annotations

import asyncio
import http
import ipaddress
import logging
import socket
import threading
import time
from typing import Any

import msgspec
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.protocol import State

from .. import wire
from ..actors import Job, Runtime
from ..actors.ops import ACTIONS, ROUTE_READS
from ..config import Config
from ..core.agent import key_hash
from ..core.thread import token_hash as thread_token_hash
from ..errors import Hint, Rejection
from ..store import Committed, Failed, Outcome, Replayed
from ..store.layout import receipt_scope
from ..store.writer import mismatch
from . import audit
from .console import console_response
from .dispatch import run_read, to_command
from .limits import SlidingWindow, TokenBucket
from .metrics import Metrics

__all__ = ["Server"]

log = logging.getLogger("kungfud.server")

_HELLO_HINT = Hint("hello", {"key": "<your agent key>"})
OUTBOX_HIGH = 8 * 1024 * 1024  # stop reading a connection's frames above this backlog …
OUTBOX_LOW = 2 * 1024 * 1024  # … until it drains below this
TURN_BUDGET_S = 0.002  # one connection's frames hold the loop this long before others get a turn
_FAILED_JOIN = frozenset({"not_found", "forbidden", "conflict"})
_ALL = "*"  # the key of the daemon-wide failed-join window
REPLAY_PAGE = 128  # events a `subscribe {since}` replay sends per loop turn
STOP_WITHIN_S = 8.0  # Server.stop() ends within this, whatever clients do (SIGTERM exits 0 promptly)
# Actions that give an agent a new key: connections that authenticated with the
# old one are closed with this code (WIRE.md "Operating a deployment").
_KEY_CHANGES = frozenset({"agent.rotate_key", "admin.agent.reset_key"})
CLOSE_KEY_REVOKED = 4001


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


def _event_frame(seq: int, event: bytes) -> bytes:
    # Stored events are `{"event":…,"data":…}`; the frame adds the seq.
    return b'{"seq":%d,' % seq + event[1:]


def _peer_key(ws: ServerConnection) -> str:
    """What the registration limit counts against when there is no agent: the
    peer's address, something a client cannot multiply for free (IPv6: its
    /64, which one host usually holds whole). Behind a proxy, every client
    shares the proxy's address."""
    peer = ws.remote_address
    host = peer[0] if isinstance(peer, tuple) and peer else str(peer)
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return f"addr:{host}"
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return f"addr:{ip.ipv4_mapped}"
        return f"addr:{ipaddress.IPv6Network((ip, 64), strict=False)}"
    return f"addr:{ip}"


class Conn:
    """Per-connection state, touched only on the event loop."""

    __slots__ = (
        "ws", "agent", "key_hash", "in_flight", "outbox", "closed", "floor", "subscribed", "replay", "pending_bytes",
        "writable", "sending",
    )

    def __init__(self, ws: ServerConnection, agent: str | None, key_hash: bytes | None = None):
        self.ws = ws
        self.agent = agent
        self.key_hash = key_hash  # of the key this connection authenticated with
        self.in_flight = 0
        self.outbox: asyncio.Queue[bytes] = asyncio.Queue()
        self.closed = False
        self.floor: int | None = None  # subscribed: live events must have seq > floor
        self.subscribed: str | None = None  # the agent whose subscriber set holds this connection
        self.replay: asyncio.Task | None = None  # a `subscribe {since}` replay still being sent
        # Bytes queued for this client but not yet handed to its socket. Above
        # OUTBOX_HIGH the connection stops reading frames until the client
        # catches up (below OUTBOX_LOW): a client that never reads costs a
        # bounded amount of memory and is dropped by the send timeout.
        self.pending_bytes = 0
        self.writable = asyncio.Event()
        self.writable.set()
        self.sending = False  # the sender task holds a frame it has not written yet


class Server:
    def __init__(
        self, runtime: Runtime, config: Config, *, send_timeout_s: float = 30.0, max_pending_events: int = 1000
    ):
        self.rt = runtime
        self.cfg = config
        self.send_timeout_s = send_timeout_s
        self.loop: asyncio.AbstractEventLoop | None = None
        self.connections: set[Conn] = set()
        self.actions_limit = SlidingWindow(config.limits.actions_per_minute, 60.0, time.monotonic)
        self.failed_joins = SlidingWindow(
            config.limits.failed_joins_per_window, float(config.limits.failed_join_window_s), time.monotonic
        )
        # Daemon-wide budget of failed joins (D25): an admission token names no
        # Thread until it matches, so "per Thread" is enforced as one budget all
        # Threads share, which bounds the guesses against any one of them too.
        self.failed_joins_all = SlidingWindow(
            config.limits.failed_joins_total_per_window, float(config.limits.failed_join_window_s), time.monotonic
        )
        # agent.register has no agent to count against: each peer address gets
        # actions_per_minute, and everyone together registrations_per_minute.
        self.registrations = SlidingWindow(config.limits.registrations_per_minute, 60.0, time.monotonic)
        self.reads_limit = TokenBucket(config.limits.reads_per_minute, 60.0, time.monotonic)
        self._server: Any = None
        self.subscribers: dict[str, set[Conn]] = {}
        self.metrics = Metrics()
        self._replies: list[tuple] = []
        self._replies_lock = threading.Lock()
        self._replies_scheduled = False
        self._outgoing: dict[str, list[Job]] = {}  # jobs of this loop turn, by actor
        self._flush_scheduled = False
        self.max_pending_events = max_pending_events
        # agent -> when this daemon last saw it (ms): it authenticated or sent a
        # request. In memory only, not a fact (docs/decisions.md).
        self.last_seen: dict[str, int] = {}

    # --- lifecycle ---------------------------------------------------------

    async def start(self, sock: socket.socket | None = None) -> tuple[str, int]:
        """Serve on ``sock`` (already bound) or bind the configured address."""
        self.loop = asyncio.get_running_loop()
        loop = self.loop
        self.rt.event_sink = lambda events: loop.call_soon_threadsafe(self._publish, events)
        host, port = (None, None) if sock is not None else self.cfg.listen_addr()
        self._server = await serve(
            self._handler,
            host,
            port,
            sock=sock,
            process_request=self._process_request,
            max_size=self.cfg.server.max_frame_bytes,
            compression=None,  # DESIGN.md: faster, less memory per connection
            open_timeout=10,
            close_timeout=5,
            ping_interval=20,
            ping_timeout=20,
            server_header="kungfud",
        )
        sock = next(iter(self._server.sockets))
        addr = sock.getsockname()
        return addr[0], addr[1]

    async def stop(self, grace_s: float = STOP_WITHIN_S) -> None:
        """Stop accepting, let in-flight requests finish, flush and close every
        connection — all within ``grace_s`` in total, whatever clients do: the
        connections are flushed and closed together, and whatever is still open
        at the deadline is aborted."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace_s
        # Close only the listening sockets first: websockets' own close() runs
        # once, so it is kept for the final close of every connection.
        self._server.server.close()
        # In-flight actions get most of the budget; their replies, a flush of
        # every outbox, and the close handshakes share the rest.
        answer_by = deadline - min(3.0, grace_s / 2)
        while any(c.in_flight for c in self.connections) and loop.time() < answer_by:
            await asyncio.sleep(0.01)
        flush_by = min(deadline - min(2.0, grace_s / 4), loop.time() + 1.0)
        await asyncio.gather(*(self._flush(c, flush_by) for c in list(self.connections)))
        for c in list(self.connections):
            if not c.closed and (c.sending or c.ws.paused):
                # It does not read: no close handshake can get through to it.
                self._drop(c)
                c.ws.transport.abort()
        self._server.close(close_connections=True)
        try:
            await asyncio.wait_for(self._server.wait_closed(), max(0.0, deadline - loop.time()))
        except asyncio.TimeoutError:
            left = [c for c in self.connections]
            log.warning("stopping: aborting %d connection(s) that did not close in time", len(left))
            for c in left:
                self._drop(c)
            for ws in list(self._server.connections):
                ws.transport.abort()
            try:
                await asyncio.wait_for(self._server.wait_closed(), 1.0)
            except asyncio.TimeoutError:
                log.warning("stopping: connection handlers still running; exiting anyway")

    async def _flush(self, conn: Conn, until: float) -> None:
        loop = asyncio.get_running_loop()
        while not conn.outbox.empty() and not conn.closed and loop.time() < until:
            await asyncio.sleep(0.005)

    # --- handshake -----------------------------------------------------------

    def _process_request(self, connection: ServerConnection, request: Any) -> Any:
        path = request.path.split("?", 1)[0]
        if path == "/healthz":
            return connection.respond(http.HTTPStatus.OK, "ok\n")
        if path == "/metrics":
            response = connection.respond(http.HTTPStatus.OK, self.metrics.render(self))
            response.headers["Content-Type"] = "text/plain; version=0.0.4; charset=utf-8"
            return response
        if (page := console_response(request, self.cfg.server.path)) is not None:
            return page
        if path != self.cfg.server.path:
            return connection.respond(http.HTTPStatus.NOT_FOUND, f"not found; connect to {self.cfg.server.path}\n")
        if len(self.connections) >= self.cfg.server.max_connections:
            return connection.respond(http.HTTPStatus.SERVICE_UNAVAILABLE, "too many connections; retry later\n")
        auth = request.headers.get("Authorization")
        if auth is not None:
            scheme, _, key = auth.partition(" ")
            agent = self._agent_for_key(key.strip()) if scheme.lower() == "bearer" else None
            if agent is None:
                return connection.respond(http.HTTPStatus.UNAUTHORIZED, "unknown agent key\n")
            connection.kungfu_agent = agent  # type: ignore[attr-defined]
            connection.kungfu_key_hash = key_hash(key.strip())  # type: ignore[attr-defined]
        return None

    def _agent_for_key(self, key: str) -> str | None:
        if not key or len(key) > 256:
            return None
        with self.rt.store.read() as view:
            return view.agent_for_key_hash(key_hash(key))

    # --- connection ----------------------------------------------------------

    async def _handler(self, ws: ServerConnection) -> None:
        conn = Conn(ws, getattr(ws, "kungfu_agent", None), getattr(ws, "kungfu_key_hash", None))
        self.connections.add(conn)
        if conn.agent is not None:
            self.last_seen[conn.agent] = _wall_ms()
        sender = asyncio.create_task(self._sender(conn))
        try:
            turn_started = time.perf_counter()
            async for message in ws:
                if isinstance(message, bytes):
                    await self._close(conn, 1003, "binary frames are not accepted; send JSON text frames")
                    break
                self._on_frame(conn, message)
                if conn.pending_bytes > OUTBOX_HIGH:
                    # Backpressure: read nothing more until it reads — or until
                    # the connection is gone (every wait here ends on close).
                    await self._until_closed(conn, conn.writable.wait())
                    if conn.closed:
                        break
                elif time.perf_counter() - turn_started > TURN_BUDGET_S:
                    # Frames already received come without a pause: give other
                    # connections the loop between them, not after the whole batch.
                    await asyncio.sleep(0)
                    turn_started = time.perf_counter()
        except ConnectionClosed:
            pass
        finally:
            self._drop(conn)
            self.connections.discard(conn)
            sender.cancel()

    async def _until_closed(self, conn: Conn, aw: Any) -> None:
        """Await ``aw``, but return as soon as the connection closes."""
        waiter = asyncio.ensure_future(aw)
        closed = asyncio.ensure_future(conn.ws.wait_closed())
        try:
            await asyncio.wait((waiter, closed), return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
            closed.cancel()
        if closed.done() and not closed.cancelled():
            self._drop(conn)

    async def _close(self, conn: Conn, code: int, reason: str) -> None:
        """Close with a code and reason — within the send timeout even when the
        client reads nothing (the close frame cannot get through): then abort,
        as for any connection that does not read for that long."""
        self._drop(conn)
        try:
            await asyncio.wait_for(conn.ws.close(code, reason), self.send_timeout_s)
        except asyncio.TimeoutError:
            conn.ws.transport.abort()

    def _drop(self, conn: Conn) -> None:
        """The connection is gone or being dropped: no more replies are queued
        for it, whatever waits on it wakes, and it stops receiving events. The
        one place a connection's end is recorded."""
        conn.closed = True
        conn.writable.set()
        self._unsubscribe(conn)
        while not conn.outbox.empty():  # free the replies nobody will read
            conn.pending_bytes -= len(conn.outbox.get_nowait())

    async def _sender(self, conn: Conn) -> None:
        ws = conn.ws
        try:
            while True:
                data = await conn.outbox.get()
                conn.sending = True
                await asyncio.wait_for(ws.send(data, text=True), self.send_timeout_s)
                conn.sending = False
                conn.pending_bytes -= len(data)
                if conn.pending_bytes < OUTBOX_LOW:
                    conn.writable.set()
        except asyncio.TimeoutError:
            log.info("closing a connection that did not read its replies for %ss", self.send_timeout_s)
            ws.transport.abort()
        except (ConnectionClosed, asyncio.CancelledError):
            pass
        finally:
            # However the sender ends, the connection is over for it: wake the
            # handler (it may wait on backpressure) instead of leaving it stuck.
            self._drop(conn)

    def _send(self, conn: Conn, data: bytes) -> None:
        """Hand one frame to the client. While its socket keeps up, the frame is
        written at once (no task switch); otherwise it waits its turn in the
        connection's outbox, which its sender task drains with a send timeout."""
        if conn.closed:
            return
        ws = conn.ws
        if not conn.sending and not ws.paused and conn.outbox.empty() and ws.protocol.state is State.OPEN:
            try:
                ws.protocol.send_text(data)
                ws.send_data()
            except Exception:  # the socket went away under us (uvloop raises on a closed transport)
                self._drop(conn)
            return
        conn.pending_bytes += len(data)
        if conn.pending_bytes > OUTBOX_HIGH:
            conn.writable.clear()
        conn.outbox.put_nowait(data)

    def _reject(
        self, conn: Conn, req_id: Any, rejection: Rejection, op: str | None = None, caller: Any = False
    ) -> None:
        """``op``: the action refused, for the audit log (reads are not logged);
        ``caller``: the agent it was sent as (default: the connection's)."""
        self.metrics.rejected(rejection.code)
        if op in wire.ACTION_OPS:
            self._audit(conn.agent if caller is False else caller, op, code=rejection.code)
        self._send(conn, wire.encode_error(req_id, rejection))

    def _audit(
        self, agent: str | None, op: str, *, code: str | None = None, replayed: bool = False, result: bytes | None = None
    ) -> None:
        if self.cfg.server.audit_log:
            audit.record(_wall_ms(), agent, op, code=code, replayed=replayed, result=result)

    # --- frames ------------------------------------------------------------------

    def _on_frame(self, conn: Conn, text: str) -> None:
        try:
            env = wire.decode_envelope(text)
        except wire.FrameError as e:
            self._reject(conn, e.req_id, Rejection.bad_request(e.reason))
            return
        req_id = env.id
        if conn.agent is not None:
            self.last_seen[conn.agent] = _wall_ms()
        if conn.in_flight >= self.cfg.server.max_in_flight:
            self._reject(
                conn,
                req_id,
                Rejection.rate_limited(
                    f"this connection already has {conn.in_flight} requests in flight; "
                    "wait for replies before sending more"
                ),
                env.op,
            )
            return
        op = env.op
        spec = wire.OPS[op]
        if conn.agent is None and not spec.open:
            # Before authentication nothing but the envelope is read (H2).
            self._reject(
                conn,
                req_id,
                Rejection("unauthenticated", f"authenticate with hello before {op}", "revise", _HELLO_HINT),
                op,
            )
            return
        try:
            args = wire.decode_args(env)
            if op == "hello":
                self._hello(conn, req_id, args)
                return
            if op == "subscribe":
                if self._read_allowed(conn, req_id):
                    self._subscribe(conn, req_id, args)
                return
            if spec.kind == "R":
                if self._read_allowed(conn, req_id):
                    self._read(conn, req_id, op, args)
            else:
                self._act(conn, req_id, op, env.key, args)
        except wire.FrameError as e:
            self._reject(conn, req_id, Rejection.bad_request(e.reason), env.op)
        except Exception:
            log.exception("request %r failed", req_id)
            self._reject(
                conn, req_id, Rejection("internal", "the daemon failed on this request; nothing was written", "retry"), env.op
            )

    def _hello(self, conn: Conn, req_id: Any, args: wire.HelloArgs) -> None:
        agent = self._agent_for_key(args.key)
        if agent is None:
            self._reject(conn, req_id, Rejection("unauthenticated", "unknown agent key", "stop"))
            return
        # A new authentication ends the subscription of whoever the connection
        # was before: events follow only a `subscribe` by the agent it is now.
        self._unsubscribe(conn)
        conn.agent = agent
        conn.key_hash = key_hash(args.key)
        self.last_seen[agent] = _wall_ms()
        with self.rt.store.read() as view:
            state = view.state(agent)
        self._send(conn, wire.encode_ok(req_id, wire.encode({"agent": agent, "status": state.status})))

    # --- notifications (WIRE.md "Event"; never needed for correctness, R8-21) ----

    def _subscribe(self, conn: Conn, req_id: Any, args: wire.SubscribeArgs) -> None:
        """Reply with the newest seq, replay the caller's events after ``since``
        from the durable feed, then stream live ones — in order, no gap, no
        duplicate. The replay goes a page (REPLAY_PAGE events) per loop turn
        and waits while the client is behind, so a long one holds up neither
        other connections nor this connection's later requests."""
        assert conn.agent is not None
        with self.rt.store.read() as view:
            newest = view.last_seq()
        # Only once the new subscription is sure to start (its args were
        # checked at the wire) does the old one end.
        self._unsubscribe(conn)
        self._send(conn, wire.encode_ok(req_id, wire.encode({"subscribed": True, "seq": newest})))
        after = self._replay_page(conn, conn.agent, newest if args.since is None else args.since)
        if after is not None:
            conn.replay = asyncio.ensure_future(self._replay_rest(conn, conn.agent, after))

    def _replay_page(self, conn: Conn, agent: str, after: int) -> int | None:
        """Send one page of ``agent``'s events after seq ``after``. When they are
        all sent, go live in the same step (no event can fall in between: live
        events at or below the seq read here are dropped) and return None;
        else return the seq to continue after."""
        page: list[tuple[int, bytes]] = []
        more = False
        with self.rt.store.read() as view:
            top = view.last_seq()
            feed = view.events_for(agent, after)
            try:
                for seq, event in feed:
                    if len(page) >= REPLAY_PAGE and seq != page[-1][0]:
                        more = True  # a page ends between seqs, so `after` resumes exactly
                        break
                    page.append((seq, event))
            finally:
                feed.close()  # its cursor, before the read transaction ends
        for seq, event in page:
            self.metrics.events_sent += 1  # replayed frames count like live ones
            self._send(conn, _event_frame(seq, event))
        if more:
            return page[-1][0]
        conn.floor = top
        conn.subscribed = agent
        conn.replay = None
        self.subscribers.setdefault(agent, set()).add(conn)
        return None

    async def _replay_rest(self, conn: Conn, agent: str, after: int | None) -> None:
        while after is not None:
            await asyncio.sleep(0)  # other connections and this one's requests go first
            while not conn.closed and (conn.pending_bytes > OUTBOX_LOW or conn.outbox.qsize() > REPLAY_PAGE):
                await self._until_closed(conn, asyncio.sleep(0.01))  # the client is behind: let it read
            if conn.closed:
                return
            after = self._replay_page(conn, agent, after)

    def _unsubscribe(self, conn: Conn) -> None:
        if conn.replay is not None:
            conn.replay.cancel()
            conn.replay = None
        # Keyed on the agent that subscribed, not on conn.agent: `hello` may
        # have changed who the connection is since.
        agent, conn.subscribed, conn.floor = conn.subscribed, None, None
        if agent is not None:
            subs = self.subscribers.get(agent)
            if subs is not None:
                subs.discard(conn)
                if not subs:
                    del self.subscribers[agent]

    def _publish(self, events: list[tuple[str, int, bytes]]) -> None:
        for agent, seq, event in events:
            for conn in list(self.subscribers.get(agent, ())):
                if conn.floor is None or seq <= conn.floor or conn.closed:
                    continue
                if conn.outbox.qsize() >= self.max_pending_events:
                    # A slow subscriber never slows anyone else: drop it with a
                    # reason; it recovers with `subscribe {since}` or `turn`.
                    self.metrics.slow_subscribers_dropped += 1
                    self._drop(conn)
                    asyncio.ensure_future(
                        self._close(conn, 1008, "subscriber fell behind; reconnect and subscribe with since, or read turn")
                    )
                    continue
                self.metrics.events_sent += 1
                self._send(conn, _event_frame(seq, event))

    def _read_allowed(self, conn: Conn, req_id: Any) -> bool:
        """Reads have their own per-agent budget (`reads_per_minute`)."""
        assert conn.agent is not None
        if self.reads_limit.allow(conn.agent):
            return True
        wait = self.reads_limit.retry_after(conn.agent)
        self._reject(
            conn,
            req_id,
            Rejection.rate_limited(f"over {self.cfg.limits.reads_per_minute} reads per minute; retry in {wait:.0f} s"),
        )
        return False

    def _read(self, conn: Conn, req_id: Any, op: str, args: Any) -> None:
        assert conn.agent is not None
        with self.rt.store.read() as view:
            result = run_read(view, op, conn.agent, args, self.rt.clock(), self.last_seen)
        if isinstance(result, Rejection):
            self._reject(conn, req_id, result)
        else:
            self.metrics.reads += 1
            self._send(conn, wire.encode_ok(req_id, wire.encode(result)))

    def _act(self, conn: Conn, req_id: Any, op: str, key: str, args: Any) -> None:
        # WIRE.md: agent.register is scoped (no agent, op, key) across all connections.
        caller = None if op == "agent.register" else conn.agent
        scope = receipt_scope(caller, op, key)
        req_hash = wire.canonical_hash(op, args)
        command = to_command(op, args)
        limiter_key = caller if caller is not None else _peer_key(conn.ws)
        if not self.actions_limit.allow(limiter_key):
            # Replays are exempt from the limit (L4-5): answer one from its receipt.
            if self._replay(conn, req_id, scope, req_hash, op, caller):
                return
            wait = self.actions_limit.retry_after(limiter_key)
            self._reject(
                conn,
                req_id,
                Rejection.rate_limited(
                    f"over {self.cfg.limits.actions_per_minute} actions per minute; retry in {wait:.0f} s"
                ),
                op,
                caller,
            )
            return
        if op == "agent.register" and not self.registrations.allow(_ALL):
            self.actions_limit.refund(limiter_key)  # answered here: no action taken
            if self._replay(conn, req_id, scope, req_hash, op, caller):
                return
            wait = self.registrations.retry_after(_ALL)
            self._reject(
                conn,
                req_id,
                Rejection.rate_limited(f"too many registrations on this daemon; retry in {wait:.0f} s"),
                op,
                caller,
            )
            return
        joiner: tuple[str, float, float] | None = None
        if op == "thread.join" and caller is not None:
            # §12 R12-7: after too many failed joins every join waits, valid token or not.
            if self.failed_joins.full(caller) or self.failed_joins_all.full(_ALL):
                self.actions_limit.refund(limiter_key)  # answered here: no action taken
                if self._replay(conn, req_id, scope, req_hash, op, caller):
                    return
                if self.failed_joins.full(caller):
                    wait = self.failed_joins.retry_after(caller)
                    reason = f"too many failed joins; retry in {wait:.0f} s"
                else:
                    wait = self.failed_joins_all.retry_after(_ALL)
                    reason = f"too many failed joins on this daemon; retry in {wait:.0f} s"
                self._reject(conn, req_id, Rejection.rate_limited(reason), op, caller)
                return
        if op in ROUTE_READS:
            with self.rt.store.read() as view:
                if op == "thread.join":
                    thread = view.thread_for_token(thread_token_hash(command.token))
                    command = msgspec.structs.replace(command, thread=thread)
                actor_key = ACTIONS[op].route(command, caller, view)
        else:
            # A replay is found by the owning actor, which reads the receipt
            # before anything else (L3-2); the event loop reads nothing here.
            actor_key = ACTIONS[op].route(command, caller, None)  # type: ignore[arg-type]
        if op == "thread.join" and caller is not None:
            # Counted as a failure when it arrives, refunded in _finish unless
            # it failed: joins in flight cannot outrun the budget (pipelining).
            joiner = (caller, self.failed_joins.hit(caller), self.failed_joins_all.hit(_ALL))
        conn.in_flight += 1
        started = time.perf_counter()

        def reply(outcome: Outcome) -> None:  # any thread
            self._reply_soon((conn, req_id, op, started, outcome, joiner, limiter_key, caller))

        job = Job(op, caller, scope, req_hash, command, reply)
        # Jobs of one loop turn go to their actors together: one wake-up per
        # actor instead of one per job.
        waiting = self._outgoing.get(actor_key)
        if waiting is not None:
            waiting.append(job)
            return
        self._outgoing[actor_key] = [job]
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush_jobs)

    def _flush_jobs(self) -> None:
        self._flush_scheduled = False
        outgoing, self._outgoing = self._outgoing, {}
        for actor_key, jobs in outgoing.items():
            self.rt.submit_many(jobs, actor_key)

    def _replay(
        self, conn: Conn, req_id: Any, scope: bytes | None, req_hash: bytes, op: str, caller: str | None
    ) -> bool:
        """Answer a request whose receipt exists (its replay, or a mismatch);
        False when there is none."""
        if scope is None:
            return False
        with self.rt.store.read() as view:
            rec = view.receipt(scope)
        if rec is None:
            return False
        if rec.req_hash == req_hash:
            self.metrics.replays += 1
            self._audit(caller, op, replayed=True, result=rec.result)
            self._send(conn, wire.encode_ok(req_id, rec.result, replayed=True))
        else:
            self._reject(conn, req_id, mismatch(), op, caller)
        return True

    def _reply_soon(self, item: tuple) -> None:
        """Queue a finished action for the event loop. Replies arriving together
        (a group commit answers many at once) wake the loop once."""
        with self._replies_lock:
            self._replies.append(item)
            if self._replies_scheduled:
                return
            self._replies_scheduled = True
        assert self.loop is not None
        self.loop.call_soon_threadsafe(self._drain_replies)

    def _drain_replies(self) -> None:
        with self._replies_lock:
            items, self._replies = self._replies, []
            self._replies_scheduled = False
        for item in items:
            try:
                self._finish(*item)
            except Exception:  # one connection's failure never costs another its reply
                log.exception("delivering a reply failed")

    def _finish(
        self,
        conn: Conn,
        req_id: Any,
        op: str,
        started: float,
        outcome: Outcome,
        joiner: tuple[str, float, float] | None = None,
        limiter_key: str | None = None,
        caller: str | None = None,
    ) -> None:
        conn.in_flight -= 1
        if not isinstance(outcome, Replayed):  # the histogram is of actions decided
            self.metrics.latency((time.perf_counter() - started) * 1000)
        if joiner is not None and not (isinstance(outcome, Failed) and outcome.rejection.code in _FAILED_JOIN):
            agent, at, at_all = joiner  # not a failed join after all: give its count back
            self.failed_joins.refund(agent, at)
            self.failed_joins_all.refund(_ALL, at_all)
        if isinstance(outcome, Committed):
            self.metrics.action(op)
            self._audit(caller, op, result=outcome.result)
            self._send(conn, wire.encode_ok(req_id, outcome.result))
            if op in _KEY_CHANGES:
                self._drop_old_key(outcome.result)
        elif isinstance(outcome, Replayed):
            self.metrics.replays += 1
            # Replays do not count against the action limit (L4-5).
            if limiter_key is not None:
                self.actions_limit.refund(limiter_key)
            if op == "agent.register":
                self.registrations.refund(_ALL)
            self._audit(caller, op, replayed=True, result=outcome.result)
            self._send(conn, wire.encode_ok(req_id, outcome.result, replayed=True))
        elif isinstance(outcome, Failed):
            self._reject(conn, req_id, outcome.rejection, op, caller)
        else:
            self._reject(conn, req_id, Rejection("internal", "unexpected outcome; nothing was written", "retry"), op, caller)

    def _drop_old_key(self, result: bytes) -> None:
        """WIRE.md "Operating a deployment": after a rotation or reset, every
        connection that authenticated with an old key of the agent stops acting
        as it at once and is closed with 4001 once its queued replies (the new
        key, for the connection that rotated) are sent."""
        agent = msgspec.json.decode(result).get("agent")
        with self.rt.store.read() as view:
            state = view.state(agent) if isinstance(agent, str) else None
        if state is None:
            return
        for conn in list(self.connections):
            if conn.agent == agent and conn.key_hash != state.key_hash:
                self._unsubscribe(conn)
                conn.agent = conn.key_hash = None
                asyncio.ensure_future(self._close_revoked(conn))

    async def _close_revoked(self, conn: Conn) -> None:
        await self._flush(conn, asyncio.get_running_loop().time() + 1.0)
        await self._close(conn, CLOSE_KEY_REVOKED, "this agent key was rotated or reset; connect with the new key")


