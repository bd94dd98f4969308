"""Websocket server: the protocol front door. One connection task per client,
requests pipelined; this module decides only transport and admission questions.

Frame rules (WIRE.md "Transport", "Frames"): text frames only (binary → close
1003); over ``max_frame_bytes`` → close 1009 (websockets' ``max_size``); any other
bad frame → ``bad_request`` and the connection stays open.

The parts: :mod:`.connection` (a client's outbox, backpressure and sends),
:mod:`.feed` (subscriptions and events), :mod:`.limits` (admission policy,
:class:`~.limits.Intake`), :mod:`.bridge` (the crossings to and from the actor
threads), :mod:`.upgrade` (the HTTP request before the websocket upgrade),
:mod:`.revocation` (closing the connections of a rotated or reset key),
:mod:`.actions` (an admitted action's way to its actor and its answer). Below
the server everything goes through :class:`kungfud.actors.Runtime`: ``act`` for
actions (here as its two steps, ``job`` and ``route``, with admission between),
``read`` for reads, ``authenticate`` for keys.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import socket
import time
from typing import Any, Callable

from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from .. import tracing, wire
from ..actors import KEY_REVOKED, Runtime
from ..config import Config
from ..errors import Hint, Rejection, StoreUnavailable
from . import audit
from .bridge import Bridge
from .calls import Caller
from .connection import TURN_BUDGET_S, Conn, FrameConnection
from .door import Unauthenticated, hello_deadline
from .actions import ActionPath
from .feed import Feed
from .limits import Intake, TokenBucket
from .metrics import Metrics
from .revocation import Revocation
from .seen import LastSeen
from .upgrade import process_request
from ..actors.hooks import split_registrations
from .bridge import NO_SINK, Sink

__all__ = ["Server", "Conn"]

log = logging.getLogger("kungfud.server")

_HELLO_HINT = Hint("hello", {"key": "<your agent key>"})
STOP_WITHIN_S = 8.0  # Server.stop() ends within this, whatever clients do (SIGTERM exits 0 promptly)


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


class Server(ActionPath):
    def __init__(
        self, runtime: Runtime, config: Config, *, send_timeout_s: float = 30.0, max_pending_events: int = 1000,
        sink: Sink = NO_SINK, prechecks: dict[str, Any] | None = None,  # both given by kungfud/daemon.py
    ):
        self.rt = runtime
        self.cfg = config
        self.send_timeout_s = send_timeout_s
        self.loop: asyncio.AbstractEventLoop | None = None
        self.connections: set[Conn] = set()
        self.intake = Intake(config.limits, time.monotonic)
        # D231: connections not authenticated yet have a budget of their own,
        # at most half the connection cap, so keyed upgrades always find room.
        self.unauthenticated = Unauthenticated(
            min(config.server.max_unauthenticated, max(1, config.server.max_connections // 2)),
            config.server.max_unauthenticated_per_address,
        )
        self.listen_host = config.listen_addr()[0]  # a loopback daemon checks Host (door.foreign)
        self.reads_limit = TokenBucket(config.limits.reads_per_minute, 60.0, time.monotonic)
        self._server: Any = None
        self._private: Any = None  # a worker's own port (tests only)
        self.metrics = Metrics()
        self.feed = Feed(runtime, self.metrics, max_pending_events)
        self.subscribers = self.feed.subscribers  # agent -> its subscribed connections (metrics read it)
        self.bridge = Bridge(runtime, self._finish)
        self.revocation = Revocation(runtime, self.connections, self.feed)
        self.sink = sink  # committed events' other destination: the webhook runner
        self.prechecks = prechecks or {}  # the catalogue's precheck names -> async checks of the args
        # When this deployment last saw each agent (ms): in memory only, not a
        # fact; shared with the other nodes when there are any (D32, D175).
        self.last_seen = LastSeen()
        # Set when a connection's in-flight count drops to zero or a connection
        # with requests in flight goes: stop() waits on it instead of polling.
        self._settled = asyncio.Event()
        self._prechecking = asyncio.Semaphore(4)  # pre-checks at once: webhook.set's host lookups (D216)
        # Told the agents with new events (None: maybe anyone), as the feed is: A2A streams (kungfud/a2a).
        self.on_events: list[Callable[[list[str] | None], None]] = []

    # --- lifecycle ---------------------------------------------------------

    async def start(self, sock: socket.socket | None = None, private: socket.socket | None = None) -> tuple[str, int]:
        """Serve on ``sock`` (already bound) or bind the configured address;
        also on ``private`` (a worker's own port, tests only: kungfud.supervisor)."""
        self.loop = asyncio.get_running_loop()
        if self.rt.shared:
            self.last_seen.start_sharing(self.rt.share_seen, self.loop.call_later, self.loop.time)
        self.bridge.start(self.loop, self._published, self._woken, self.last_seen.merge, self.sink.changed)
        self.sink.start()
        self.revocation.start(self.loop)  # scoped keys that expire (WIRE.md 1.3)
        host, port = (None, None) if sock is not None else self.cfg.listen_addr()
        self._server = await self._listen(host, port, sock)
        if private is not None:
            self._private = await self._listen(None, None, private)
        sock = next(iter(self._server.sockets))
        addr = sock.getsockname()
        return addr[0], addr[1]

    async def _listen(self, host: str | None, port: int | None, sock: socket.socket | None) -> Any:
        return await serve(
            self._handler,
            host,
            port,
            sock=sock,
            process_request=functools.partial(process_request, self),
            max_size=self.cfg.server.max_frame_bytes,
            compression=None,  # DESIGN.md: faster, less memory per connection
            open_timeout=10,
            close_timeout=5,
            ping_interval=20,
            ping_timeout=20,
            server_header="kungfud",
            create_connection=FrameConnection,
        )

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
        if self._private is not None:
            self._private.server.close()
        # In-flight actions get most of the budget; their replies, a flush of
        # every outbox, and the close handshakes share the rest.
        answer_by = deadline - min(3.0, grace_s / 2)
        while any(c.in_flight for c in self.connections):
            left = answer_by - loop.time()
            if left <= 0:
                break
            # Cleared after the check with no await between (one loop): a reply
            # that lands from here on sets it, so none is missed.
            self._settled.clear()
            try:
                await asyncio.wait_for(self._settled.wait(), left)
            except asyncio.TimeoutError:
                break
        flush_by = min(deadline - min(2.0, grace_s / 4), loop.time() + 1.0)
        await asyncio.gather(*(c.flush(flush_by) for c in list(self.connections)))
        for c in list(self.connections):
            if not c.closed and c.stalled:
                # It does not read: no close handshake can get through to it.
                c.drop()
                c.abort()
        if self._private is not None:
            self._private.close(close_connections=True)  # its connections are in self.connections too
        self._server.close(close_connections=True)
        try:
            await asyncio.wait_for(self._server.wait_closed(), max(0.0, deadline - loop.time()))
        except asyncio.TimeoutError:
            left = [c for c in self.connections]
            log.warning("stopping: aborting %d connection(s) that did not close in time", len(left))
            for c in left:
                c.drop()
            for ws in list(self._server.connections):
                ws.transport.abort()
            try:
                await asyncio.wait_for(self._server.wait_closed(), 1.0)
            except asyncio.TimeoutError:
                log.warning("stopping: connection handlers still running; exiting anyway")
        self.last_seen.flush()  # what this node saw, to the others before it goes
        await self.sink.stop()

    # --- connection ----------------------------------------------------------

    async def _handler(self, ws: ServerConnection) -> None:
        conn = Conn(
            ws, getattr(ws, "kungfu_agent", None), getattr(ws, "kungfu_key_hash", None),
            send_timeout_s=self.send_timeout_s, on_drop=self.feed.unsubscribe,
        )
        self.connections.add(conn)
        deadline = None
        if conn.agent is not None:
            self.last_seen.saw(conn.agent, _wall_ms())
        else:
            conn.slot = getattr(ws, "kungfu_slot", None)
            deadline = hello_deadline(conn, self.cfg.server.hello_within_s)
        sender = asyncio.create_task(conn.run_sender())
        # Most frames reach _on_frame from the connection's data_received
        # (FrameConnection's direct path); the loop below takes the rest, in
        # order, from websockets' queue.
        direct = functools.partial(self._direct_frame, conn, ws)
        ws.on_text = direct
        try:
            turn_started = time.perf_counter()
            async for message in ws:
                if conn.backlogged:  # came while the client was not reading its replies
                    await conn.until_closed(conn.writable.wait())
                    if conn.closed:
                        break
                if isinstance(message, bytes):
                    await conn.close(1003, "binary frames are not accepted; send JSON text frames")
                    break
                self._on_frame(conn, message)
                if conn.backlogged:
                    # Backpressure: read nothing more until it reads — or until
                    # the connection is gone (every wait here ends on close).
                    await conn.until_closed(conn.writable.wait())
                    if conn.closed:
                        break
                elif time.perf_counter() - turn_started > TURN_BUDGET_S:
                    # Frames already received come without a pause: give other
                    # connections the loop between them, not after the whole batch.
                    await asyncio.sleep(0)
                    turn_started = time.perf_counter()
                ws.on_text = direct  # caught up: the direct path again
        except ConnectionClosed:
            pass
        finally:
            ws.on_text = None
            if deadline is not None:
                deadline.cancel()
            if conn.slot is not None:
                conn.slot.free()
            conn.drop()
            self.connections.discard(conn)
            if conn.in_flight:
                self._settled.set()  # its requests no longer hold stop() back
            sender.cancel()

    def call(self, agent: str, key_hash: bytes | None, frame: str | bytes, peer: str = "") -> "asyncio.Future[bytes]":
        """Run one request frame as ``agent`` through the front door a websocket
        frame takes (``_on_frame``); resolves to the reply frame. The A2A
        endpoint's way in (kungfud/a2a, server/calls.py)."""
        caller = Caller(agent, key_hash, peer)
        self._on_frame(caller, frame)  # type: ignore[arg-type]  # Conn-shaped
        return caller.reply

    # --- frames: the protocol front door -------------------------------------------

    def _direct_frame(self, conn: Conn, ws: FrameConnection, text: str) -> None:
        """A frame on FrameConnection's direct path. A client behind on its
        replies turns the path off: its next frames wait in websockets' queue
        for the handler, which waits for the client first."""
        self._on_frame(conn, text)
        if conn.backlogged:
            ws.on_text = None

    def _on_frame(self, conn: Conn, text: str) -> None:
        try:
            env = wire.decode_envelope(text)
        except wire.FrameError as e:
            self._reject(conn, e.req_id, Rejection.bad_request(e.reason))
            return
        if tracing.on:  # one span per request (kungfud/tracing.py)
            return tracing.request(self._request, conn, env)
        self._request(conn, env)

    def _request(self, conn: Conn, env: wire.Envelope) -> None:
        req_id, op = env.id, env.op
        if conn.agent is not None:
            self.last_seen.saw(conn.agent, now_ms := _wall_ms())
            if (key_id := self.rt.key_ids.get(conn.key_hash)) is not None:  # a scoped key's last use (WIRE.md 1.3)
                self.last_seen.saw(key_id, now_ms)
        if conn.in_flight >= self.cfg.server.max_in_flight:
            why = f"this connection already has {conn.in_flight} requests in flight; wait for replies before sending more"
            self._reject(conn, req_id, Rejection.rate_limited(why), op)
            return
        spec = wire.OPS[op]
        if conn.agent is None and not spec.open:
            # Before authentication nothing but the envelope is read (H2).
            unauthenticated = Rejection("unauthenticated", f"authenticate with hello before {op}", "revise", _HELLO_HINT)
            self._reject(conn, req_id, unauthenticated, op)
            return
        try:
            args = wire.decode_args(env)
            if op == "hello":
                self._hello(conn, req_id, args)
            elif spec.kind == "A":
                self._act(conn, req_id, op, env.key, args)
            elif self._read_allowed(conn, req_id):
                if op != "subscribe":
                    self._read(conn, req_id, op, args)
                elif (revoked := self.rt.key_check(conn.agent, conn.key_hash)) is not None:  # D185
                    self._reject(conn, req_id, revoked)
                else:
                    self.feed.subscribe(conn, req_id, args)
        except wire.FrameError as e:
            # D375: an op the key's scope never allows is `forbidden` whatever its args
            # (WIRE.md 1.3 "Anything else is forbidden"), not a `bad_request` to revise in vain.
            scoped = op != "hello" and conn.key_hash is not None
            refused = self.rt.key_check(conn.agent, conn.key_hash, op, spec.kind) if scoped else None
            self._reject(conn, req_id, refused or Rejection.bad_request(e.reason), op)
        except StoreUnavailable as e:  # the store's server is down or restarting: retry, not a bug
            log.warning("request %r: %s", req_id, e)
            self._reject(conn, req_id, e.rejection(), op)
        except Exception:
            log.exception("request %r failed", req_id)
            self._reject(
                conn, req_id, Rejection("internal", "the daemon failed on this request; nothing was written", "retry"), op
            )

    def _hello(self, conn: Conn, req_id: Any, args: wire.HelloArgs) -> None:
        who = self.rt.authenticate(args.key)
        if who is None:
            self._reject(conn, req_id, Rejection("unauthenticated", "unknown agent key", "stop"))
            return
        # A new authentication ends the subscription of whoever the connection
        # was before: events follow only a `subscribe` by the agent it is now.
        self.feed.unsubscribe(conn)
        if conn.slot is not None:  # authenticated: out of the unauthenticated budget (D231)
            conn.slot.free()
            conn.slot = None
        conn.agent = who.agent
        conn.key_hash = who.key_hash
        self.last_seen.saw(who.agent, _wall_ms())
        conn.send(wire.encode_ok(req_id, wire.encode({"agent": who.agent, "status": who.status})))

    # --- reads -------------------------------------------------------------------------

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
        result = self.rt.read(op, conn.agent, args, self.last_seen.map, conn.key_hash)
        if isinstance(result, Rejection):
            self._reject(conn, req_id, result)
        else:
            self.metrics.reads += 1
            conn.send(wire.encode_ok(req_id, wire.encode(result)))

    # --- events -------------------------------------------------------------------------

    def _published(self, events: list[tuple[str, int, bytes]]) -> None:
        """One commit's events, on the event loop: to subscribers and the sink."""
        self.feed.publish(events)
        agents = list({agent: None for agent, _, _ in events})
        self.sink.wake(agents)
        for listener in self.on_events:
            listener(agents)

    def _woken(self, agents: list[str] | None) -> None:
        """Another node committed for ``agents`` (None: maybe anyone): new
        events to deliver, and maybe a key that changed (D156); or wrote the
        webhook registrations it names (``ag_….webhook``, D272)."""
        if agents is not None:
            hooked, agents = split_registrations(agents)
            if hooked:
                self.sink.changed(hooked)
                if not agents:
                    return
        self.feed.wake(agents)
        self.sink.wake(agents)
        self.revocation.recheck(agents)
        for listener in self.on_events:
            listener(agents)

    # --- answers -----------------------------------------------------------------------

    def _reject(
        self, conn: Conn, req_id: Any, rejection: Rejection, op: str | None = None, caller: Any = False
    ) -> None:
        """``op``: the action refused, for the audit log (reads are not logged);
        ``caller``: the agent it was sent as (default: the connection's)."""
        agent = conn.agent if caller is False else caller
        self.metrics.rejected(rejection.code)
        if tracing.current is not None:  # the request span's outcome
            tracing.current.outcome = rejection.code
        if op in wire.ACTION_OPS:
            self._audit(agent, op, code=rejection.code)
        conn.send(wire.encode_error(req_id, rejection))
        if agent is not None and rejection == KEY_REVOKED:  # D185: closed 4001 now, on any node
            self.revocation.drop_stale([agent])

    def _audit(
        self, agent: str | None, op: str, *, code: str | None = None, replayed: bool = False, result: bytes | None = None
    ) -> None:
        if self.cfg.server.audit_log and audit.log.isEnabledFor(logging.INFO):
            audit.record(_wall_ms(), agent, op, code, replayed, result, tracing.current and tracing.current.trace_id)
