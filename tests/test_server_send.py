"""The event loop's reply path survives a socket that vanishes mid-write (uvloop
raises on a closed transport): the connection is marked closed and every other
reply of the same commit is still delivered (R12-11: no crash, nothing lost for
the others)."""

from __future__ import annotations

import pytest
from websockets.protocol import State

from kungfud.server.bridge import Bridge
from kungfud.server.connection import Conn


class _Protocol:
    state = State.OPEN

    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def send_text(self, data: bytes) -> None:
        self.sent.append(data)


class _WS:
    def __init__(self, broken: bool) -> None:
        self.protocol = _Protocol()
        self.paused = False
        self.broken = broken

    def send_data(self) -> None:
        if self.broken:
            raise RuntimeError("unable to perform operation on <TCPTransport closed=True>")


@pytest.mark.rules("R12-11")
async def test_R12_11_a_write_to_a_vanished_socket_closes_that_connection_only():
    bad, good = Conn(_WS(broken=True), "ag_a"), Conn(_WS(broken=False), "ag_b")  # type: ignore[arg-type]
    bad.send(b'{"id":1}')
    good.send(b'{"id":2}')
    assert bad.closed and not good.closed
    assert good.ws.protocol.sent == [b'{"id":2}']
    bad.send(b'{"id":3}')  # later frames for it are dropped quietly
    assert bad.ws.protocol.sent == [b'{"id":1}']


@pytest.mark.rules("R12-11")
async def test_R12_11_one_failing_reply_does_not_cost_the_others_theirs():
    delivered = []

    def finish(conn, req_id, *rest):
        if req_id == "boom":
            raise RuntimeError("a bug delivering one reply")
        delivered.append(req_id)

    bridge = Bridge(runtime=None, finish=finish)  # type: ignore[arg-type]
    bridge._replies = [(None, "a"), (None, "boom"), (None, "c")]
    bridge._replies_scheduled = True
    bridge._drain_replies()
    assert delivered == ["a", "c"] and bridge._replies == [] and not bridge._replies_scheduled


# --- FrameConnection: which received frames take the direct path ----------------

def _frame_connection(queued: int = 0):
    """A FrameConnection as the server has it once open: its handler's
    callback set, websockets' queue of received frames with ``queued`` in it."""
    import time

    from websockets.asyncio.messages import Assembler
    from websockets.frames import Frame, Opcode

    from kungfud.server.connection import FrameConnection

    ws = FrameConnection.__new__(FrameConnection)  # no socket: only the path decision is under test
    ws.request = object()  # the handshake is over: events are frames
    ws.recv_messages = Assembler()
    for _ in range(queued):
        ws.recv_messages.put(Frame(Opcode.TEXT, b"earlier"))
    direct: list[str] = []
    ws.on_text = direct.append
    ws._turn_started = time.perf_counter()
    return ws, direct


@pytest.mark.rules("R12-11")
@pytest.mark.parametrize(
    "case",
    ["whole small text", "frames still queued", "over 64 KiB", "fragment", "binary", "invalid UTF-8", "turn spent", "path off"],
)
async def test_R12_11_only_a_whole_small_text_frame_with_nothing_queued_takes_the_direct_path(case):
    """The direct path must never reorder a connection's frames (a frame
    before a hello would be answered as the agent after it), never hold the
    loop past a turn, and leave websockets whatever it must judge itself
    (fragments, binary frames, invalid UTF-8: its close codes)."""
    from websockets.frames import Frame, Opcode

    ws, direct = _frame_connection(queued=1 if case == "frames still queued" else 0)
    frame = Frame(Opcode.TEXT, b'{"id":1}')
    if case == "over 64 KiB":
        frame = Frame(Opcode.TEXT, b'"' + b"x" * 70_000 + b'"')
    elif case == "fragment":
        frame = Frame(Opcode.TEXT, b'{"id":', fin=False)
    elif case == "binary":
        frame = Frame(Opcode.BINARY, b'{"id":1}')
    elif case == "invalid UTF-8":
        frame = Frame(Opcode.TEXT, b"\xff\xfe")
    elif case == "turn spent":
        ws._turn_started -= 1.0
    elif case == "path off":
        ws.on_text = None
    before = len(ws.recv_messages.frames.queue)
    ws.process_event(frame)
    if case == "whole small text":
        assert direct == ['{"id":1}'] and len(ws.recv_messages.frames.queue) == before
    else:
        assert direct == [] and len(ws.recv_messages.frames.queue) == before + 1, case
