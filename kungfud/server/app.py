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
import logging
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
from .dispatch import run_read, to_command
from .limits import SlidingWindow
from .metrics import Metrics

__all__ = ["Server"]

log = logging.getLogger("kungfud.server")

_HELLO_HINT = Hint("hello", {"key": "<your agent key>"})
OUTBOX_HIGH = 8 * 1024 * 1024  # stop reading a connection's frames above this backlog …
OUTBOX_LOW = 2 * 1024 * 1024  # … until it drains below this
TURN_BUDGET_S = 0.002  # one connection's frames hold the loop this long before others get a turn
_FAILED_JOIN = frozenset({"not_found", "forbidden", "conflict"})
_ALL = "*"  # the key of the daemon-wide failed-join window


def _event_frame(seq: int, event: bytes) -> bytes:
    # Stored events are `{"event":…,"data":…}`; the frame adds the seq.
    return b'{"seq":%d,' % seq + event[1:]


class Conn:
    """Per-connection state, touched only on the event loop."""

    __slots__ = ("ws", "agent", "in_flight", "outbox", "closed", "floor", "pending_bytes", "writable", "sending")

    def __init__(self, ws: ServerConnection, agent: str | None):
        self.ws = ws
        self.agent = agent
        self.in_flight = 0
        self.outbox: asyncio.Queue[bytes] = asyncio.Queue()
        self.closed = False
        self.floor: int | None = None  # subscribed: live events must have seq > floor
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
        self._server: Any = None
        self.subscribers: dict[str, set[Conn]] = {}
        self.metrics = Metrics()
        self._replies: list[tuple] = []
        self._replies_lock = threading.Lock()
        self._replies_scheduled = False
        self._outgoing: dict[str, list[Job]] = {}  # jobs of this loop turn, by actor
        self._flush_scheduled = False
        self.max_pending_events = max_pending_events

    # --- lifecycle ---------------------------------------------------------

    async def start(self) -> tuple[str, int]:
        self.loop = asyncio.get_running_loop()
        loop = self.loop
        self.rt.event_sink = lambda events: loop.call_soon_threadsafe(self._publish, events)
        host, port = self.cfg.listen_addr()
        self._server = await serve(
            self._handler,
            host,
            port,
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

    async def stop(self, grace_s: float = 10.0) -> None:
        """Stop accepting, let in-flight requests finish (bounded), close."""
        # Close only the listening sockets first: websockets' own close() runs
        # once, so it is kept for the final close of every connection.
        self._server.server.close()
        deadline = time.monotonic() + grace_s
        while any(c.in_flight for c in self.connections) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        for c in list(self.connections):
            await self._flush(c, 1.0)
        self._server.close(close_connections=True)
        await self._server.wait_closed()

    async def _flush(self, conn: Conn, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not conn.outbox.empty() and not conn.closed and time.monotonic() < deadline:
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
        return None

    def _agent_for_key(self, key: str) -> str | None:
        if not key or len(key) > 256:
            return None
        with self.rt.store.read() as view:
            return view.agent_for_key_hash(key_hash(key))

    # --- connection ----------------------------------------------------------

    async def _handler(self, ws: ServerConnection) -> None:
        conn = Conn(ws, getattr(ws, "kungfu_agent", None))
        self.connections.add(conn)
        sender = asyncio.create_task(self._sender(conn))
        try:
            turn_started = time.perf_counter()
            async for message in ws:
                if isinstance(message, bytes):
                    await ws.close(1003, "binary frames are not accepted; send JSON text frames")
                    break
                self._on_frame(conn, message)
                if conn.pending_bytes > OUTBOX_HIGH:
                    await conn.writable.wait()  # backpressure: read nothing more until it reads
                elif time.perf_counter() - turn_started > TURN_BUDGET_S:
                    # Frames already received come without a pause: give other
                    # connections the loop between them, not after the whole batch.
                    await asyncio.sleep(0)
                    turn_started = time.perf_counter()
        except ConnectionClosed:
            pass
        finally:
            conn.closed = True
            conn.writable.set()
            self.connections.discard(conn)
            self._unsubscribe(conn)
            sender.cancel()

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
            conn.closed = True
            conn.writable.set()
            ws.transport.abort()
        except (ConnectionClosed, asyncio.CancelledError):
            pass

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
                conn.closed = True
                conn.writable.set()
            return
        conn.pending_bytes += len(data)
        if conn.pending_bytes > OUTBOX_HIGH:
            conn.writable.clear()
        conn.outbox.put_nowait(data)

    def _reject(self, conn: Conn, req_id: Any, rejection: Rejection) -> None:
        self.metrics.rejected(rejection.code)
        self._send(conn, wire.encode_error(req_id, rejection))

    # --- frames ------------------------------------------------------------------

    def _on_frame(self, conn: Conn, text: str) -> None:
        try:
            env = wire.decode_envelope(text)
        except wire.FrameError as e:
            self._reject(conn, e.req_id, Rejection.bad_request(e.reason))
            return
        req_id = env.id
        if conn.in_flight >= self.cfg.server.max_in_flight:
            self._reject(
                conn,
                req_id,
                Rejection.rate_limited(
                    f"this connection already has {conn.in_flight} requests in flight; "
                    "wait for replies before sending more"
                ),
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
            )
            return
        try:
            args = wire.decode_args(env)
            if op == "hello":
                self._hello(conn, req_id, args)
                return
            if op == "subscribe":
                self._subscribe(conn, req_id, args)
                return
            if spec.kind == "R":
                self._read(conn, req_id, op, args)
            else:
                self._act(conn, req_id, op, env.key, args)
        except wire.FrameError as e:
            self._reject(conn, req_id, Rejection.bad_request(e.reason))
        except Exception:
            log.exception("request %r failed", req_id)
            self._reject(conn, req_id, Rejection("internal", "the daemon failed on this request; nothing was written", "retry"))

    def _hello(self, conn: Conn, req_id: Any, args: wire.HelloArgs) -> None:
        agent = self._agent_for_key(args.key)
        if agent is None:
            self._reject(conn, req_id, Rejection("unauthenticated", "unknown agent key", "stop"))
            return
        conn.agent = agent
        with self.rt.store.read() as view:
            state = view.state(agent)
        self._send(conn, wire.encode_ok(req_id, wire.encode({"agent": agent, "status": state.status})))

    # --- notifications (WIRE.md "Event"; never needed for correctness, R8-21) ----

    def _subscribe(self, conn: Conn, req_id: Any, args: wire.SubscribeArgs) -> None:
        """Reply with the newest seq, replay the caller's events after ``since``
        from the durable feed, then stream live ones — in order, no gap, no
        duplicate: live events at or below the replayed seq are dropped."""
        assert conn.agent is not None
        with self.rt.store.read() as view:
            newest = view.last_seq()
            replay = list(view.events_for(conn.agent, args.since)) if args.since is not None else []
        self._unsubscribe(conn)  # only once the new subscription is sure to start
        self._send(conn, wire.encode_ok(req_id, wire.encode({"subscribed": True, "seq": newest})))
        for seq, event in replay:
            if seq <= newest:
                self._send(conn, _event_frame(seq, event))
        conn.floor = newest
        self.subscribers.setdefault(conn.agent, set()).add(conn)

    def _unsubscribe(self, conn: Conn) -> None:
        if conn.floor is not None and conn.agent is not None:
            subs = self.subscribers.get(conn.agent)
            if subs is not None:
                subs.discard(conn)
                if not subs:
                    del self.subscribers[conn.agent]
        conn.floor = None

    def _publish(self, events: list[tuple[str, int, bytes]]) -> None:
        for agent, seq, event in events:
            for conn in list(self.subscribers.get(agent, ())):
                if conn.floor is None or seq <= conn.floor or conn.closed:
                    continue
                if conn.outbox.qsize() >= self.max_pending_events:
                    # A slow subscriber never slows anyone else: drop it with a
                    # reason; it recovers with `subscribe {since}` or `turn`.
                    self._unsubscribe(conn)
                    conn.closed = True
                    self.metrics.slow_subscribers_dropped += 1
                    asyncio.ensure_future(
                        conn.ws.close(1008, "subscriber fell behind; reconnect and subscribe with since, or read turn")
                    )
                    continue
                self.metrics.events_sent += 1
                self._send(conn, _event_frame(seq, event))

    def _read(self, conn: Conn, req_id: Any, op: str, args: Any) -> None:
        assert conn.agent is not None
        with self.rt.store.read() as view:
            result = run_read(view, op, conn.agent, args, self.rt.clock())
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
        limiter_key = caller if caller is not None else f"conn:{id(conn)}"
        if not self.actions_limit.allow(limiter_key):
            # Replays are exempt from the limit (L4-5): answer one from its receipt.
            if self._replay(conn, req_id, scope, req_hash):
                return
            wait = self.actions_limit.retry_after(limiter_key)
            self._reject(
                conn,
                req_id,
                Rejection.rate_limited(
                    f"over {self.cfg.limits.actions_per_minute} actions per minute; retry in {wait:.0f} s"
                ),
            )
            return
        if op == "thread.join" and caller is not None:
            # §12 R12-7: after too many failed joins every join waits, valid token or not.
            if self.failed_joins.full(caller) or self.failed_joins_all.full(_ALL):
                self.actions_limit.refund(limiter_key)  # answered here: no action taken
                if self._replay(conn, req_id, scope, req_hash):
                    return
                if self.failed_joins.full(caller):
                    wait = self.failed_joins.retry_after(caller)
                    reason = f"too many failed joins; retry in {wait:.0f} s"
                else:
                    wait = self.failed_joins_all.retry_after(_ALL)
                    reason = f"too many failed joins on this daemon; retry in {wait:.0f} s"
                self._reject(conn, req_id, Rejection.rate_limited(reason))
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
        conn.in_flight += 1
        joiner = caller if op == "thread.join" and caller is not None else None
        started = time.perf_counter()

        def reply(outcome: Outcome) -> None:  # any thread
            self._reply_soon((conn, req_id, op, started, outcome, joiner, limiter_key))

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

    def _replay(self, conn: Conn, req_id: Any, scope: bytes | None, req_hash: bytes) -> bool:
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
            self._send(conn, wire.encode_ok(req_id, rec.result, replayed=True))
        else:
            self._reject(conn, req_id, mismatch())
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
        joiner: str | None = None,
        limiter_key: str | None = None,
    ) -> None:
        conn.in_flight -= 1
        if not isinstance(outcome, Replayed):  # the histogram is of actions decided
            self.metrics.latency((time.perf_counter() - started) * 1000)
        if joiner is not None and isinstance(outcome, Failed) and outcome.rejection.code in _FAILED_JOIN:
            self.failed_joins.hit(joiner)
            self.failed_joins_all.hit(_ALL)
        if isinstance(outcome, Committed):
            self.metrics.action(op)
            self._send(conn, wire.encode_ok(req_id, outcome.result))
        elif isinstance(outcome, Replayed):
            self.metrics.replays += 1
            # Replays do not count against the action limit (L4-5).
            if limiter_key is not None:
                self.actions_limit.refund(limiter_key)
            self._send(conn, wire.encode_ok(req_id, outcome.result, replayed=True))
        elif isinstance(outcome, Failed):
            self._reject(conn, req_id, outcome.rejection)
        else:
            self._reject(conn, req_id, Rejection("internal", "unexpected outcome; nothing was written", "retry"))


