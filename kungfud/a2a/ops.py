"""What the A2A endpoint needs of the daemon, and nothing more: who a key is,
one op run as an agent (the same front door as a ``/v1`` frame:
:meth:`kungfud.server.Server.call`), a published card, and the caller's
``a2a_task`` events. The endpoint never touches the core or the store.

Unit tests put a fake with the same four methods in its place.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass
from typing import Any, Protocol

import msgspec

from .. import wire

__all__ = ["Answer", "Ops", "ServerOps"]

_dec = msgspec.json.Decoder()
_enc = msgspec.json.Encoder()
_CARD_ARGS = wire.OPS["a2a.card.get"].args


@dataclass(frozen=True)
class Answer:
    """An op's reply: ``result`` when ok, else ``error`` (``{code, reason, next, hint?, rule?}``)."""

    ok: bool
    result: Any = None
    error: Any = None
    replayed: bool = False


class Ops(Protocol):
    def authenticate(self, key: str) -> tuple[str, bytes] | None: ...

    async def call(
        self, agent: str, key_hash: bytes | None, op: str, args: dict, key: str = "", peer: str = "",
        meta: dict[str, str] | None = None,
    ) -> Answer: ...

    def card(self, agent: str) -> dict | None: ...

    def head(self, agent: str) -> int: ...

    def watch(self, agent: str) -> asyncio.Event: ...

    def unwatch(self, agent: str, woken: asyncio.Event) -> None: ...

    def events(self, agent: str, after: int, limit: int = 100) -> tuple[list[tuple[int, dict]], int, bool]: ...


class ServerOps:
    """:class:`Ops` on a running :class:`kungfud.server.Server`."""

    def __init__(self, server: Any):
        self.server = server
        self.rt = server.rt
        self._ids = itertools.count(1)
        self._watching: dict[str, set[asyncio.Event]] = {}
        server.on_events.append(self._woken)

    def watch(self, agent: str) -> asyncio.Event:
        """An event set whenever ``agent`` may have new events (this node's
        commits, and other nodes' as the feed hears of them)."""
        woken = asyncio.Event()
        self._watching.setdefault(agent, set()).add(woken)
        return woken

    def unwatch(self, agent: str, woken: asyncio.Event) -> None:
        left = self._watching.get(agent)
        if left is not None:
            left.discard(woken)
            if not left:
                del self._watching[agent]

    def _woken(self, agents: list[str] | None) -> None:
        for agent in self._watching if agents is None else agents:
            for woken in self._watching.get(agent, ()):
                woken.set()

    def authenticate(self, key: str) -> tuple[str, bytes] | None:
        who = self.rt.authenticate(key)
        return None if who is None else (who.agent, who.key_hash)

    async def call(
        self, agent: str, key_hash: bytes | None, op: str, args: dict, key: str = "", peer: str = "",
        meta: dict[str, str] | None = None,
    ) -> Answer:
        frame: dict[str, Any] = {"id": next(self._ids), "op": op, "args": args}
        if key:
            frame["key"] = key
        if meta:  # the HTTP request's traceparent/tracestate: its span continues the caller's trace
            frame["meta"] = meta
        reply = _dec.decode(await self.server.call(agent, key_hash, _enc.encode(frame), peer))
        if reply.get("ok"):
            return Answer(True, reply.get("result"), replayed=bool(reply.get("replayed")))
        return Answer(False, error=reply.get("error"))

    def card(self, agent: str) -> dict | None:
        """The agent's published card (``a2a.card.get`` read as the agent itself:
        the card path has no key), or None: no such agent, or no card."""
        try:  # the args checked as a frame's are (the agent id's shape), without a frame around them
            result = self.rt.read("a2a.card.get", agent, msgspec.convert({"agent": agent}, _CARD_ARGS))
        except Exception:  # an agent id of the wrong shape, a store that is down: no card to show
            return None
        return _dec.decode(wire.encode(result)) if isinstance(result, dict) else None

    def head(self, agent: str) -> int:
        """The newest event seq now: the changes of a Task from now on are the events after it."""
        return self.rt.events_page(agent, 2**62, 1)[0]

    def events(self, agent: str, after: int, limit: int = 100) -> tuple[list[tuple[int, dict]], int, bool]:
        """``agent``'s ``a2a_task`` events after seq ``after``: ([(seq, data)],
        the seq read up to, whether more follow)."""
        newest, page, more, _reached = self.rt.events_page(agent, after, limit)  # no open-Task stream: nothing passed over
        out = []
        last = after
        for seq, body in page:
            last = seq
            event = _dec.decode(body)
            if event.get("event") == "a2a_task":
                out.append((seq, event.get("data") or {}))
        return out, (last if more else max(last, newest)), more
