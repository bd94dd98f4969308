"""An agent's event feed for the CLI (``kungfu watch``, ``kungfu wake``):
``subscribe {since}`` on one websocket, subscribed again with ``since`` after a
lost connection, each event yielded once (WIRE.md 1.2: every event has its own
seq, so one greater than the last yielded is new); and the state file that
holds the seq to resume after."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Callable

from .exits import CommandFailed, UsageError
from .profiles import ClientSettings
from .render import Out
from .shell import REPLY_TIMEOUT_S, handshake_failure

__all__ = ["EventFeed", "read_state", "write_state"]

#: Connection failures a feed that was subscribed once waits out (a daemon restarting).
_TRANSIENT = ("cannot_connect", "unavailable")


def read_state(path: Path | None) -> int | None:
    if path is None:
        return None
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise UsageError(f"cannot read state file {path}: {e.strerror}") from None
    try:
        return int(text)
    except ValueError:
        raise UsageError(f"state file {path} should hold one seq number, not {text[:40]!r}") from None


def write_state(path: Path | None, seq: int) -> None:
    """Atomically: a reader (or a restart after kill -9) sees the old seq or the new one."""
    if path is None:
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(f"{seq}\n")
        os.replace(tmp, path)
    except OSError as e:
        raise UsageError(f"cannot write state file {path}: {e.strerror or e}") from None


class EventFeed:
    """``await feed.next(idle)`` → the next event frame, or None once ``idle``
    seconds pass without one (counted from the first subscription or the last
    event). ``seq`` is the last seq yielded; when the feed started with no seq,
    it is the daemon's newest at the first subscription and ``on_start(seq)``
    is called with it. The first connection failing raises (exit 13, 4, …);
    once subscribed, a lost connection, a daemon restarting (refused, 503) or a
    subscribe answered ``next: retry`` is waited out, subscribing again with
    ``since`` (pauses growing to 5 s)."""

    def __init__(
        self, st: ClientSettings, since: int | None, out: Out, *, name: str, open_tasks: bool = False,
        on_start: Callable[[int], None] | None = None, a2a: bool = False,
    ):
        if not st.key:
            raise CommandFailed("unauthenticated", "no agent key: set KUNGFU_KEY or pass --profile NAME", "revise")
        self.st, self.seq, self.out, self.name = st, since, out, name
        self.open_tasks, self.on_start, self.a2a = open_tasks, on_start, a2a
        self.ws = None
        self.subscribed = False  # on the current connection
        self.connected_once = False
        self.quiet_since: float | None = None  # monotonic: first subscription, then each event
        self.backoff = 0.2

    def _left(self, idle: float | None) -> float | None:
        if idle is None or self.quiet_since is None:
            return None
        return max(0.0, idle - (time.monotonic() - self.quiet_since))

    async def _connect(self, idle: float | None) -> bool:
        """Open a connection and send ``subscribe``; False when ``idle`` ran out first."""
        from websockets.asyncio.client import connect
        from websockets.exceptions import ConnectionClosed

        while True:
            try:
                self.ws = await connect(
                    self.st.url, additional_headers={"Authorization": f"Bearer {self.st.key}"},
                    compression=None, max_size=None, open_timeout=10,
                )
                break
            except Exception as e:
                failure = handshake_failure(e, self.st.url)
                if not self.connected_once or not isinstance(failure, CommandFailed) or failure.error["code"] not in _TRANSIENT:
                    raise failure from None
                if not await self._pause(idle):
                    return False
        self.backoff, self.subscribed = 0.2, False
        args: dict = {} if self.seq is None else {"since": self.seq}
        if self.open_tasks:
            args["open_tasks"] = True
        if self.a2a:  # WIRE.md 1.3: a2a_task events
            args["a2a"] = True
        try:
            await self.ws.send(json.dumps({"id": self.name, "op": "subscribe", "args": args}))
        except (ConnectionClosed, OSError):
            pass  # seen by recv
        return True

    async def _pause(self, idle: float | None) -> bool:
        left = self._left(idle)
        if left == 0.0:
            return False
        await asyncio.sleep(min(self.backoff, left if left is not None else self.backoff))
        self.backoff = min(self.backoff * 2, 5.0)
        return True

    async def _drop(self, why: str) -> None:
        self.out.note(f"{self.name}: connection lost ({why}); resubscribing after seq {self.seq}")
        ws, self.ws = self.ws, None
        if ws is not None:
            await ws.close()

    async def next(self, idle: float | None = None) -> dict | None:
        from websockets.exceptions import ConnectionClosed

        while True:
            if self.ws is None:
                if not await self._connect(idle):
                    return None
            try:
                # The idle time counts from the subscription; until then, a reply is awaited.
                wait = self._left(idle) if self.subscribed else REPLY_TIMEOUT_S
                frame = await asyncio.wait_for(self.ws.recv(), wait)
            except asyncio.TimeoutError:
                if not self.subscribed:
                    raise CommandFailed("cannot_connect", f"no reply to subscribe from {self.st.url}", "retry") from None
                return None
            except (ConnectionClosed, OSError) as e:
                await self._drop(str(e))
                if not await self._pause(idle):
                    return None
                continue
            msg = json.loads(frame)
            if "event" in msg:
                seq = msg.get("seq")
                if isinstance(seq, int) and self.seq is not None and seq <= self.seq:
                    continue  # yielded before (WIRE.md 1.2: each event has its own seq)
                if isinstance(seq, int):
                    self.seq = seq
                self.quiet_since = time.monotonic()
                return msg
            if msg.get("id") == self.name and not self._subscribed(msg):
                await self._drop(f"subscribe refused: {msg['error'].get('reason')}")
                if not await self._pause(idle):
                    return None

    def _subscribed(self, msg: dict) -> bool:
        """The reply to ``subscribe``: True when subscribed, False to subscribe
        again after a pause (a transient refusal once subscribed before)."""
        if not msg.get("ok"):
            err = msg.get("error") or {}
            if self.connected_once and err.get("next") == "retry":
                return False
            failure = CommandFailed(err.get("code", "internal"), err.get("reason", ""), err.get("next", "stop"))
            failure.error = err
            raise failure
        newest = msg["result"]["seq"]
        if not self.connected_once:
            self.quiet_since = time.monotonic()
        self.connected_once = self.subscribed = True
        if self.seq is None:
            # Nothing to replay: resume from the newest seq next time.
            self.seq = newest
            if self.on_start is not None:
                self.on_start(newest)
        self.out.note(f"{self.name}: subscribed; newest seq {newest}, resuming after {self.seq}")
        return True

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()
            self.ws = None
