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
