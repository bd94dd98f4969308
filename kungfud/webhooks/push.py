"""A2A push notifications (WIRE.md 1.3 "A2A": Push notifications) on the
webhook engine of 1.2: its address guard and POST (:mod:`.post`), its retry
schedule (:mod:`.schedule`), its cursor rows and leases.

Each push config of an A2A Task hears the Task's ``a2a_task`` events — the
author's events of that kind naming the Task, after the feed seq when the
config was set — and receives one POST per event, in seq order, at least once:
``{"statusUpdate": {taskId, contextId, status, metadata}}`` (content-free),
``content-type: application/a2a+json``, ``Authorization: <scheme>
<credentials>`` and ``X-A2A-Notification-Token`` when given, and 1.2's
``webhook-id`` (``<config>.<seq>``) and ``webhook-timestamp`` (no signature: a
push config has no secret). A config's position is a cursor row keyed
``tk_….push/<config>`` (written after each acknowledged event and each failed
attempt); it is disabled after failing for ``disable_after_s``; it ends with
the Task's terminal event. Tasks are split into ``SHARDS`` by a hash of the
Task id; a node serves the shards whose ``a2a_push`` lease it holds, so one
node delivers each config. The runner looks every ``POLL_S`` at the Tasks
with configs (a small index, ``a2a_push``) and at their authors' events.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import zlib
from typing import Any

import msgspec

from .. import tracing
from ..actors.hooks import Cursor, Hooks
from ..actors.runtime import wall_ms as _wall_ms
from .post import new_client, post
from .schedule import Schedule

__all__ = ["Pushes", "WithPushes", "push_cursor", "status_update"]

log = logging.getLogger("kungfud.webhooks")

SHARDS = 4
POLL_S = 0.5
PAGE = 64
E = "urn:kungfud:a2a:kungfu:v1"
_TERMINAL = ("TASK_STATE_COMPLETED", "TASK_STATE_CANCELED")
_dec = msgspec.json.Decoder()
_enc = msgspec.json.Encoder()


def push_cursor(task: str, config: str) -> str:
    """The cursor row of one push config."""
    return f"{task}.push/{config}"


def status_update(task: str, context: str, data: dict) -> bytes:
    """The body for one ``a2a_task`` event: its state and generation, nothing
    a participant wrote."""
    return _enc.encode({"statusUpdate": {
        "taskId": task,
        "contextId": context,
        "status": {"state": data.get("state"), "timestamp": data.get("at")},
        "metadata": {E: {"generation": data.get("generation")}},
    }})


class Pushes:
    def __init__(self, runtime: Any, cfg: Any):
        self.rt = runtime
        self.hooks = Hooks(runtime)
        self.allow = tuple(cfg.allow_hosts)  # entries as written: host, host:port, [v6]:port, host:* (D328)
        self.schedule = Schedule(tuple(cfg.retry_pauses_s), cfg.disable_after_s)
        self.leases = [runtime.nodes.lease_for("a2a_push", n) for n in range(SHARDS)]
        self.running: dict[str, asyncio.Task] = {}
        self.done: set[str] = set()  # Tasks whose every config ended (no config is set on an ended Task)
        self.delivered_total = 0
        self._client: Any = None
        self._loop_task: asyncio.Task | None = None
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="kungfud-a2a-push")

    def figures(self) -> list[tuple[str, str, str, object]]:
        return [("kungfud_a2a_push_delivered_total", "counter", "A2A push notifications acknowledged", self.delivered_total)]

    def start(self) -> None:
        self._client = new_client(4)
        self._loop_task = asyncio.ensure_future(self._loop())

    async def stop(self) -> None:
        tasks = [*self.running.values(), *([self._loop_task] if self._loop_task else [])]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._client is not None:
            await self._client.aclose()
        for lease in self.leases:
            await self._call(lease.release)
        self._pool.shutdown(wait=False)

    async def _call(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    async def _loop(self) -> None:
        while True:
            try:
                held = [await self._call(lease.try_acquire) for lease in self.leases]
                for author, task in await self._call(self.hooks.push_tasks):
                    if task not in self.done and held[zlib.crc32(task.encode()) % SHARDS]:
                        t = self.running.get(task)
                        if t is None or t.done():
                            self.running[task] = asyncio.ensure_future(self._serve(author, task))
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("a2a push sweep failed")
            await asyncio.sleep(POLL_S)

    async def _serve(self, author: str, task: str) -> None:
        """Deliver every config of ``task`` up to the author's newest event."""
        try:
            push, marker, cursors = await self._call(self.hooks.push_state, task, push_cursor)
            if push is None or marker is None:
                return
            if push.configs and all(c is not None and c.delivered < 0 for c in cursors.values()):
                self.done.add(task)
                return
            for c in push.configs:
                await self._config(author, task, marker.context, c, cursors.get(c.id))
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("a2a push for %s failed", task)

    async def _config(self, author: str, task: str, context: str, c: Any, cursor: Cursor | None) -> None:
        hook = f"{c.id}@{c.set_at}"  # a config set again under its id starts afresh
        if cursor is None or cursor.hook != hook:
            cursor = Cursor(hook, c.since)
        if cursor.disabled_at or cursor.delivered < 0:
            return
        now = _wall_ms()
        if cursor.attempts and now < self.schedule.next_at(cursor):
            return
        _newest, page, _more, reached = await self._call(lambda: self.rt.events_page(author, cursor.delivered, PAGE))
        extra = {"content-type": "application/a2a+json"}
        if c.scheme:
            extra["authorization"] = f"{c.scheme} {c.credentials or ''}".strip()
        if c.token:
            extra["x-a2a-notification-token"] = c.token
        last = cursor.delivered
        for seq, body in page:
            event = _dec.decode(body)
            data = event.get("data") or {}
            if event.get("event") != "a2a_task" or data.get("task") != task:
                last = seq
                continue
            span = tracing.push(task, c.id, tracing.meta_of(body)) if tracing.on else None  # its traceparent on the POST
            error = await post(self._client, c.url, self.allow, b"", f"{c.id}.{seq}", now // 1000,
                               status_update(task, context, data), span=span, extra=extra)
            if span is not None:
                span.end(error)
            if error is not None:
                cursor = self.schedule.failed(msgspec.structs.replace(cursor, delivered=last), _wall_ms(), error)
                await self._call(self.hooks.write, {push_cursor(task, c.id): cursor})
                return
            self.delivered_total += 1
            last = seq
            if data.get("state") in _TERMINAL:  # the config ends after the Task's terminal event
                cursor = msgspec.structs.replace(self.schedule.delivered(cursor, seq, _wall_ms()), delivered=-1)
                await self._call(self.hooks.write, {push_cursor(task, c.id): cursor})
                return
        last = max(last, reached)  # the page read up to there: nothing of this Task's before it is left
        if last != cursor.delivered:
            await self._call(self.hooks.write, {push_cursor(task, c.id): self.schedule.delivered(cursor, last, _wall_ms())})


class WithPushes:
    """The server's one sink (server/bridge.py ``Sink``): the webhook runner,
    with the push runner started and stopped beside it (the push runner polls:
    it needs no wake-ups)."""

    def __init__(self, runner: Any, pushes: Pushes):
        self.runner, self.pushes = runner, pushes

    def start(self) -> None:
        self.runner.start()
        self.pushes.start()

    async def stop(self) -> None:
        await self.runner.stop()
        await self.pushes.stop()

    def wake(self, agents: list[str] | None) -> None:
        self.runner.wake(agents)

    def changed(self, agents: list[str]) -> None:
        self.runner.changed(agents)

    def figures(self) -> list[tuple[str, str, str, object]]:
        return [*self.runner.figures(), *self.pushes.figures()]
