"""One client connection: its outbox, backpressure, the sender task, and how a
frame is handed to the socket. Touched only on the event loop.

Replies are queued to a per-connection sender so a client that stops reading
blocks only itself, and is disconnected after ``send_timeout_s``. Above
OUTBOX_HIGH bytes queued the connection stops reading frames until the client
catches up (below OUTBOX_LOW): a client that never reads costs a bounded amount
of memory and is dropped by the send timeout.

This is the ONE module that knows websockets' internals, and why: while the
socket keeps up, :meth:`Conn.send` writes a frame at once through the sans-I/O
protocol object (``ws.protocol.send_text`` + ``ws.send_data()``) instead of
``await ws.send()``, which costs a task switch per frame (measured faster;
docs/performance.md). It does so only when websockets' own asyncio layer has
nothing in hand — the transport is not paused, the protocol is OPEN, and the
sender task holds no frame — and otherwise queues the frame for the sender
task, which uses the public ``ws.send()`` with its flow control and close
handling. A write that fails because the socket went away ends the connection
here. If websockets changes these internals, replacing the fast path by
``self.outbox.put_nowait`` (always queueing) is correct, only slower.

Receiving has the mirror image (:class:`FrameConnection`, D283): a whole
text frame of at most ``DIRECT_MAX`` bytes that arrives while websockets'
queue of received frames is empty is handed to the server at once, in the
``data_received`` callback that parsed it, instead of being queued for the
handler coroutine to wake and take (a queue put, a future, a task step and a
get per frame: ~2-3 µs of the loop's CPU per request). Everything else takes
websockets' own path, in order: binary, fragmented and invalid UTF-8 frames
(websockets judges them), control frames, any frame while earlier ones still
wait in the queue (so none overtakes another), frames past ``TURN_BUDGET_S``
of one ``data_received`` (other connections get the loop between them, as
the handler's yield gives it), larger frames (a client flooding 1 MiB frames
kept on the direct path moved another client's p50 from ~5 to 50-90 ms; on
websockets' queue, which stops reading the socket past its bound, it stays
at ~4 ms), and every frame while the server has the direct path off (a
client behind on its replies). Setting ``on_text`` to None restores
websockets' path entirely.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Callable

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed
from websockets.frames import Opcode
from websockets.protocol import State

from .door import address_key

__all__ = ["Conn", "FrameConnection", "OUTBOX_HIGH", "OUTBOX_LOW", "TURN_BUDGET_S"]

log = logging.getLogger("kungfud.server")

OUTBOX_HIGH = 8 * 1024 * 1024  # stop reading a connection's frames above this backlog …
OUTBOX_LOW = 2 * 1024 * 1024  # … until it drains below this
TURN_BUDGET_S = 0.002  # one connection's frames hold the loop this long before others get a turn
DIRECT_MAX = 64 * 1024  # larger frames take websockets' queue and the handler's turns

_TEXT = Opcode.TEXT


class FrameConnection(ServerConnection):
    """websockets' server connection with the direct path for received text
    frames (module docstring). ``on_text`` is set by the server once the
    connection is open; None means websockets' queue for every frame."""

    on_text: Callable[[str], None] | None = None
    _turn_started = 0.0

    def data_received(self, data: bytes) -> None:
        self._turn_started = time.perf_counter()
        super().data_received(data)

    def process_event(self, event: Any) -> None:
        on_text = self.on_text
        if (
            on_text is not None
            and event.opcode is _TEXT
            and event.fin
            and len(event.data) <= DIRECT_MAX
            and not len(self.recv_messages.frames)  # nothing received before it still waits
            and time.perf_counter() - self._turn_started < TURN_BUDGET_S
        ):
            try:
                text = event.data.decode()
            except UnicodeDecodeError:
                pass  # websockets' own path closes the connection (1007)
            else:
                try:
                    on_text(text)
                except Exception:  # never into the transport's callback
                    log.exception("a frame failed on the direct path")
                return
        super().process_event(event)


def _nothing(conn: "Conn") -> None:
    pass


class Conn:
    """Per-connection state, touched only on the event loop. ``on_drop`` runs
    once the connection is gone or being dropped (the server ends its
    subscription there)."""

    __slots__ = (
        "ws", "agent", "key_hash", "in_flight", "outbox", "closed", "floor", "subscribed", "open_tasks", "a2a", "replay", "pending_bytes",
        "writable", "sending", "send_timeout_s", "on_drop", "slot", "hello_by",
    )

    def __init__(
        self,
        ws: ServerConnection,
        agent: str | None,
        key_hash: bytes | None = None,
        *,
        send_timeout_s: float = 30.0,
        on_drop: Callable[["Conn"], None] = _nothing,
    ):
        self.ws = ws
        self.agent = agent
        self.key_hash = key_hash  # of the key this connection authenticated with
        self.in_flight = 0
        self.outbox: asyncio.Queue[bytes] = asyncio.Queue()
        self.closed = False
        self.floor: int | None = None  # subscribed: live events must have seq > floor
        self.subscribed: str | None = None  # the agent whose subscriber set holds this connection
        self.open_tasks = False  # subscribed with open_tasks: task_offered events too (WIRE.md 1.2)
        self.a2a = False  # subscribed with a2a: a2a_task events too (WIRE.md 1.3)
        self.replay: asyncio.Task | None = None  # a `subscribe {since}` replay still being sent
        # Bytes queued for this client but not yet handed to its socket (see
        # the module docstring: OUTBOX_HIGH / OUTBOX_LOW).
        self.pending_bytes = 0
        self.writable = asyncio.Event()
        self.writable.set()
        self.sending = False  # the sender task holds a frame it has not written yet
        self.send_timeout_s = send_timeout_s
        self.on_drop = on_drop
        self.slot: Any = None  # not authenticated yet: its place in the unauthenticated budget (door.Slot)
        self.hello_by = 0.0  # not authenticated yet: closed at this loop time unless it registers or says hello

    # --- sending ---------------------------------------------------------------

    def send(self, data: bytes) -> None:
        """Hand one frame to the client. While its socket keeps up, the frame is
        written at once (no task switch); otherwise it waits its turn in the
        outbox, which the sender task drains with a send timeout."""
        if self.closed:
            return
        ws = self.ws
        if not self.sending and not ws.paused and self.outbox.empty() and ws.protocol.state is State.OPEN:
            try:
                ws.protocol.send_text(data)
                ws.send_data()
            except Exception:  # the socket went away under us (uvloop raises on a closed transport)
                self.drop()
            return
        self.pending_bytes += len(data)
        if self.pending_bytes > OUTBOX_HIGH:
            self.writable.clear()
        self.outbox.put_nowait(data)

    async def run_sender(self) -> None:
        """The sender task: writes queued frames in order, each within the send
        timeout, and aborts a connection that does not read for that long."""
        ws = self.ws
        try:
            while True:
                data = await self.outbox.get()
                self.sending = True
                await asyncio.wait_for(ws.send(data, text=True), self.send_timeout_s)
                self.sending = False
                self.pending_bytes -= len(data)
                if self.pending_bytes < OUTBOX_LOW:
                    self.writable.set()
        except asyncio.TimeoutError:
            log.info("closing a connection that did not read its replies for %ss", self.send_timeout_s)
            ws.transport.abort()
        except (ConnectionClosed, asyncio.CancelledError):
            pass
        finally:
            # However the sender ends, the connection is over for it: wake the
            # handler (it may wait on backpressure) instead of leaving it stuck.
            self.drop()

    @property
    def backlogged(self) -> bool:
        """Over OUTBOX_HIGH: read no more of its frames until it reads."""
        return self.pending_bytes > OUTBOX_HIGH

    def behind(self, frames: int) -> bool:
        """The client has not read what it was sent: more than OUTBOX_LOW bytes
        or ``frames`` frames are queued."""
        return self.pending_bytes > OUTBOX_LOW or self.outbox.qsize() > frames

    @property
    def stalled(self) -> bool:
        """It does not read: no close handshake can get through to it."""
        return self.sending or self.ws.paused

    # --- ending ----------------------------------------------------------------

    def drop(self) -> None:
        """The connection is gone or being dropped: no more replies are queued
        for it, whatever waits on it wakes, and it stops receiving events. The
        one place a connection's end is recorded."""
        self.closed = True
        self.writable.set()
        self.on_drop(self)
        while not self.outbox.empty():  # free the replies nobody will read
            self.pending_bytes -= len(self.outbox.get_nowait())

    def abort(self) -> None:
        self.ws.transport.abort()

    async def close(self, code: int, reason: str) -> None:
        """Close with a code and reason — within the send timeout even when the
        client reads nothing (the close frame cannot get through): then abort,
        as for any connection that does not read for that long."""
        self.drop()
        try:
            await asyncio.wait_for(self.ws.close(code, reason), self.send_timeout_s)
        except asyncio.TimeoutError:
            self.ws.transport.abort()

    async def until_closed(self, aw: Any) -> None:
        """Await ``aw``, but return as soon as the connection closes."""
        waiter = asyncio.ensure_future(aw)
        closed = asyncio.ensure_future(self.ws.wait_closed())
        try:
            await asyncio.wait((waiter, closed), return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
            closed.cancel()
        if closed.done() and not closed.cancelled():
            self.drop()

    async def flush(self, until: float) -> None:
        """Wait (until loop time ``until`` at most) for the outbox to empty."""
        loop = asyncio.get_running_loop()
        while not self.outbox.empty() and not self.closed and loop.time() < until:
            await asyncio.sleep(0.005)

    def peer_key(self) -> str:
        """What the registration limit counts against when there is no agent:
        the peer's address (:func:`.door.address_key`)."""
        return address_key(self.ws.remote_address)
