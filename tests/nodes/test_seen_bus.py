"""The "seen" messages of the node bus (``last_seen_at`` shared across nodes,
docs/decisions.md D175–D177; WIRE.md "Operating a deployment",
``admin.agent.list``): what a node saw, ``{agent: ms}``, split into messages of
at most 8000 bytes (the NOTIFY payload limit; the LMDB datagram is kept to the
same), reaches the other nodes and not the sender; an empty one is a node's
hello and arrives as None ("send me all you saw"); the commit announcement is
unchanged beside it."""

from __future__ import annotations

import time

import msgspec

from kungfud.nodes import SEEN_PER_MESSAGE, seen_messages
from kungfud.nodes.lmdb import MAX_DATAGRAM, SocketBus, encode
from kungfud.nodes.pg import MAX_PAYLOAD, NotifyBus, seen_payloads
from kungfud.server.seen import SHARE_MOST
from tests.cluster import wait_for
from tests.pg import pg_server  # noqa: F401 (fixture)

LONGEST = "ag_" + "z" * 60  # the longest agent id the wire allows


def _many(n: int, base: int = 1_764_504_000_000) -> dict[str, int]:
    return {f"{LONGEST[:-6]}{i:06d}": base + i for i in range(n)}


def _merged(messages: list[dict]) -> dict:
    out: dict = {}
    for m in messages:
        out.update(m)
    return out


def test_seen_messages_are_capped_in_size_and_carry_every_entry():
    seen = _many(1000)
    messages = seen_messages(seen, msgspec.json.encode, 8000)
    assert all(len(m) <= 8000 for m in messages)
    assert _merged([msgspec.json.decode(m) for m in messages]) == seen
    assert len(messages) == -(-1000 // SEEN_PER_MESSAGE)  # the longest ids fit SEEN_PER_MESSAGE a message
    small = seen_messages(seen, msgspec.json.encode, 500)  # halved until each fits
    assert all(len(m) <= 500 for m in small) and _merged([msgspec.json.decode(m) for m in small]) == seen
    assert seen_messages({LONGEST: 1}, msgspec.json.encode, 10) == []  # one entry too big alone: left out
    assert seen_messages({}, msgspec.json.encode, 8000) == []  # nothing seen: no message (an empty one is a hello)


def test_pg_payloads_of_a_full_share_fit_notify():
    payloads = seen_payloads("node-1", _many(SHARE_MOST))
    assert all(len(p.encode()) <= MAX_PAYLOAD for p in payloads) and len(payloads) == SHARE_MOST // SEEN_PER_MESSAGE
    assert _merged([msgspec.json.decode(p)["seen"] for p in payloads]) == _many(SHARE_MOST)


def _lmdb_bus(d: str, name: str) -> tuple[SocketBus, list, list]:
    remote, seen = [], []
    bus = SocketBus(d, name=name)
    bus.start(lambda *a: remote.append(a), seen.append)
    return bus, remote, seen


def test_lmdb_seen_and_hello_reach_the_sibling_beside_commit_announcements(tmp_path):
    d = str(tmp_path)
    a, remote_a, seen_a = _lmdb_bus(d, "a")
    b, remote_b, seen_b = _lmdb_bus(d, "b")
    try:
        assert encode(5, ["ag_x"], True) == msgspec.msgpack.encode((5, ["ag_x"], True))  # unchanged bytes
        a.announce(5, ["ag_x"], True)
        full = _many(SHARE_MOST)  # one whole share: several datagrams, each under the cap
        a.announce_seen(full)
        assert wait_for(lambda: remote_b and _merged(seen_b) == full, 5), (remote_b, len(seen_b))
        assert remote_b == [(5, ["ag_x"], True)]
        assert len(seen_b) == SHARE_MOST // SEEN_PER_MESSAGE
        a.announce_seen({})  # nothing seen: nothing sent (an empty message would be a hello)
        b.hello()
        assert wait_for(lambda: seen_a == [None], 5), seen_a
        time.sleep(0.2)
        assert len(seen_b) == SHARE_MOST // SEEN_PER_MESSAGE and remote_a == []  # nobody hears itself
    finally:
        a.close()
        b.close()
    assert MAX_DATAGRAM <= 8000


def _pg_bus(url: str) -> tuple[NotifyBus, list, list]:
    remote, seen = [], []
    bus = NotifyBus(url)
    bus.start(lambda *a: remote.append(a), seen.append)
    return bus, remote, seen


def test_pg_seen_and_hello_reach_the_other_node_and_not_the_sender(pg_server):
    url = pg_server.new_database()
    a, remote_a, seen_a = _pg_bus(url)
    b, remote_b, seen_b = _pg_bus(url)
    try:
        assert wait_for(lambda: a._listen_conn is not None and b._listen_conn is not None, 10)
        time.sleep(0.2)  # LISTEN has run
        full = _many(SHARE_MOST)
        a.announce(7, ["ag_x"], False)
        a.announce_seen(dict(list(full.items())[:10]))
        a.announce_seen(full)  # merged with what waits, by max
        assert wait_for(lambda: remote_b and _merged([s for s in seen_b if s]) == full, 10), (remote_b, len(seen_b))
        assert remote_b == [(7, ["ag_x"], False)]
        b.hello()  # listening already: the hello goes at once
        assert wait_for(lambda: None in seen_a, 5), seen_a
        time.sleep(0.3)
        assert remote_a == [] and [s for s in seen_a if s] == []  # a hears nothing of its own
        assert None not in seen_b
    finally:
        a.close()
        b.close()


def test_pg_a_node_that_asked_says_hello_again_when_it_listens_again(pg_server):
    """After PostgreSQL restarts, what the others shared meanwhile is lost: a
    node that asked asks again once it listens again (D177). Both ask, so the
    one that listens again last is heard by the other."""
    url = pg_server.new_database()
    a, _, seen_a = _pg_bus(url)
    b, _, seen_b = _pg_bus(url)
    try:
        assert wait_for(lambda: a._listen_conn is not None and b._listen_conn is not None, 10)
        time.sleep(0.2)
        a.hello()
        b.hello()
        assert wait_for(lambda: seen_a.count(None) == 1 and seen_b.count(None) == 1, 5), (seen_a, seen_b)
        pg_server.restart()
        assert wait_for(lambda: seen_a.count(None) + seen_b.count(None) >= 3, 20), (seen_a, seen_b)
    finally:
        a.close()
        b.close()
