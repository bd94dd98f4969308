"""Who may open a connection before authenticating (issue #25 round 3, findings
1, 3 and 8; kungfud/server/door.py, docs/decisions.md D231, D232).

- A connection without a key is closed when it has not authenticated within
  ``hello_within_s``; unauthenticated connections have a budget of their own
  (at most half of ``max_connections``) and a per-address cap, so bare sockets
  never take the slots of an agent that brings a key.
- A browser's ``Origin`` must be the daemon's own or an allowed one; a daemon on
  loopback answers only a loopback ``Host`` (DNS rebinding).
- ``/metrics`` sends one ``Content-Type``.

Each worker keeps its own budgets (as its rate limits, D143): in lmdb2/pg2 mode
the tests fill and check every node's own port.
"""

from __future__ import annotations

import asyncio
import http.client
import socket
import time
import urllib.request

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from kungfud.client import Client
from tests.e2e.helpers import register

SMALL = (
    "[server]\nmax_connections = 12\nhello_within_s = 2\nmax_unauthenticated = 1000\n"
    "max_unauthenticated_per_address = 64\n"
)


async def _bare(url: str, **kw):
    """A websocket that never authenticates, or the HTTP status it was refused with."""
    try:
        return await connect(url, compression=None, open_timeout=10, **kw)
    except InvalidStatus as e:
        return e.response.status_code


def _hostport(url: str) -> tuple[str, int]:
    host, port = url.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)
    return host, int(port)


@pytest.mark.rules("R12-11")
async def test_door_unauthenticated_connection_is_closed_after_hello_within_s(make_daemon):
    d = make_daemon(SMALL)

    async def closed_in_time(url: str) -> None:
        ws = await _bare(url)
        assert not isinstance(ws, int), ws
        started = time.monotonic()
        with pytest.raises(ConnectionClosed) as e:
            await asyncio.wait_for(ws.recv(), 30)  # the library answers pings: only the daemon can end it
        assert 1.0 < time.monotonic() - started < 25
        assert e.value.rcvd is not None and e.value.rcvd.code == 1008
        assert "hello" in e.value.rcvd.reason

    async def authenticated_stays(url: str) -> None:
        # A connection that authenticates in time stays open past the deadline.
        agent, key = await register(url, "in-time")
        async with await Client.connect(url, key, auth="hello") as c:
            await asyncio.sleep(3)
            assert (await c.read("agent.whoami"))["agent"] == agent

    # Every node, and both cases, at once: each waits out its own deadline.
    await asyncio.gather(*(check(url) for url in d.urls for check in (closed_in_time, authenticated_stays)))


@pytest.mark.rules("R12-11")
async def test_door_bare_sockets_cannot_take_the_slots_of_a_keyed_agent(make_daemon):
    """The review's repro: max_connections bare sockets, then an agent with a
    valid key. Unauthenticated connections get at most half the cap, so the
    agent is let in (before: HTTP 503 for everyone)."""
    d = make_daemon(SMALL)
    _, key = await register(d.url, "victim")
    for url in d.urls:
        held = [await _bare(url) for _ in range(12)]
        open_ = [w for w in held if not isinstance(w, int)]
        assert len(open_) <= 6 and all(w == 503 for w in held if isinstance(w, int)), held
        async with await Client.connect(url, key) as c:  # Authorization: Bearer
            assert (await c.read("agent.whoami"))["status"] == "active"
        for w in open_:
            await w.close()


@pytest.mark.rules("R12-11")
async def test_door_one_address_has_a_cap_of_unauthenticated_connections(make_daemon):
    d = make_daemon(SMALL.replace("max_unauthenticated_per_address = 64", "max_unauthenticated_per_address = 3"))
    _, key = await register(d.url, "keyed")
    for url in d.urls:
        held = [await _bare(url) for _ in range(5)]
        assert [isinstance(w, int) for w in held] == [False, False, False, True, True], held
        assert held[3] == 503
        # A keyed upgrade from the same address is not counted against it ...
        async with await Client.connect(url, key) as c:
            assert (await c.read("agent.whoami"))["status"] == "active"
        # ... and a connection that authenticates gives its slot back.
        await held[0].send('{"id":1,"op":"hello","args":{"key":"%s"}}' % key)
        assert '"ok":true' in await asyncio.wait_for(held[0].recv(), 10)
        again = await _bare(url)
        assert not isinstance(again, int), again
        for w in [*held[:3], again]:
            await w.close()


@pytest.mark.rules("L6-4")
async def test_door_foreign_origin_is_refused_and_the_console_origin_is_not(make_daemon):
    d = make_daemon('[server]\nallowed_origins = ["https://console.example"]\n')
    for url in d.urls:
        host, port = _hostport(url)
        assert await _bare(url, origin="http://evil.example") == 403
        assert await _bare(url, origin=f"http://localhost:{port + 1}") == 403  # another port is another origin
        for ok in (f"http://{host}:{port}", "https://console.example"):
            ws = await _bare(url, origin=ok)
            assert not isinstance(ws, int), (ok, ws)
            await ws.send('{"id":1,"op":"agent.register","key":"k-%s","args":{"content":{"name":"x"}}}' % ok[-8:])
            assert '"ok":true' in await asyncio.wait_for(ws.recv(), 10)
            await ws.close()
        # No Origin (CLI, library, MCP bridge, agents): unaffected.
        agent, key = await register(url, "no-origin")
        async with await Client.connect(url, key) as c:
            assert (await c.read("agent.whoami"))["agent"] == agent


@pytest.mark.rules("L6-4")
def test_door_loopback_daemon_refuses_a_foreign_host_dns_rebinding(make_daemon):
    d = make_daemon('[server]\nallowed_hosts = ["kungfu.internal"]\n')
    host, port = _hostport(d.url)
    for sent, status in (
        (f"evil.example:{port}", 421), ("evil.example", 421), (f"localhost:{port}", 200),
        (f"127.0.0.1:{port}", 200), (f"kungfu.internal:{port}", 200),
    ):
        for path in ("/", "/metrics", "/v1"):
            conn = http.client.HTTPConnection(host, port, timeout=10)
            conn.putrequest("GET", path, skip_host=True)
            conn.putheader("Host", sent)
            conn.endheaders()
            r = conn.getresponse()
            body = r.read()
            expected = status if path != "/v1" or status == 421 else 426  # /v1 without an upgrade: 426
            assert r.status == expected, (sent, path, r.status, body)
            conn.close()
    assert urllib.request.urlopen(f"http://{host}:{port}/healthz", timeout=10).status == 200  # noqa: S310


def test_door_metrics_sends_one_content_type(daemon):
    host, port = _hostport(daemon.url)
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as r:  # noqa: S310 (loopback)
        assert r.headers.get_all("Content-Type") == ["text/plain; version=0.0.4; charset=utf-8"]


@pytest.mark.rules("R12-11")
async def test_door_by_default_a_bare_socket_is_closed_within_a_few_seconds(daemon):
    ws = await _bare(daemon.url)
    assert not isinstance(ws, int), ws
    started = time.monotonic()
    with pytest.raises(ConnectionClosed) as e:
        await asyncio.wait_for(ws.recv(), 30)
    assert time.monotonic() - started < 20  # hello_within_s = 5 by default
    assert e.value.rcvd is not None and e.value.rcvd.code == 1008


@pytest.mark.rules("R12-11", "L4-5")
async def test_door_a_connection_that_keeps_registering_is_not_cut_off_but_bad_frames_buy_no_time(make_daemon):
    """D231: a provisioning script may register agents one after another on one
    connection for longer than ``hello_within_s``: each admitted registration
    moves the deadline. A frame that costs nothing (a bad one, a read before
    hello) does not."""
    d = make_daemon(SMALL)
    url = d.url

    async def keeps_registering() -> None:
        async with Client.connect(url) as c:  # no key
            started = time.monotonic()
            n = 0
            while time.monotonic() - started < 5:  # well past hello_within_s = 2
                await c.act("agent.register", {"content": {"name": f"p{n}"}})
                n += 1
                await asyncio.sleep(0.4)
            assert n >= 5

    async def bad_frames_buy_no_time() -> None:
        ws = await _bare(url)
        started = time.monotonic()
        with pytest.raises(ConnectionClosed) as e:
            while True:
                await ws.send('{"id":1,"op":"agent.whoami","args":{}}')
                await asyncio.wait_for(ws.recv(), 30)
                await asyncio.sleep(0.3)
        assert time.monotonic() - started < 20 and e.value.rcvd is not None and e.value.rcvd.code == 1008

    await asyncio.gather(keeps_registering(), bad_frames_buy_no_time())  # side by side, each on its own connection


def _raw_status(host: str, port: int, request: str) -> tuple[int, bytes]:
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(request.encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    return int(data.split(b" ", 2)[1]), data


@pytest.mark.rules("L6-4")
def test_door_a_header_the_daemon_reads_sent_twice_is_a_400_with_no_traceback(daemon):
    """Security review round 4, item 6: two Host, Origin or Authorization (or
    traceparent) headers — on the upgrade, the console, /metrics — answer 400
    naming the header, before authentication, and the daemon logs no traceback."""
    host, port = _hostport(daemon.url)
    here = f"127.0.0.1:{port}"
    upgrade = "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
    def tracebacks() -> int:
        return sum(p.read_text(errors="replace").count("Traceback") for p in daemon.log_paths)

    before = tracebacks()
    for path, extra in (("/v1", upgrade), ("/", ""), ("/metrics", "")):
        for name, value in (
            ("Host", here), ("Origin", f"http://{here}"), ("Authorization", "Bearer kf_x"),
            ("authorization", "Bearer kf_y"), ("traceparent", "00-" + "1" * 32 + "-" + "2" * 16 + "-01"),
        ):
            first = "" if name == "Host" else f"{name}: {value}\r\n"
            req = f"GET {path} HTTP/1.1\r\nHost: {here}\r\n{first}{name}: {value}\r\n{extra}\r\n"
            status, data = _raw_status(host, port, req)
            assert status == 400, (path, name, data)
            assert name.lower().encode() in data.lower(), data
    # one of each is fine
    status, _ = _raw_status(host, port, f"GET / HTTP/1.1\r\nHost: {here}\r\nOrigin: http://{here}\r\n\r\n")
    assert status == 200
    time.sleep(0.5)
    assert tracebacks() == before
