"""``kungfu wake``: start an agent when there is something to do.

For an agent with no endpoint of its own (a coding agent on a laptop, a script
on the daemon's host): subscribe, and run ``--exec CMD`` through the shell when
an event of a kind named by ``--on`` arrives, with ``KUNGFU_EVENTS`` holding the
event frames that woke it (a JSON array) and ``KUNGFU_URL``/``KUNGFU_KEY``
passed on. One run at a time; events arriving during a run (or a cooldown)
wait and wake one next run together. ``--state-file`` holds the seq after which
every event has been handled by a finished run, so a restarted wake runs again
for what was not handled and for nothing that was. ``--cooldown`` and
``--max-runs``/``--per`` stop an agent whose runs wake it again (docs/cli.md
"wake"; decisions D220–D223). A run that fails (exit not 0) handled nothing: it
is logged as an error and run again, after a pause that grows, for the same
events; at start, wake runs once when ``turn`` or ``opportunities`` is not
empty, so work left by a failed or lost run is never stranded; the command finds
``kungfu`` on its PATH (D355–D357).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections import deque
from pathlib import Path

from ..event_kinds import DEFAULT_KINDS
from ..event_kinds import KINDS as ALL_KINDS
from .exits import EXIT_CODES, UsageError
from .feed import EventFeed, read_state, write_state
from .profiles import ClientSettings
from .render import Out

__all__ = ["KINDS", "DEFAULT_ON", "EVENTS_LIMIT", "add_wake_args", "wakes", "run_wake"]

#: The event kinds ``--on`` may name (WIRE.md "Events" and 1.2 "Open Tasks,
#: announced"), and those it takes without ``--on``: kungfud/event_kinds.py's.
KINDS = ALL_KINDS
DEFAULT_ON = DEFAULT_KINDS
#: Bytes of JSON at most in KUNGFU_EVENTS (Linux refuses one environment string over 128 KiB).
EVENTS_LIMIT = 64 * 1024
# A run starts once no event has arrived for SETTLE_S (at most SETTLE_MAX_S after
# the first): a replayed backlog or a burst arrives over several frames (D220).
SETTLE_S = 0.2
SETTLE_MAX_S = 1.0
# A failed run is run again after RETRY_FIRST_S, doubling up to RETRY_MAX_S (D356).
RETRY_FIRST_S = 1.0
RETRY_MAX_S = 60.0


def _kinds(text: str) -> tuple[str, ...]:
    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or not kinds:
        raise argparse.ArgumentTypeError(f"--on takes a comma-separated list of {', '.join(KINDS)}; not {text!r}")
    return kinds


def _positive(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not v >= 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more: {text!r}")
    return v


def add_wake_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--exec", required=True, metavar="CMD", dest="exec_cmd",
                   help="shell command to run when woken (KUNGFU_EVENTS holds the events, a JSON array)")
    p.add_argument("--on", type=_kinds, default=DEFAULT_ON, metavar="KINDS",
                   help=f"event kinds that wake it, comma-separated, of {','.join(KINDS)} (default {','.join(DEFAULT_ON)})")
    p.add_argument("--state-file", metavar="PATH", help="resume after the last event a finished run handled")
    p.add_argument("--cooldown", type=_positive, default=0.0, metavar="S", help="at least S seconds from the end of a run to the next")
    p.add_argument("--max-runs", type=int, metavar="N", help=f"with --per: stop (exit {EXIT_CODES['runaway']}) before a run beyond N in S seconds")
    p.add_argument("--per", type=_positive, metavar="S", help="the window of --max-runs")
    p.add_argument("--timeout", type=_positive, metavar="S", help="exit 0 after S seconds with no event and no run")


def wakes(event: dict, kinds: tuple[str, ...]) -> bool:
    """Whether ``event`` asks for a run. A ``turn`` event that only ends
    obligations (the agent's own action, a deadline, a void) adds nothing to
    do, so it wakes no one: an agent is not started again by its own
    delivery (D221). Nor by its own take: a ``deliver`` item is only ever
    added by the agent taking the work, in the run that delivers it (D355)."""
    kind = event.get("event")
    if kind not in kinds:
        return False
    if kind == "turn":
        return any(item.get("obligation") != "deliver" for item in (event.get("data") or {}).get("added") or ())
    return True


def cli_dir() -> str | None:
    """The directory of the ``kungfu`` this process was started as (or the one
    beside its Python, for ``python -m kungfud.agent_cli``), for the command's
    PATH: a worker script's ``kungfu`` commands find it even when the
    virtualenv was never activated (D357)."""
    for candidate in (os.path.abspath(sys.argv[0]), os.path.join(os.path.dirname(sys.executable), "kungfu")):
        if os.path.basename(candidate) == "kungfu" and os.access(candidate, os.X_OK):
            return os.path.dirname(candidate)
    return None


def run_path(path: str | None, extra: str | None) -> str:
    """PATH for a run: the user's, then ``extra`` when it is not on it already
    (the user's own ``kungfu`` comes first)."""
    parts = [p for p in (path or os.defpath).split(os.pathsep) if p]
    if extra and extra not in parts:
        parts.append(extra)
    return os.pathsep.join(parts)


def trace_env(batch: list[dict]) -> dict[str, str]:
    """``TRACEPARENT`` (and ``TRACESTATE``) of the newest event of ``batch``
    that carries ``meta.traceparent`` (WIRE.md 1.3 "Tracing": the span of the
    action that made it), for the command's environment; {} when none does."""
    for event in reversed(batch):
        meta = event.get("meta")
        tp = meta.get("traceparent") if isinstance(meta, dict) else None
        if isinstance(tp, str) and tp:
            ts = meta.get("tracestate")
            return {"TRACEPARENT": tp, **({"TRACESTATE": ts} if isinstance(ts, str) and ts else {})}
    return {}


def events_env(batch: list[dict]) -> tuple[str, int]:
    """KUNGFU_EVENTS for a run: the batch as a JSON array; when it is over
    EVENTS_LIMIT, the newest events that fit (none, if the newest alone is
    larger: an outcome's long reason), and how many older ones were left out
    (KUNGFU_EVENTS_OMITTED; ``turn`` and ``outcomes`` have them all, D222)."""
    texts = [json.dumps(e, ensure_ascii=False, separators=(",", ":")) for e in batch]
    size, keep = 2, 0
    for t in reversed(texts):
        if size + len(t.encode()) + 1 > EVENTS_LIMIT:
            break
        size, keep = size + len(t.encode()) + 1, keep + 1
    return "[" + ",".join(texts[len(texts) - keep:]) + "]", len(texts) - keep


class Waker:
    """The loop: a reader task gathers events into ``pending``; the main loop
    runs CMD for everything pending, one run at a time."""

    def __init__(self, st: ClientSettings, ns: argparse.Namespace, out: Out):
        if (ns.max_runs is None) != (ns.per is None):
            raise UsageError("--max-runs and --per go together: --max-runs N --per S")
        if ns.max_runs is not None and ns.max_runs < 1:
            raise UsageError("--max-runs must be 1 or more")
        self.st, self.ns, self.out = st, ns, out
        self.state = Path(ns.state_file).expanduser() if ns.state_file else None
        self.saved = read_state(self.state)
        self.feed = EventFeed(st, self.saved, out, name="wake", open_tasks="task_offered" in ns.on, on_start=self._save,
                         a2a="a2a_task" in ns.on)
        self.pending: list[dict] = []
        self.received: int | None = self.saved  # the last seq the feed yielded
        self.arrived = asyncio.Event()
        self.starts: deque[float] = deque()  # monotonic start times inside --per
        self.runs = 0
        self.last_end: float | None = None
        self.running = False
        self.start_run = False  # turn or opportunities was not empty at start (D356)
        self.failures = 0  # failed runs in a row
        self.retry_at: float | None = None

    def _save(self, seq: int | None) -> None:
        if seq is not None and seq != self.saved:
            write_state(self.state, seq)
            self.saved = seq

    def log(self, text: str) -> None:
        self.out.note(f"wake: {text}")

    async def _read(self) -> None:
        while True:
            ev = await self.feed.next()
            assert ev is not None
            if isinstance(ev.get("seq"), int):
                self.received = ev["seq"]
            if wakes(ev, self.ns.on):
                self.pending.append(ev)
            elif not self.pending and not self.running:
                self._save(self.received)  # idle: no event before it waits for a run
            self.arrived.set()

    async def _wait_for_events(self, reader: asyncio.Task) -> bool:
        """Until something is pending: False when --timeout passed quietly."""
        while not self.pending and not self.start_run:
            self.arrived.clear()
            quiet_from = max(self.feed.quiet_since or time.monotonic(), self.last_end or 0.0)
            left = None if self.ns.timeout is None else max(0.0, self.ns.timeout - (time.monotonic() - quiet_from))
            waiter = asyncio.ensure_future(self.arrived.wait())
            done, _ = await asyncio.wait({waiter, reader}, timeout=left, return_when=asyncio.FIRST_COMPLETED)
            if reader in done:
                waiter.cancel()
                reader.result()  # the feed's failure ends wake with its exit code
            if not done:
                waiter.cancel()
                if self.feed.quiet_since is not None and not self.pending and not self.start_run:
                    return False
        return True

    async def _settle(self, reader: asyncio.Task) -> None:
        """Let the events already on their way join the run: until none has
        arrived for SETTLE_S (at most SETTLE_MAX_S), so a replayed backlog or
        a burst wakes one run, not one per frame (D220's coalescing)."""
        until = time.monotonic() + SETTLE_MAX_S
        while (left := until - time.monotonic()) > 0:
            self.arrived.clear()
            waiter = asyncio.ensure_future(self.arrived.wait())
            done, _ = await asyncio.wait({waiter, reader}, timeout=min(SETTLE_S, left), return_when=asyncio.FIRST_COMPLETED)
            if reader in done:
                waiter.cancel()
                reader.result()
            if waiter not in done:
                waiter.cancel()
                return

    async def _cool_down(self, reader: asyncio.Task) -> None:
        if not self.ns.cooldown or self.last_end is None:
            return
        left = self.ns.cooldown - (time.monotonic() - self.last_end)
        if left > 0:
            self.log(f"cooling down {left:.1f}s before the next run (--cooldown {self.ns.cooldown:g})")
            done, _ = await asyncio.wait({reader}, timeout=left)
            if done:
                reader.result()

    async def _back_off(self, reader: asyncio.Task) -> None:
        left = 0.0 if self.retry_at is None else self.retry_at - time.monotonic()
        if left > 0:
            done, _ = await asyncio.wait({reader}, timeout=left)
            if done:
                reader.result()

    async def _work_waiting(self) -> None:
        """At start: run once when ``turn`` (or, woken by opportunities,
        ``opportunities``) lists something, whatever the events say: a run
        that failed, or was lost with its wake, left it there (D356)."""
        from ..client import Client

        ops = [op for op, kind in (("turn", "turn"), ("opportunities", "opportunity")) if kind in self.ns.on]
        if not ops:
            return
        try:
            async with await Client.connect(self.st.url, self.st.key) as c:
                for op in ops:
                    if (await c.read(op, {"limit": 1}))["items"]:
                        self.start_run = True
                        self.log(f"{op} is not empty at start: running once")
                        self.arrived.set()
                        return
        except Exception as e:  # the feed reports a daemon it cannot reach; this check is a courtesy
            self.log(f"could not read turn and opportunities at start ({e or type(e).__name__})")

    def _failed(self, code: int, batch: list[dict], start_run: bool) -> None:
        """A failed run handled nothing: its events go back in front, nothing is
        saved, and the next run waits RETRY_FIRST_S, doubling (D356)."""
        self.pending = batch + self.pending
        self.start_run = self.start_run or start_run
        self.failures += 1
        delay = min(RETRY_MAX_S, RETRY_FIRST_S * 2 ** (self.failures - 1))
        self.retry_at = time.monotonic() + delay
        hint = " (127: command not found — is it on PATH, and is `kungfu`?)" if code == 127 else ""
        self.log(
            f"ERROR: run {self.runs} FAILED with exit {code}{hint}; its {len(batch)} event(s) are NOT handled "
            f"(the state file keeps seq {self.saved}); failure {self.failures} in a row, running again in {delay:g}s"
        )

    def _runaway(self) -> bool:
        if self.ns.max_runs is None:
            return False
        now = time.monotonic()
        while self.starts and now - self.starts[0] > self.ns.per:
            self.starts.popleft()
        return len(self.starts) >= self.ns.max_runs

    def _stop(self) -> int:
        self.log(
            f"stopping: {self.ns.max_runs} runs in the last {self.ns.per:g}s (--max-runs {self.ns.max_runs} "
            f"--per {self.ns.per:g}): its runs may be waking it again; {len(self.pending)} event(s) "
            f"after seq {self.saved} not handled (the state file keeps them for the next start)"
        )
        return EXIT_CODES["runaway"]

    async def _run(self, batch: list[dict]) -> int:
        events, omitted = events_env(batch)
        env = {**os.environ, "KUNGFU_EVENTS": events, "KUNGFU_EVENTS_OMITTED": str(omitted),
               "KUNGFU_URL": self.st.url, "KUNGFU_KEY": self.st.key or "",
               "PATH": run_path(os.environ.get("PATH"), cli_dir())}
        env.pop("KUNGFU_PROFILE", None)  # the key passed on is the agent's, whatever profile gave it
        env.update(trace_env(batch))  # WIRE.md 1.3: the command continues the trace of the action that woke it
        seqs = [e.get("seq") for e in batch]
        self.runs += 1
        note = f"; KUNGFU_EVENTS holds the newest {len(batch) - omitted} ({omitted} older left out, see turn)" if omitted else ""
        what = f"seq {seqs[0]}..{seqs[-1]}" if seqs else "none: work waiting at start"
        self.log(f"run {self.runs} for {len(batch)} event(s), {what}{note}")
        started = time.monotonic()
        try:
            proc = await asyncio.create_subprocess_shell(self.ns.exec_cmd, env=env, stdin=asyncio.subprocess.DEVNULL)
        except OSError as e:  # no shell, or an environment the system refuses
            self.log(f"run {self.runs} could not start: {e}")
            return 127
        try:
            code = await proc.wait()
        except asyncio.CancelledError:
            if proc.returncode is None:
                proc.terminate()
                await proc.wait()
            raise
        self.log(f"run {self.runs} exited {code} after {time.monotonic() - started:.1f}s")
        return code

    async def loop(self) -> int:
        reader = asyncio.create_task(self._read())
        try:
            # Once subscribed (the replay after the state file's seq follows the
            # reply), so that a start-up run takes the replayed events with it.
            while not self.feed.connected_once and not reader.done():
                await asyncio.sleep(0.02)
            await self._work_waiting()
            while True:
                if not await self._wait_for_events(reader):
                    return 0
                await self._settle(reader)
                if self._runaway():
                    return self._stop()
                await self._cool_down(reader)
                await self._back_off(reader)
                if self._runaway():  # the window only empties with time: rare
                    return self._stop()
                batch, self.pending, start_run, self.start_run = self.pending, [], self.start_run, False
                upto = self.received
                self.starts.append(time.monotonic())
                self.running = True
                try:
                    code = await self._run(batch)
                    if code != 0:
                        self._failed(code, batch, start_run)
                finally:
                    self.running = False
                self.last_end = time.monotonic()
                if code != 0:
                    continue
                self.failures, self.retry_at = 0, None
                # Every event up to `upto` is handled; with nothing pending, everything received is.
                self._save(self.received if not self.pending else upto)
        finally:
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
            await self.feed.close()


async def run_wake(st: ClientSettings, ns: argparse.Namespace, out: Out) -> int:
    """Run until interrupted; SIGTERM (``systemctl stop``) ends a run in
    progress with SIGTERM too, leaves its events to the next start, and exits 143."""
    import signal

    waker = Waker(st, ns, out)
    main = asyncio.current_task()
    assert main is not None
    stopped: list[int] = []

    def stop() -> None:
        stopped.append(signal.SIGTERM)
        main.cancel()

    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop)
    try:
        return await waker.loop()
    except asyncio.CancelledError:
        if not stopped:
            raise
        waker.log("stopped (SIGTERM)")
        return 128 + signal.SIGTERM
    finally:
        loop.remove_signal_handler(signal.SIGTERM)
