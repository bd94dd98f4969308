"""One request run as an agent that is not on a websocket: the A2A endpoint's
way in (kungfud/a2a). :meth:`Server.call` hands the request frame to the same
front door a websocket frame takes (``_on_frame``: envelope, args, in-flight
and rate limits, ``Intake`` admission, receipts, actors, writer, audit), with
a :class:`Caller` standing in for the connection; the reply frame resolves the
future. Nothing else differs from a ``/v1`` request, so an A2A client can do
nothing a ``/v1`` client could not.
"""

from __future__ import annotations

import asyncio

__all__ = ["Caller"]


class Caller:
    """The connection-shaped side of one request: an authenticated agent, the
    hash of the key it used (D185) and its address (what admission counts
    when there is no agent). ``reply`` resolves to the reply frame."""

    __slots__ = ("agent", "key_hash", "peer", "in_flight", "slot", "hello_by", "reply")

    def __init__(self, agent: str, key_hash: bytes | None, peer: str):
        self.agent: str | None = agent
        self.key_hash = key_hash
        self.peer = peer
        self.in_flight = 0
        self.slot = None
        self.hello_by = 0.0
        self.reply: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

    def peer_key(self) -> str:  # as Conn.peer_key: called only when there is no agent
        return self.peer

    def send(self, frame: bytes) -> None:
        if not self.reply.done():
            self.reply.set_result(frame)
