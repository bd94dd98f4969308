"""The delivery runner (WIRE.md 1.2; D212, D213): on the daemon's event loop,
off the path of every action.

- **Who delivers.** Agents are split into ``SHARDS`` shards (a stable hash of
  the id); a node delivers the agents of the shards whose lease it holds
  (``Runtime.nodes.lease_for("webhooks", n)``: a ``flock`` among LMDB
  workers, a PostgreSQL advisory lock among nodes; a single node holds
  them all). A dead node's leases go with its process or session; the others
  try every ``LEASE_S`` and sweep the shards they take.
- **When.** A commit (this node's, or another's through the bus) wakes the
  agents it names; a sweep every ``SWEEP_S`` catches what a lost wake-up missed.
  A woken agent with an endpoint gets a task that delivers until nothing is
  pending, then ends. Which agents have one is known in memory (D272:
  ``endpoints``, from the sweeps and from every commit that writes a
  registration, this node's or another's), so a wake-up of any other agent
  costs a set lookup: no task, no store read.
- **How.** Per agent strictly one POST in flight, in seq order (a later event
  waits for the one before); across agents the slots of :mod:`.slots` (D330):
  round robin between receiving origins, a cap per origin, slow receivers in a
  smaller pool of their own; the name is resolved before a slot is taken.
  A failed attempt is recorded at once (cursor: failing since, attempts, last
  error) and retried after the schedule's pause; acknowledged positions are
  written in batches (``FLUSH_S``): a crash before the write sends those
  events again (at least once), never skips one.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
import zlib
from typing import Any

import msgspec


from .. import tracing
from ..actors import OPEN_TASKS
from ..actors.hooks import Cursor, Hooks
from ..actors.runtime import wall_ms as _wall_ms
from ..event_kinds import frame, kind_of
from .guard import Refused, target
from .post import new_client, refused, send
from .schedule import Schedule
from .slots import Slots

__all__ = ["Deliveries", "SHARDS", "shard_of"]

log = logging.getLogger("kungfud.webhooks")
# httpx logs every request at INFO (with the URL): one line per delivery is not ours to log.
logging.getLogger("httpx").setLevel(logging.WARNING)

SHARDS = 4
LEASE_S = 1.0
SWEEP_S = 15.0
FLUSH_S = 0.05
PAGE = 64


def shard_of(agent: str) -> int:
    return zlib.crc32(agent.encode()) % SHARDS


class Deliveries:
    def __init__(self, runtime: Any, cfg: Any):
        self.rt = runtime
        self.hooks = Hooks(runtime)
        self.allow = tuple(cfg.allow_hosts)  # entries as written: host, host:port, host:* (D328)
        self.concurrency = cfg.concurrency
        self.schedule = Schedule(tuple(cfg.retry_pauses_s), cfg.disable_after_s)
        self.leases = [runtime.nodes.lease_for("webhooks", n) for n in range(SHARDS)]
        self.held = [False] * SHARDS
        self.tasks: dict[str, asyncio.Task] = {}
        self.rewake: set[str] = set()
        self.pokes: dict[str, asyncio.Event] = {}  # agent -> wakes its task from a pause between attempts
        self.acked: dict[str, Cursor] = {}
        self.oldest: dict[str, int] = {}  # agent -> when its oldest undelivered event was recorded (ms)
        # D272: every agent with an endpoint, and maybe some that no longer have
        # one (a read of the registration removes those). Added to by each sweep
        # and by each commit that writes a registration (``changed``), removed
        # from only by a read that finds none; until the first sweep has filled
        # it (``_known``), every woken agent is read.
        self.endpoints: set[str] = set()
        self._known = False
        self.delivered_total = 0
        self.failed_total = 0
        self._client: Any = None
        self.slots = Slots(self.concurrency)
        self._loops: list[asyncio.Task] = []
        self._flush_due = asyncio.Event()
        self._write_lock = asyncio.Lock()
        self._stopping = False
        self._sweeping: asyncio.Future | None = None
        self._sweep_again = False
        # The runner's store calls and lease checks run on threads of their own:
        # a slow resolver (the default executor) or store never starves the other.
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="kungfud-webhooks")

    # --- lifecycle ------------------------------------------------------------------

    def start(self) -> None:
        self._client = new_client(self.slots.max_connections)
        self._loops = [asyncio.ensure_future(self._lease_loop()), asyncio.ensure_future(self._flush_loop())]

    async def stop(self) -> None:
        self._stopping = True
        running = [*self.tasks.values(), *self._loops, *([self._sweeping] if self._sweeping is not None else [])]
        for t in running:
            t.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        try:
            await self._write_acked()
        except Exception:
            log.exception("writing webhook cursors at stop failed")
        if self._client is not None:
            await self._client.aclose()
        for lease in self.leases:
            await self._call(lease.release)
        self._pool.shutdown(wait=False)

    async def _call(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    # --- wake-ups -------------------------------------------------------------------

    def wake(self, agents: list[str] | None) -> None:
        """New events may be stored for ``agents`` (None: for anyone)."""
        if self._stopping:
            return
        if agents is None:  # "maybe anyone" (another node's busy commit): one sweep at a time, coalesced
            if self._sweeping is not None and not self._sweeping.done():
                self._sweep_again = True
            else:
                self._sweeping = asyncio.ensure_future(self._sweep_all())
            return
        known, endpoints, held = self._known, self.endpoints, self.held
        if OPEN_TASKS in agents and known:
            # A task_offered event (the open-Task stream): it may be for any
            # agent whose webhook takes that kind; each reads its own feed.
            agents = [*agents, *endpoints]
        for agent in agents:
            if (agent in endpoints or not known) and held[shard_of(agent)]:
                self._run(agent)

    def changed(self, agents: list[str]) -> None:
        """A commit (this node's, or another's through the bus) wrote the
        webhook registrations of ``agents``: each is read again, and served
        from then on if it has an endpoint (the read that finds none removes it)."""
        if self._stopping:
            return
        for agent in agents:
            if self.held[shard_of(agent)]:  # another shard's agents: its sweep, when this node takes it
                self.endpoints.add(agent)
                self._run(agent)

    def _run(self, agent: str) -> None:
        task = self.tasks.get(agent)
        if task is not None and not task.done():
            self.rewake.add(agent)  # it reads again before it ends
            poke = self.pokes.get(agent)
            if poke is not None:
                poke.set()  # a pause ends early to look at the registration again
            return
        self.tasks[agent] = asyncio.ensure_future(self._deliver(agent))

    async def _lease_loop(self) -> None:
        last_sweep = 0.0
        while True:
            taken = []
            for n, lease in enumerate(self.leases):
                try:
                    # A single node's leases are always held: no thread hop for them.
                    held = await self._call(lease.try_acquire) if self.rt.shared else lease.try_acquire()
                except Exception:
                    log.exception("taking webhook lease %d failed", n)
                    held = False
                if held and not self.held[n]:
                    taken.append(n)
                self.held[n] = held
            now = time.monotonic()
            if taken or now - last_sweep >= SWEEP_S:
                await self._sweep(range(SHARDS) if now - last_sweep >= SWEEP_S else taken)
                last_sweep = now if now - last_sweep >= SWEEP_S else last_sweep
            await asyncio.sleep(LEASE_S)

    async def _sweep_all(self) -> None:
        while True:
            self._sweep_again = False
            await self._sweep(range(SHARDS))
            if not self._sweep_again or self._stopping:
                return

    async def _sweep(self, shards: Any) -> None:
        wanted = set(shards)
        try:
            hooked, agents = await self._call(self.hooks.agents)
        except Exception:
            log.exception("listing webhook agents failed")
            return
        self.endpoints.update(hooked)  # a union: what changed meanwhile was added by changed()
        self._known = True
        for agent in agents:
            n = shard_of(agent)
            if n in wanted and self.held[n]:
                self._run(agent)

    # --- one agent ------------------------------------------------------------------

    async def _deliver(self, agent: str) -> None:
        # Set by every wake-up while this task runs (_run), from before its
        # first read: a wake that comes during a POST or a cursor write is not
        # lost to the pause that follows (_until_delivered).
        self.pokes.setdefault(agent, asyncio.Event())
        try:
            while True:
                self.rewake.discard(agent)
                more = await self._deliver_some(agent)
                if not more and agent not in self.rewake:
                    return
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("webhook delivery for %s failed; retried at the next sweep", agent)
        finally:
            self.oldest.pop(agent, None)
            self.pokes.pop(agent, None)
            if self.tasks.get(agent) is asyncio.current_task():
                del self.tasks[agent]

    async def _deliver_some(self, agent: str) -> bool:
        """Deliver one page of ``agent``'s events; True when more may follow."""
        if not self.held[shard_of(agent)]:
            return False
        reg, cursor = await self._call(self.hooks.state, agent)
        if reg is None or reg.url is None:
            self.acked.pop(agent, None)
            # A registration written after this read was announced to changed(),
            # which asked this task to read again (rewake) and adds it back.
            self.endpoints.discard(agent)
            return False
        self.endpoints.add(agent)
        pending = self.acked.get(agent)
        if pending is not None and pending.hook == reg.hook:
            cursor = pending  # acknowledged, not yet written
        if cursor is None:
            cursor = Cursor(reg.hook, reg.since)
        if cursor.disabled_at:
            return False
        page, first_at, reached = await self._call(self.hooks.events_after, agent, cursor.delivered, PAGE, reg.events)
        if not page:
            return self._passed(agent, cursor, reached)
        if first_at is not None:
            self.oldest[agent] = first_at
        for seq, event in page:  # every event has its own seq (WIRE.md 1.2)
            if kind_of(event) in reg.events:
                cursor = await self._until_delivered(agent, reg, cursor, f"{agent}.{seq}", seq, event)
                if cursor is None:
                    return False  # disabled, replaced, cleared or no longer ours
            cursor = self.schedule.delivered(cursor, seq, _wall_ms())
            self.acked[agent] = cursor
            self._flush_due.set()
            self.oldest.pop(agent, None)
        self._passed(agent, cursor, reached)
        return True

    def _passed(self, agent: str, cursor: Cursor, reached: int) -> bool:
        """The read reached ``reached`` past the cursor over offers not meant
        for ``agent`` only: the cursor moves past them, so no later read
        (wake-up, sweep, ``webhook.get``) reads them again (D331). True when
        it moved. Written with the batched acknowledgements (``FLUSH_S``: one
        write for every agent's cursor at most every 50 ms)."""
        if reached <= cursor.delivered:
            return False
        self.acked[agent] = msgspec.structs.replace(cursor, delivered=reached)
        self._flush_due.set()
        return True

    async def _until_delivered(
        self, agent: str, reg: Any, cursor: Cursor, msg_id: str, seq: int, event: bytes
    ) -> Cursor | None:
        """POST one event until a 2xx; the cursor then. None: stop (the
        endpoint was disabled, replaced or cleared, or the shard lost)."""
        body = b'{"agent":"%s",' % agent.encode() + frame(seq, event)[1:]  # the subscribe frame, plus "agent"
        while True:
            wait_ms = self.schedule.next_at(cursor) - _wall_ms()
            if wait_ms > 0:
                poke = self.pokes[agent]  # made with the task (_deliver)
                try:  # at once if woken since the registration was last read
                    await asyncio.wait_for(poke.wait(), wait_ms / 1000)
                except asyncio.TimeoutError:
                    pass
                poke.clear()  # before the read: a wake after it is for the next pause
                now_reg, _ = await self._call(self.hooks.state, agent)
                if now_reg is None or now_reg.hook != reg.hook:
                    return None  # cleared or set again: the next read starts over
                continue
            if not self.held[shard_of(agent)]:
                return None
            span = tracing.delivery(agent, seq, event) if tracing.on else None  # its traceparent on the POST
            error = await self._post(reg, msg_id, body, span)
            if span is not None:
                span.end(error)
            if error is None:
                self.delivered_total += 1
                return cursor
            self.failed_total += 1
            cursor = self.schedule.failed(cursor, _wall_ms(), error)
            self.acked.pop(agent, None)
            await self._write({agent: cursor})  # the failing state survives a restart
            if cursor.disabled_at:
                log.warning("webhook of %s disabled after failing since %d: %s", agent, cursor.failing_since, error)
                return None

    async def _post(self, reg: Any, msg_id: str, body: bytes, span: Any = None) -> str | None:
        """One attempt: None when acknowledged, else the category of the
        failure (D329). ``span``: see :func:`.post.send`."""
        try:
            t = await target(reg.url, self.allow)  # resolved before a slot is taken (D330)
        except Refused as e:
            return refused(e, reg.url, msg_id)
        async with self.slots.slot(t.origin):
            return await send(self._client, t, reg.key, msg_id, int(time.time()), body, span)

    # --- cursors --------------------------------------------------------------------

    async def _flush_loop(self) -> None:
        while True:
            await self._flush_due.wait()
            self._flush_due.clear()
            await asyncio.sleep(FLUSH_S)  # acknowledgements of several agents in one write
            try:
                await self._write_acked()
            except Exception:
                log.exception("writing webhook cursors failed; retried")
                self._flush_due.set()
                await asyncio.sleep(1.0)

    async def _write_acked(self) -> None:
        if not self.acked:
            return
        batch = dict(self.acked)
        await self._write(batch)
        for agent, c in batch.items():
            if self.acked.get(agent) is c:
                del self.acked[agent]

    async def _write(self, cursors: dict[str, Cursor]) -> None:
        async with self._write_lock:  # one write at a time: a later cursor is never overwritten by an older
            await self._call(self.hooks.write, cursors)

    # --- metrics --------------------------------------------------------------------

    def figures(self) -> list[tuple[str, str, str, object]]:
        """This runner's part of ``/metrics``: (name, type, help, value) each."""
        return [
            ("kungfud_webhook_deliveries_total", "counter", "Webhook POSTs answered 2xx (WIRE.md 1.2).",
             self.delivered_total),
            ("kungfud_webhook_failures_total", "counter",
             "Webhook attempts that failed (error status, timeout, refused, redirect).", self.failed_total),
            ("kungfud_webhook_oldest_undelivered_seconds", "gauge",
             "Age of the oldest event this node is delivering to a webhook (0: none waiting).",
             f"{self.oldest_age_s():.3f}"),
        ]

    def oldest_age_s(self) -> float:
        """Age of the oldest undelivered event this node is delivering (0: none)."""
        if not self.oldest:
            return 0.0
        return max(0.0, (_wall_ms() - min(self.oldest.values())) / 1000)
