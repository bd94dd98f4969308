"""Webhooks (WIRE.md 1.2), the parts without a daemon: the signature checked
by an independent implementation of Standard Webhooks and against the
convention's published example; the retry schedule and the disabled state on a
fake clock; which URLs and addresses are refused (before and after DNS)."""

from __future__ import annotations

import asyncio
import base64
import ipaddress
from datetime import datetime, timezone

import pytest

from kungfud.actors.hooks import Cursor
from kungfud.core.webhook import address_refused, secret_of, url_refusal
from kungfud.webhooks import guard
from kungfud.webhooks.schedule import Schedule
from kungfud.webhooks.sign import headers, signature

# --- signature -------------------------------------------------------------------


def test_signature_verifies_with_the_standardwebhooks_package():
    sw = pytest.importorskip("standardwebhooks.webhooks")
    key = bytes(range(32))
    body = b'{"agent":"ag_x","seq":7,"event":"turn","data":{"added":[],"ended":[]}}'
    ts = int(datetime.now(timezone.utc).timestamp())
    h = headers(key, "ag_x.7", ts, body)
    verifier = sw.Webhook(secret_of(key))
    assert verifier.verify(body, h) == {"agent": "ag_x", "seq": 7, "event": "turn", "data": {"added": [], "ended": []}}
    # The package's own signing agrees byte for byte.
    assert verifier.sign("ag_x.7", datetime.fromtimestamp(ts, timezone.utc), body.decode()) == h["webhook-signature"]
    # And a changed body, id or timestamp fails.
    with pytest.raises(sw.WebhookVerificationError):
        verifier.verify(body + b" ", h)
    with pytest.raises(sw.WebhookVerificationError):
        verifier.verify(body, {**h, "webhook-id": "ag_x.8"})


def test_signature_matches_the_published_example():
    """The example of the Standard Webhooks specification (spec/standard-webhooks.md,
    "Signature scheme"): secret MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw, id
    msg_p5jXN8AQM9LWM0D4loKWxJek, timestamp 1614265330, body {"test": 2432232314}."""
    key = base64.b64decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
    got = signature(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, b'{"test": 2432232314}')
    assert got == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_secret_is_whsec_and_base64_of_32_bytes():
    s = secret_of(b"\x01" * 32)
    assert s.startswith("whsec_") and base64.b64decode(s[6:]) == b"\x01" * 32


# --- schedule (fake clock: times are ms passed in) ---------------------------------


def test_pauses_grow_then_repeat_every_30_minutes():
    s = Schedule()
    assert [s.pause_ms(n) for n in range(1, 9)] == [1000, 5000, 30000, 120000, 600000, 1800000, 1800000, 1800000]


def test_failing_then_disabled_after_24_hours_and_delivered_resets():
    s = Schedule()
    c = Cursor("wh_1", 10)
    assert s.next_at(c) == 0
    now = 1_000_000
    c = s.failed(c, now, "HTTP 500")
    assert (c.failing_since, c.attempts, c.last_error, c.disabled_at) == (now, 1, "HTTP 500", 0)
    assert s.next_at(c) == now + 1000
    c = s.failed(c, now + 1000, "no answer within 10 s")
    assert s.next_at(c) == now + 1000 + 5000 and c.failing_since == now
    c = s.failed(c, now + 86_400_000 - 1, "HTTP 500")
    assert c.disabled_at == 0  # not yet 24 h of failing
    c = s.failed(c, now + 86_400_000, "HTTP 500")
    assert c.disabled_at == now + 86_400_000
    ok = s.delivered(s.failed(Cursor("wh_1", 10), now, "x"), 12, now + 5)
    assert (ok.delivered, ok.failing_since, ok.attempts) == (12, 0, 0)


def test_shortened_schedule_for_tests():
    s = Schedule((0.1,), 0.5)
    c = s.failed(Cursor("wh", 0), 0, "x")
    assert s.next_at(c) == 100
    assert s.failed(c, 500, "x").disabled_at == 500


# --- which URLs and addresses ------------------------------------------------------


@pytest.mark.parametrize(
    "addr", ["169.254.169.254", "127.0.0.1", "::1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "100.64.0.1",
             "0.0.0.0", "224.0.0.1", "fe80::1", "fc00::1", "::ffff:127.0.0.1", "ff02::1"],
)
def test_non_public_addresses_are_refused(addr):
    assert address_refused(ipaddress.ip_address(addr))


@pytest.mark.parametrize("addr", ["93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946", "8.8.8.8"])
def test_public_addresses_pass(addr):
    assert not address_refused(ipaddress.ip_address(addr))


@pytest.mark.parametrize(
    "addr",
    [
        "64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe", "64:ff9b::a00:1",  # NAT64 well-known prefix (RFC 6052)
        "2002:7f00:1::", "2002:a9fe:a9fe::1", "2002:c0a8:101::",  # 6to4: loopback, metadata, private
        "::127.0.0.1", "::7f00:1", "::10.0.0.1",  # IPv4-compatible
        "::ffff:0:7f00:1", "::ffff:0:a9fe:a9fe",  # IPv4-translated (SIIT)
        "64:ff9b:1::808:808",  # local-use NAT64 (RFC 8215): the network's own translator
    ],
)
def test_ipv6_forms_embedding_a_non_public_ipv4_address_are_refused(addr):
    """issue 35 item 7 (reviews/security.md, observations): Python calls these
    global, but a NAT64 gateway or a 6to4 tunnel takes them to the IPv4
    address they embed; they are judged by it, like ::ffff: (D327)."""
    assert address_refused(ipaddress.ip_address(addr))
    assert url_refusal(f"https://[{addr}]/h", ()) is not None


@pytest.mark.parametrize("addr", ["64:ff9b::808:808", "2002:808:808::", "::ffff:8.8.8.8"])
def test_ipv6_forms_embedding_a_public_ipv4_address_pass(addr):
    assert not address_refused(ipaddress.ip_address(addr))


def test_a_name_resolving_to_an_embedded_loopback_is_refused():
    async def go():
        loop = asyncio.get_running_loop()

        async def fake(host, port, **kw):
            return [(10, 1, 6, "", ("64:ff9b::7f00:1", port, 0, 0))]

        loop.getaddrinfo = fake  # type: ignore[method-assign]
        with pytest.raises(guard.Refused, match="allow_hosts"):
            await guard.resolve("nat64.example", 443, ())

    asyncio.run(go())


@pytest.mark.parametrize(
    "url, part",
    [
        ("ftp://example.com/x", "https://"),
        ("http://example.com/x", "allow_hosts"),
        ("https://169.254.169.254/latest/meta-data", "allow_hosts"),
        ("https://[::1]/x", "allow_hosts"),
        ("https://10.0.0.5/x", "allow_hosts"),
        ("https://localhost/x", "allow_hosts"),
        ("https://user:pw@example.com/x", "user name"),
        ("https:///x", "no host"),
        ("https://example.com:99999/x", "not a valid URL"),
    ],
)
def test_url_refusals_name_the_reason(url, part):
    reason = url_refusal(url, ())
    assert reason is not None and part in reason


def test_allowed_hosts_may_be_loopback_and_http():
    assert url_refusal("http://127.0.0.1:9/x", ("127.0.0.1:9",)) is None
    assert url_refusal("http://localhost:9/x", ("localhost:*",)) is None
    assert url_refusal("http://localhost/x", ("localhost",)) is None
    assert url_refusal("https://example.com/hook", ()) is None


@pytest.mark.parametrize(
    "entries, url, ok",
    [
        (("127.0.0.1:8080",), "http://127.0.0.1:8080/h", True),
        (("127.0.0.1:8080",), "http://127.0.0.1:8081/h", False),  # another port of the allowed host
        (("127.0.0.1:8080",), "http://127.0.0.1/h", False),
        (("127.0.0.1",), "http://127.0.0.1/h", True),  # a bare host: every port (WIRE.md 1.2's example)
        (("127.0.0.1",), "http://127.0.0.1:7733/v1", True),  # ... its failures told as "failed" only
        (("127.0.0.1",), "http://127.0.0.2:7733/v1", False),
        (("127.0.0.1:*",), "http://127.0.0.1:5432/h", True),  # every port, said explicitly
        (("HOOKS.internal:9000",), "http://hooks.internal:9000/h", True),
        (("[::1]:9000",), "http://[::1]:9000/h", True),
        (("[::1]:9000",), "http://[::1]:9001/h", False),
        (("::1",), "https://[::1]/h", True),
        (("10.0.0.5:443",), "https://10.0.0.5/h", True),
        (("10.0.0.5:443",), "https://10.0.0.5:444/h", False),
    ],
)
def test_an_allowed_host_is_open_on_its_listed_ports_only(entries, url, ok):
    """reviews/security.md round 4 finding 3: an allow_hosts entry opened every
    port and path of its host to every agent (the daemon's own port, a
    database). An entry may name the port it trusts; a bare host keeps
    WIRE.md 1.2's meaning, every port, and its failures are told as "failed"
    only (D328)."""
    assert (url_refusal(url, entries) is None) is ok


@pytest.mark.parametrize("entry", ["", "http://x", "x:0", "x:70000", "x:y", "[::1", "[::1]x", "a b", "u@x", "x/p"])
def test_a_malformed_allow_hosts_entry_is_a_config_error(entry, tmp_path):
    from kungfud.config import ConfigError, load
    from kungfud.core.webhook import allow_entry

    assert allow_entry(entry) is None
    p = tmp_path / "k.toml"
    p.write_text(f"[webhooks]\nallow_hosts = [{entry!r}]\n".replace("'", '"'))
    with pytest.raises(ConfigError, match="allow_hosts"):
        load(str(p))


def test_a_name_resolving_to_loopback_is_refused_unless_listed():
    async def go():
        loop = asyncio.get_running_loop()

        async def fake(host, port, **kw):
            return [(2, 1, 6, "", ("127.0.0.1", port))]

        loop.getaddrinfo = fake  # type: ignore[method-assign]
        with pytest.raises(guard.Refused, match="allow_hosts"):
            await guard.resolve("rebind.example", 443, ())
        assert await guard.resolve("rebind.example", 443, ("rebind.example",)) == "127.0.0.1"
        assert await guard.set_refusal("https://rebind.example/h", ()) is not None
        assert await guard.set_refusal("https://rebind.example/h", ("rebind.example",)) is None

    asyncio.run(go())


def test_a_name_with_any_private_address_is_refused():
    async def go():
        loop = asyncio.get_running_loop()

        async def fake(host, port, **kw):
            return [(2, 1, 6, "", ("93.184.216.34", port)), (2, 1, 6, "", ("10.0.0.1", port))]

        loop.getaddrinfo = fake  # type: ignore[method-assign]
        with pytest.raises(guard.Refused, match="not public") as refused:
            await guard.resolve("mixed.example", 443, ())
        # The address is the operator's to read, not the agent's (D329): no internal DNS map.
        assert "10.0.0.1" not in str(refused.value) and refused.value.detail == "resolves to 10.0.0.1"

    asyncio.run(go())


def test_real_localhost_resolution_is_refused():
    async def go():
        with pytest.raises(guard.Refused):
            await guard.resolve("localhost", 80, ())

    asyncio.run(go())


def test_the_receivers_stdlib_check_in_docs_webhooks_md_accepts_ours_and_refuses_a_change():
    """docs/webhooks.md's verification code (standard library only), run as written."""
    import re
    import time
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "webhooks.md").read_text()
    # the section's own code ("Verify, then dedupe"); the try-it box's receiver reads the secret from its environment
    code = next(b for b in re.findall(r"```python\n(.*?)```", doc, re.S) if "def verified" in b and 'SECRET = "whsec_' in b)
    key = bytes(range(32))
    ns: dict = {}
    exec(code.replace('SECRET = "whsec_…"', f'SECRET = "{secret_of(key)}"'), ns)
    body = b'{"agent":"ag_x","seq":3,"event":"turn","data":{}}'
    h = headers(key, "ag_x.3", int(time.time()), body)
    assert ns["verified"](h, body)
    assert not ns["verified"](h, body.replace(b"3", b"4"))
    assert not ns["verified"]({**h, "webhook-timestamp": str(int(time.time()) - 3600)}, body)


# --- one POST: redirects, timeout, bounded answer (a local server, allowed) ----------


def _serve_once(answer: bytes, delay: float = 0.0):
    async def handler(reader, writer):
        try:
            await reader.readuntil(b"\r\n\r\n")
            if delay:
                await asyncio.sleep(delay)
            writer.write(answer)
            await writer.drain()
        except Exception:
            pass
        finally:
            writer.close()

    return asyncio.start_server(handler, "127.0.0.1", 0)


def _post_to(answer: bytes, delay: float = 0.0, timeout: float | None = None):
    from kungfud.webhooks import post as post_mod

    async def go():
        server = await _serve_once(answer, delay)
        port = server.sockets[0].getsockname()[1]
        client = post_mod.new_client(2)
        old = post_mod.TIMEOUT_S
        if timeout is not None:
            post_mod.TIMEOUT_S = timeout
        try:
            return await post_mod.post(client, f"http://127.0.0.1:{port}/h", (f"127.0.0.1:{port}",), b"k" * 32, "ag_x.1", 1, b"{}")
        finally:
            post_mod.TIMEOUT_S = old
            await client.aclose()
            server.close()

    return asyncio.run(go())


def test_post_2xx_is_delivered_and_a_redirect_is_not_followed():
    assert _post_to(b"HTTP/1.1 204 No Content\r\n\r\n") is None
    err = _post_to(b"HTTP/1.1 302 Found\r\nlocation: http://169.254.169.254/\r\ncontent-length: 0\r\n\r\n")
    assert err == "http_status 3xx"


def test_post_without_an_answer_in_time_fails():
    err = _post_to(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n", delay=2.0, timeout=0.3)
    assert err == "timeout"


def test_post_reads_a_bounded_part_of_a_huge_answer():
    body = b"x" * 5_000_000
    answer = b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(body) + body
    assert _post_to(answer) is None  # answered 2xx; the rest of the body is never read


def test_post_to_a_refused_address_fails_without_connecting():
    from kungfud.webhooks import post as post_mod

    async def go():
        client = post_mod.new_client(1)
        try:
            return await post_mod.post(client, "http://127.0.0.1:9/h", (), b"k", "ag_x.1", 1, b"{}")
        finally:
            await client.aclose()

    err = asyncio.run(go())
    assert err == "address_refused"


def test_a_host_open_on_every_port_shows_only_failed(caplog):
    """reviews/security.md round 4 finding 3 with 1.2's bare entry: a host that
    ``allow_hosts`` opens on every port (``"127.0.0.1"`` or ``"127.0.0.1:*"``)
    must not tell a closed port from an HTTP service: the agent reads
    ``failed``, the operator's log the category and the detail (D328)."""
    import socket

    from kungfud.webhooks import post as post_mod

    caplog.set_level("INFO", logger="kungfud.webhooks")
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]

    async def go(allow):
        client = post_mod.new_client(1)
        try:
            return await post_mod.post(client, f"http://127.0.0.1:{closed}/h", allow, b"k", "ag_x.1", 1, b"{}")
        finally:
            await client.aclose()

    assert asyncio.run(go(("127.0.0.1",))) == "failed"
    assert asyncio.run(go(("127.0.0.1:*",))) == "failed"
    assert asyncio.run(go((f"127.0.0.1:{closed}",))) == "refused"  # a listed port keeps its category
    assert any("refused" in r.getMessage() for r in caplog.records)  # the operator still reads it


def test_a_failure_tells_the_agent_a_category_and_the_operator_the_detail(caplog):
    """reviews/security.md round 4 finding 3: ``last_error`` carried the
    exception text and the status ("RemoteProtocolError (Server disconnected
    …)", "cannot connect (…)", "HTTP 501"), telling services apart. The agent
    now sees a stable category; the detail is in the operator's log (D329)."""
    import socket

    from kungfud.webhooks.post import CATEGORIES

    caplog.set_level("INFO", logger="kungfud.webhooks")
    assert _post_to(b"HTTP/1.1 501 Not Implemented\r\ncontent-length: 0\r\n\r\n") == "http_status 5xx"
    assert _post_to(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n") == "http_status 4xx"
    assert _post_to(b"") == "protocol"  # closed without an answer (a non-HTTP service, the daemon's own port)
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    from kungfud.webhooks import post as post_mod

    async def go():
        client = post_mod.new_client(1)
        try:
            return await post_mod.post(client, f"http://127.0.0.1:{closed}/h", (f"127.0.0.1:{closed}",), b"k", "ag_x.1", 1, b"{}")
        finally:
            await client.aclose()

    assert asyncio.run(go()) == "refused"
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "HTTP 501" in logged and "RemoteProtocolError" in logged and "ag_x.1" in logged
    assert set(CATEGORIES) >= {"timeout", "refused", "tls", "dns", "address_refused", "http_status 5xx"}
