"""WIRE.md "Transport" hardening (issue 6, item 7): the connection cap, a client
that floods requests and never reads, handshakes that never complete, and
compression being off.

"Nothing a client sends crashes the daemon or slows other connections": each
test keeps a second, well-behaved client asking the daemon something the whole
time and requires every answer within 5 s (a liveness bound on a shared 2-core
machine, not a speed claim).
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from kungfud.client import Client
from tests.e2e.helpers import register

from .conftest import OP_TEXT, RawWS, rss_mb

LIVENESS_S = 5.0


def _http_get(url: str, path: str) -> tuple[int, str]:
    base = url.replace("ws://", "http://").rsplit("/", 1)[0]
    with urllib.request.urlopen(base + path, timeout=10) as r:  # noqa: S310 (loopback only)
        return r.status, r.read().decode()


async def open_connections(url: str) -> int:
    """``kungfud_connections`` from GET /metrics."""
    _, text = await asyncio.to_thread(_http_get, url, "/metrics")
    [line] = [x for x in text.splitlines() if x.startswith("kungfud_connections ")]
    return int(line.split()[1])


async def until(check, within: float, what) -> None:
    """Wait until ``await check()`` — a read of the daemon's /metrics — is true,
    failing with ``what()`` after ``within`` seconds. The marker is the read: the
    daemon pushes no notice when it counts a connection or answers a request, so
    it is read again every 50 ms (the only sleep here is that poll's interval)."""
    deadline = time.monotonic() + within
    while not await check():
        assert time.monotonic() < deadline, what()
        await asyncio.sleep(0.05)


async def settle(url: str, n: int, within: float = 10.0) -> None:
    """Wait until the daemon counts exactly ``n`` open connections (a client's
    close is seen by the daemon a moment later). The same count decides
    admission (``max_connections``), so once it reads ``n`` below the cap the
    next upgrade is accepted."""
    got = None

    async def counted() -> bool:
        nonlocal got
        got = await open_connections(url)
        return got == n

    await until(counted, within, lambda: f"{got} connections open, expected {n}")


class Prober:
    """A well-behaved client asking ``agent.whoami`` every ``every`` seconds,
    recording each answer's latency."""

    def __init__(self, client: Client, every: float = 0.2):
        self.client = client
        self.every = every
        self.latencies: list[float] = []
        self.slow: list[tuple[float, float]] = []  # (time into the test, latency)
        self._task: asyncio.Task | None = None
        self._t0 = time.monotonic()

    async def _run(self) -> None:
        while True:
            t = time.monotonic()
            await asyncio.wait_for(self.client.read("agent.whoami", {}), 60)
            lat = time.monotonic() - t
            self.latencies.append(lat)
            if lat > LIVENESS_S:
                self.slow.append((round(t - self._t0, 1), round(lat, 2)))
            # Real time is the subject: a probe every `every` s for as long as
            # the hostile client runs, each answer timed.
            await asyncio.sleep(self.every)

    def start(self) -> "Prober":
        self._task = asyncio.create_task(self._run())
        return self

    async def stop(self) -> None:
        assert self._task is not None
        if self._task.done():
            self._task.result()  # re-raise a failure of the prober itself
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)

    def check(self) -> None:
        assert self.latencies, "the prober got no answer at all"
        assert not self.slow, f"another connection waited more than {LIVENESS_S}s: {self.slow[:10]}"


# --- connection cap --------------------------------------------------------------------


@pytest.mark.rules("L4-5", "R12-11")
async def test_wire_connection_cap_answers_503_and_admits_again_after_one_closes(make_daemon):
    d = make_daemon("[server]\nmax_connections = 5\n", name="cap")
    _, key = await register(d.url, "capped")
    await settle(d.url, 0)
    clients = [await Client.connect(d.url, key) for _ in range(5)]
    try:
        for attempt in range(3):  # the 6th upgrade, a few times: 503, nothing counted
            with pytest.raises(InvalidStatus) as refused:
                await connect(d.url, compression=None, open_timeout=10)
            assert refused.value.response.status_code == 503, refused.value.response
            assert b"too many connections" in bytes(refused.value.response.body or b"")
        # An unauthenticated or raw upgrade is refused the same way.
        raw = await RawWS.open_tcp(d.url)
        assert await raw.handshake(d.url, key) == 503
        raw.close()
        # The 5 that hold the slots are still served.
        for c in clients:
            assert (await c.read("agent.whoami", {}))["status"] == "active"
        await settle(d.url, 5)
        # One closes: once the daemon counts it gone (within a generous bound),
        # a new upgrade is accepted at the first attempt.
        await clients.pop().close()
        await settle(d.url, 4)
        clients.append(await Client.connect(d.url, key))
        assert (await clients[-1].read("agent.whoami", {}))["status"] == "active"
        with pytest.raises(InvalidStatus):
            await connect(d.url, compression=None, open_timeout=10)
    finally:
        for c in clients:
            await c.close()


# --- a client that never reads ------------------------------------------------------------

FLOOD_S = 40.0  # the longest the flood runs
FLOOD_REQUESTS = 12_000  # at most: ~600 MB of replies, to spare the shared machine if they are all buffered
REPLY_KB = 50
CLOSE_WITHIN_S = 60.0  # docs/wire.md: a connection that does not read its replies for 30 s is dropped
RSS_GROWTH_MB = 256  # what a flood of unread replies may cost the daemon


@pytest.mark.rules("R12-11")
@pytest.mark.parametrize("event_loop", ["auto", "asyncio"])  # uvloop where installed, and asyncio's own
async def test_wire_a_client_that_floods_and_never_reads_is_dropped_without_slowing_others(make_daemon, event_loop):
    """A raw socket sends up to 12,000 ``memory.get`` of a 50 KB Memory as
    fast as the daemon takes them and never reads a byte. Expected: the daemon
    stops taking its frames or buffers a bounded amount for it (RSS growth at
    most 256 MB), another client is answered within 5 s throughout, and the
    flooder is disconnected (docs/wire.md: after 30 s without reading)."""
    d = make_daemon(f'[server]\nevent_loop = "{event_loop}"\n', name="flood")
    owner, owner_key = await register(d.url, "owner")
    async with await Client.connect(d.url, owner_key) as c:
        memory = (await c.act("memory.create", {"content": {"blob": "b" * (REPLY_KB * 1000)}}))["memory"]
        await c.act("memory.publish", {"memory": memory})
    _, flood_key = await register(d.url, "flooder")
    prober = Prober(await Client.connect(d.url, owner_key)).start()
    await settle(d.url, 1)
    base_rss = rss_mb(d.proc.pid)
    flooder = await RawWS.connect(d.url, flood_key)
    frame = RawWS.frame(OP_TEXT, json.dumps({"id": 1, "op": "memory.get", "args": {"memory": memory}}).encode())
    sent = 0
    peak = base_rss
    flood_ended = ""
    t0 = time.monotonic()
    try:
        while time.monotonic() - t0 < FLOOD_S and sent < FLOOD_REQUESTS:
            transport = flooder.writer.transport
            if transport.is_closing():
                flood_ended = f"the daemon closed the flooder after {time.monotonic() - t0:.1f}s"
                break
            if transport.get_write_buffer_size() < 1 << 20:
                try:
                    flooder.write(frame * 50)
                    sent += 50
                except (ConnectionError, OSError) as e:
                    flood_ended = f"the daemon closed the flooder after {time.monotonic() - t0:.1f}s ({e!r})"
                    break
                await asyncio.sleep(0)  # a yield, not a wait: the prober's turn
            else:
                # The daemon is not taking more (a bounded buffer). Real time is
                # the subject: the flood lasts FLOOD_S, RSS sampled throughout.
                await asyncio.sleep(0.05)
            peak = max(peak, rss_mb(d.proc.pid))
        flood_s = time.monotonic() - t0
        # The flooder never reads: the daemon must drop it (its send timeout).
        closed_after = None
        while time.monotonic() - t0 < CLOSE_WITHIN_S + 5:
            if await open_connections(d.url) == 1:  # the prober alone
                closed_after = time.monotonic() - t0
                break
            peak = max(peak, rss_mb(d.proc.pid))
            # Real time is the subject: the daemon drops a client that has not
            # read for its send timeout (30 s); RSS is sampled while it waits.
            await asyncio.sleep(0.5)
        await prober.stop()
    finally:
        flooder.close()
    print(
        f"flood: {sent} requests (~{sent * REPLY_KB / 1000:.0f} MB of replies) sent in {flood_s:.1f}s without reading; "
        f"daemon RSS {base_rss:.0f} MB -> peak {peak:.0f} MB; "
        f"{flood_ended or 'the flooder could write until the end'}; "
        f"flooder dropped after {closed_after and round(closed_after, 1)}s; "
        f"other client: {len(prober.latencies)} answers, slowest {max(prober.latencies):.2f}s"
    )
    assert d.proc.poll() is None, "the daemon died"
    prober.check()
    assert closed_after is not None, f"the flooder was still connected after {CLOSE_WITHIN_S}s"
    assert peak - base_rss <= RSS_GROWTH_MB, (
        f"unbounded buffering: the daemon's RSS grew by {peak - base_rss:.0f} MB for one client that never reads "
        f"({sent} requests in {flood_s:.1f}s; the replies are queued without limit)"
    )
    # Still serving new connections afterwards.
    async with await Client.connect(d.url, owner_key) as c:
        assert (await c.read("agent.whoami", {}))["agent"] == owner


@pytest.mark.rules("L4-5", "L4-6")
@pytest.mark.parametrize("event_loop", ["auto", "asyncio"])
async def test_wire_actions_beyond_the_in_flight_limit_while_not_reading_are_rate_limited(make_daemon, event_loop):
    """A client pipelines 300 actions on one connection without reading, then
    reads: every request has exactly one reply; those beyond the per-connection
    in-flight limit (8 here) are ``rate_limited`` with ``next: wait`` and had no
    effect; the others took effect once."""
    d = make_daemon(
        f'[server]\nmax_in_flight = 8\nevent_loop = "{event_loop}"\n[limits]\nactions_per_minute = 1000000\n', name="inflight"
    )
    _, key = await register(d.url, "pipeliner")
    raw = await RawWS.connect(d.url, key)
    try:
        frames = b"".join(
            RawWS.frame(OP_TEXT, json.dumps({"id": i, "op": "memory.create", "key": f"k{i}", "args": {"content": {"i": i}}}).encode())
            for i in range(300)
        )
        raw.write(frames)
        await raw.writer.drain()
        # Not reading until the daemon has answered all 300 (its /metrics count
        # them: each is counted before its reply is written), however long that takes.
        answered = 0

        async def all_answered() -> bool:
            nonlocal answered
            answered = int(await _metric(d.url, 'kungfud_actions_total{op="memory.create"}', 0)) + int(
                await _metric(d.url, 'kungfud_rejections_total{code="rate_limited"}', 0)
            )
            return answered >= 300

        await until(all_answered, 60, lambda: f"the daemon answered {answered} of 300 pipelined actions")
        replies = {}
        while len(replies) < 300:
            r = json.loads(await raw.recv_text(15))
            assert r["id"] not in replies, r
            replies[r["id"]] = r
        ok = [i for i, r in replies.items() if r["ok"]]
        limited = [r for r in replies.values() if not r["ok"]]
        assert ok and limited, (len(ok), len(limited))
        assert all(r["error"]["code"] == "rate_limited" and r["error"]["next"] == "wait" for r in limited), limited[:3]
        print(f"in-flight limit 8: of 300 pipelined actions, {len(ok)} took effect and {len(limited)} were rate_limited")
    finally:
        raw.close()
    async with await Client.connect(d.url, key) as c:
        items: list = []
        cursor = None
        while True:
            page = await c.read("memory.list", {"cursor": cursor, "limit": 100})
            items += page["items"]
            cursor = page["cursor"]
            if cursor is None:
                break
        assert len(items) == len(ok)  # a rate_limited request had no effect (L4-6)


# --- handshakes that never complete ------------------------------------------------------------


async def test_wire_handshakes_that_never_complete_block_nobody_and_are_closed(make_daemon):
    d = make_daemon("[server]\nmax_connections = 20\n", name="stall")
    _, key = await register(d.url, "patient")
    stalled: list[tuple[str, RawWS]] = []
    t0 = time.monotonic()
    try:
        for i in range(30):  # more than max_connections: a pending handshake holds no slot
            raw = await RawWS.open_tcp(d.url)
            kind = ("silent", "half a request line", "headers without the blank line")[i % 3]
            if kind == "half a request line":
                raw.write(b"GET /v1 HT")
            elif kind == "headers without the blank line":
                raw.write(b"GET /v1 HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n")
            await raw.writer.drain()
            stalled.append((kind, raw))
        # Meanwhile everyone else connects and is answered.
        prober = Prober(await Client.connect(d.url, key), every=0.1).start()
        for _ in range(5):
            t = time.monotonic()
            async with await Client.connect(d.url, key, open_timeout=LIVENESS_S) as c:
                assert (await c.read("agent.whoami", {}))["status"] == "active"
            assert time.monotonic() - t < LIVENESS_S
        # The daemon gives up on each stalled handshake (open_timeout 10 s).
        closed: dict[str, list[float]] = {}

        async def wait_closed(kind: str, raw: RawWS) -> None:
            try:
                data = await asyncio.wait_for(raw.reader.read(65536), 20)
                while data:  # an HTTP error response, then EOF
                    data = await asyncio.wait_for(raw.reader.read(65536), 20)
            except (ConnectionError, OSError):
                pass
            closed.setdefault(kind, []).append(time.monotonic() - t0)

        await asyncio.gather(*(wait_closed(k, r) for k, r in stalled))
        await prober.stop()
        prober.check()
        slowest = max(max(v) for v in closed.values())
        print(f"stalled handshakes: {len(stalled)} closed by the daemon after {min(min(v) for v in closed.values()):.1f}-{slowest:.1f}s")
        assert slowest <= 15.0, closed
    finally:
        for _, raw in stalled:
            raw.close()


# --- compression ----------------------------------------------------------------------------------


async def test_wire_compression_is_off_even_when_a_client_offers_permessage_deflate(daemon):
    _, key = await register(daemon.url, "squeezer")
    ws = await connect(daemon.url, compression="deflate", additional_headers={"Authorization": f"Bearer {key}"})
    try:
        assert ws.response.headers.get("Sec-WebSocket-Extensions") is None, ws.response.headers
        assert ws.protocol.extensions == []
        await ws.send(json.dumps({"id": 1, "op": "agent.whoami", "args": {}}))
        assert json.loads(await asyncio.wait_for(ws.recv(), 10))["ok"] is True
    finally:
        await ws.close()
    raw = await RawWS.open_tcp(daemon.url)
    try:
        offer = "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits, x-webkit-deflate-frame"
        assert await raw.handshake(daemon.url, key, [offer]) == 101
        assert "sec-websocket-extensions" not in raw.headers, raw.headers
        # A frame claiming compression (RSV1) anyway is a protocol error: close 1002.
        payload = json.dumps({"id": 2, "op": "agent.whoami", "args": {}}).encode()
        frame = bytearray(RawWS.frame(OP_TEXT, payload))
        frame[0] |= 0x40
        raw.write(bytes(frame))
        await raw.writer.drain()
        assert await raw.close_code() == 1002
    finally:
        raw.close()
    async with await Client.connect(daemon.url, key) as c:  # the daemon is unaffected
        assert (await c.read("agent.whoami", {}))["status"] == "active"


# --- clients that drop their connection while backpressured (review H1) ---------------------


async def _metric(url: str, name: str, default: float | None = None) -> float:
    """One sample of /metrics (``name`` with its labels, if any); ``default``
    when the daemon has not rendered it yet (a labelled sample appears on first use)."""
    _, text = await asyncio.to_thread(_http_get, url, "/metrics")
    found = [x for x in text.splitlines() if x.startswith(name + " ")]
    if not found and default is not None:
        return default
    [line] = found
    return float(line.split()[1])


async def _overflow_then_abort(url: str, key: str, memory: str, requests: int) -> None:
    """Pipeline ``requests`` reads of a ~200 KB Memory without reading a byte,
    wait until the daemon stops taking them (its backpressure), then drop the
    TCP connection without a close handshake."""
    raw = await RawWS.connect(url, key)
    frame = RawWS.frame(OP_TEXT, json.dumps({"id": 1, "op": "memory.get", "args": {"memory": memory}}).encode())
    before = await _metric(url, "kungfud_reads_total")
    raw.write(frame * requests)
    # Backpressure has engaged when the daemon answered some reads and then
    # stopped taking this client's frames.
    deadline = time.monotonic() + 30
    last, stable_since = -1.0, time.monotonic()
    while True:
        now = await _metric(url, "kungfud_reads_total") - before
        if now != last:
            last, stable_since = now, time.monotonic()
        elif now > 0 and time.monotonic() - stable_since > 1.0:
            break
        assert time.monotonic() < deadline, "the daemon never stopped reading this client's frames"
        # Kept: "it stopped taking frames" is an absence, and the daemon shows no
        # per-connection backpressure (adding a metric would change /metrics);
        # a count unchanged for 1 s of real time is the evidence.
        await asyncio.sleep(0.1)
    assert 0 < last < requests, f"no backpressure: {last} of {requests} reads answered without the client reading"
    raw.writer.transport.abort()


@pytest.mark.rules("R12-11")
async def test_wire_clients_dropping_while_backpressured_free_their_slots_and_sigterm_still_exits(make_daemon):
    """Review H1. Three clients fill ``max_connections = 3``; each pipelines
    reads of a ~200 KB Memory without reading until the daemon stops taking its
    frames (backpressure), then drops its TCP connection. Expected (WIRE.md
    Transport: nothing a client sends slows other connections; SIGTERM exits 0):
    the slots come back, so a fresh client connects within 45 s, and SIGTERM
    then exits 0 within 10 s."""
    d = make_daemon("[server]\nmax_connections = 3\n", name="stuck")
    owner, key = await register(d.url, "owner")
    async with await Client.connect(d.url, key) as c:
        memory = (await c.act("memory.create", {"content": {"blob": "b" * 200_000}}))["memory"]
    await settle(d.url, 0)
    for _ in range(3):
        await _overflow_then_abort(d.url, key, memory, 400)
    t0 = time.monotonic()
    try:
        await settle(d.url, 0, within=45)
    except AssertionError as e:
        raise AssertionError(f"the dropped clients still hold connection slots after 45 s ({e})") from None
    async with await Client.connect(d.url, key) as c:
        assert (await c.read("agent.whoami", {}))["agent"] == owner
    print(f"a fresh client connected {time.monotonic() - t0:.1f}s after three backpressured clients dropped")
    # One more backpressured client that stays connected, then SIGTERM.
    raw = await RawWS.connect(d.url, key)
    raw.write(RawWS.frame(OP_TEXT, json.dumps({"id": 1, "op": "memory.get", "args": {"memory": memory}}).encode()) * 400)
    t0 = time.monotonic()
    try:
        assert await asyncio.to_thread(d.terminate, 10.0) == 0
    finally:
        raw.close()
    print(f"SIGTERM exited 0 in {time.monotonic() - t0:.1f}s")
