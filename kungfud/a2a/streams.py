"""Following a Task: the SSE stream of ``SendStreamingMessage`` and
``SubscribeToTask``, and the blocking answer of ``SendMessage``.

Written here rather than taken from the a2a-sdk because the SDK's server cannot
do what WIRE.md requires of them: its SSE events carry no ``id:``, it has no
``Last-Event-ID`` replay and no comment while a Task is quiet, and its blocking
answer says nothing until it is done (a stock client's 5 s read timeout fires
on a silent phase). The Task's changes come from the caller's durable
``a2a_task`` events (their seq is the SSE ``id``), so a stream on one node
follows what any node committed, and a reconnect replays without gaps.
"""

from __future__ import annotations

import asyncio
import datetime
from typing import Any, AsyncIterator, Awaitable, Callable

import msgspec

from .card import EXTENSION
from .errors import Failure, from_rejection
from .methods import DONE, Call, Methods

__all__ = ["Follower", "sse_events", "blocking_body", "error_frame", "KEEPALIVE_S"]

KEEPALIVE_S = 2.0  # an SSE comment or a blocking space at least this often while quiet (WIRE.md: every ≤ 3 s)

_enc = msgspec.json.Encoder()


def _iso(ms: Any) -> str | None:
    if not isinstance(ms, (int, float)):
        return ms if isinstance(ms, str) else None
    t = datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc)
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Follower:
    """The ``a2a_task`` events of one Task after a seq, and a wake-up when the
    caller may have new ones (Ops.watch)."""

    def __init__(self, methods: Methods, call: Call, task: str, after: int):
        self.methods = methods
        self.ops = methods.ops
        self.call = call
        self.task = task
        self.after = after
        self._woken = self.ops.watch(call.agent)

    async def wait(self, timeout: float) -> None:
        """Until the caller may have new events (or ``timeout``)."""
        try:
            await asyncio.wait_for(self._woken.wait(), max(0.01, timeout))
        except asyncio.TimeoutError:
            pass

    def close(self) -> None:
        self.ops.unwatch(self.call.agent, self._woken)

    def poll(self) -> list[tuple[int, dict]]:
        self._woken.clear()  # a wake-up from here on is not missed: wait() returns at once
        out: list[tuple[int, dict]] = []
        while True:
            items, self.after, more = self.ops.events(self.call.agent, self.after)
            out.extend((seq, d) for seq, d in items if d.get("task") == self.task)
            if not more:
                return out


def _frame(seq: int | None, req_id: Any, body: dict, rpc: bool) -> bytes:
    data = {"jsonrpc": "2.0", "id": req_id, "result": body} if rpc else body
    head_ = f"id: {seq}\n" if seq is not None else ""
    return (head_ + "data: ").encode() + _enc.encode(data) + b"\n\n"


def _shown(event: dict, generation: int) -> bool:
    return isinstance(event.get("generation"), int) and event["generation"] <= generation


def _generation(task: dict) -> int:
    gen = ((task.get("metadata") or {}).get(EXTENSION) or {}).get("generation")
    return gen if isinstance(gen, int) else -1


def _status_update(task: dict, event: dict | None) -> dict:
    status = dict(task.get("status") or {})
    meta = dict(task.get("metadata") or {})
    if event is not None and (meta.get(EXTENSION) or {}).get("generation") != event.get("generation"):
        # A replayed change: its state and time as the event says (the Task has moved on since).
        status = {"state": event.get("state"), "timestamp": _iso(event.get("at"))}
        meta = {EXTENSION: {"generation": event.get("generation")}}
    return {"statusUpdate": {"taskId": task["id"], "contextId": task.get("contextId", ""), "status": status, "metadata": meta}}


async def sse_events(
    follower: Follower, first: dict, first_seq: int, req_id: Any, rpc: bool, gone: Callable[[], Awaitable[bool]],
    replay: bool = False,
) -> AsyncIterator[bytes]:
    """The stream: ``first`` (the Task; not sent on a ``replay``, which starts
    with the events after ``first_seq``), then an ``artifactUpdate`` per new
    delivery and a ``statusUpdate`` per change, an SSE comment every
    KEEPALIVE_S while quiet; ends after INPUT_REQUIRED or a terminal state."""
    try:
        async for chunk in _sse_events(follower, first, first_seq, req_id, rpc, gone, replay):
            yield chunk
    finally:
        follower.close()


async def _sse_events(
    follower: Follower, first: dict, first_seq: int, req_id: Any, rpc: bool, gone: Callable[[], Awaitable[bool]],
    replay: bool,
) -> AsyncIterator[bytes]:
    loop = asyncio.get_running_loop()
    done_now = (first.get("status") or {}).get("state") in DONE
    seen_artifacts: set = set()
    shown = -1  # the generation the stream has shown: events up to it are in the snapshot already
    pending: list[tuple[int, dict]] = []
    if not replay:
        shown = _generation(first)
        seen_artifacts = {a.get("artifactId") for a in first.get("artifacts", [])}
        # The snapshot's id: the last event it already shows (so Last-Event-ID = it replays what came after).
        pending = follower.poll()
        first_seq = max([seq for seq, e in pending if _shown(e, shown)], default=first_seq)
        yield _frame(first_seq, req_id, {"task": first}, rpc)
        if done_now:
            return
    quiet_since = loop.time()
    polls = 0
    while True:
        if polls:
            await follower.wait(quiet_since + KEEPALIVE_S - loop.time())
        polls += 1
        events, pending = pending + follower.poll(), []
        if replay and polls == 1 and done_now and not any(e.get("state") in DONE for _, e in events):
            events.append((first_seq, {"task": first["id"], "state": first["status"]["state"], "generation": _generation(first)}))
        for seq, event in events:
            if _shown(event, shown):
                continue
            try:
                task = await follower.methods.task(follower.call, follower.task)
            except Exception as e:  # the Task cannot be read now (a store that is down): said on the stream
                yield error_frame(e, req_id, rpc)
                return
            # A replayed change the Task has moved on from shows its state only; the
            # deliveries since come before the status of the change that is current.
            current = _generation(task) == event.get("generation")
            for art in task.get("artifacts", []) if current else ():
                if art.get("artifactId") not in seen_artifacts:
                    seen_artifacts.add(art.get("artifactId"))
                    body = {"artifactUpdate": {"taskId": task["id"], "contextId": task.get("contextId", ""),
                                               "artifact": art, "lastChunk": True}}
                    yield _frame(seq, req_id, body, rpc)
            yield _frame(seq, req_id, _status_update(task, event), rpc)
            quiet_since = loop.time()
            if event.get("state") in DONE:
                return
        if loop.time() - quiet_since >= KEEPALIVE_S:
            yield b": keep-alive\n\n"
            quiet_since = loop.time()
            if await gone():
                return


def error_frame(e: Exception, req_id: Any, rpc: bool) -> bytes:
    f = e if isinstance(e, Failure) else from_rejection({"code": "internal", "reason": "the stream failed", "next": "retry"})
    body = f.rpc(req_id) if rpc else f.rest()
    return b"event: error\ndata: " + _enc.encode(body) + b"\n\n"


async def blocking_body(
    methods: Methods, call: Call, task_id: str, after: int, wait_s: float,
    render: Callable[[dict], bytes], fail: Callable[[Failure], bytes], history: int | None = None,
    first: dict | None = None,
) -> AsyncIterator[bytes]:
    """The blocking answer: one space every KEEPALIVE_S until the Task reaches
    INPUT_REQUIRED or a terminal state, or ``wait_s`` passes; then the Task
    (leading whitespace is valid JSON). ``first``: the Task as the caller
    already read it, after ``after``."""
    loop = asyncio.get_running_loop()
    until = loop.time() + wait_s
    follower = Follower(methods, call, task_id, after)
    try:
        task = first if first is not None else await methods.task(call, task_id)
        spaced = loop.time()
        while (task.get("status") or {}).get("state") not in DONE and loop.time() < until:
            await follower.wait(min(spaced + KEEPALIVE_S - loop.time(), until - loop.time()))
            if follower.poll():
                task = await methods.task(call, task_id)
            if loop.time() - spaced >= KEEPALIVE_S:
                yield b" "
                spaced = loop.time()
    except Failure as e:
        yield fail(e)
        return
    finally:
        follower.close()
    if history is not None:
        try:
            task = await methods.task(call, task_id, history)
        except Failure as e:
            yield fail(e)
            return
    yield render(task)
