"""Node mechanisms for nodes on one PostgreSQL store (possibly on many hosts).

- :class:`NotifyBus`: ``NOTIFY kungfud_nodes`` after a local commit (sent by a
  thread of its own that merges what queued meanwhile, so the writer never
  waits on it), ``LISTEN`` on a connection of its own with a listener thread.
  After PostgreSQL restarts the listener reconnects and listens again, and
  calls ``on_remote(0, None, True)``: notifications sent meanwhile are lost.
- :class:`AdvisoryLease`: ``pg_try_advisory_lock`` on a dedicated session. The
  server releases it when the session ends (the node died, or PostgreSQL
  restarted): a lost session is a lost lease, and the next ``try_acquire``
  connects again and tries to take it.

A payload is at most 8000 bytes (PostgreSQL's limit); the agents are left out
(None: "maybe anyone") beyond that or beyond ``MAX_AGENTS``.

What a node saw (``last_seen_at``, D175) goes on the same channel as a JSON
object ``{"node": …, "seen": {agent: ms}}`` (a commit announcement is an
array), split into payloads of at most 8000 bytes, sent by the same sender
thread (kept for the next try while PostgreSQL is away). An empty ``seen`` is
a node's hello, sent by the listener once it listens (again, after a
reconnect) if the server asked for it (D177).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
from typing import Mapping, Sequence

import psycopg

from ..conventions import merge_latest
from . import MAX_AGENTS, Nodes, OnRemote, OnSeen, seen_messages

__all__ = ["NotifyBus", "AdvisoryLease", "pg_nodes", "CHANNEL", "LOCK_DEADLINES"]

log = logging.getLogger("kungfud.nodes")

CHANNEL = "kungfud_nodes"
#: The deadline lease (session advisory lock); beside the store's own keys
#: (kungfud/store/postgres/schema.py: "kfd" + a number).
LOCK_DEADLINES = 0x6B6664_0100
#: The webhook runner's shard leases (D213): LOCK_FAMILIES[name] + shard.
LOCK_FAMILIES = {"webhooks": 0x6B6664_0200, "a2a_push": 0x6B6664_0300}  # + A2A push shards (WIRE.md 1.3)
MAX_PAYLOAD = 8000
RECONNECT_S = 0.5
CHECK_S = 1.0  # a held lease's session is checked at most this often
CONNECT_TIMEOUT_S = 3


def _connect(url: str) -> psycopg.Connection:
    # The pid in the session's name lets an operator (and the tests) see which node holds the lease.
    return psycopg.connect(
        url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S, application_name=f"kungfud-node-{os.getpid()}"
    )


def payload(node: str, seq: int, agents: Sequence[str] | None, dues: bool) -> str:
    if agents is not None and len(agents) > MAX_AGENTS:
        agents = None
    text = json.dumps([node, seq, None if agents is None else list(agents), dues], separators=(",", ":"))
    if len(text.encode()) > MAX_PAYLOAD:
        text = json.dumps([node, seq, None, dues], separators=(",", ":"))
    return text


def _seen_payload(node: str, seen: Mapping[str, int]) -> bytes:
    return json.dumps({"node": node, "seen": seen}, separators=(",", ":")).encode()


def seen_payloads(node: str, seen: Mapping[str, int]) -> list[str]:
    """What ``node`` saw, as NOTIFY payloads of at most ``MAX_PAYLOAD`` bytes."""
    return [data.decode() for data in seen_messages(seen, lambda part: _seen_payload(node, part), MAX_PAYLOAD)]


def hello_payload(node: str) -> str:
    """A node's hello: it saw nothing yet and asks for all the others saw."""
    return _seen_payload(node, {}).decode()


def _seen_of(message: dict) -> dict[str, int] | None:
    """The ``seen`` map of a received message, or None if it is not one."""
    seen = message.get("seen")
    if not isinstance(seen, dict):
        return None
    return {a: ms for a, ms in seen.items() if isinstance(ms, int) and not isinstance(ms, bool)}


class NotifyBus:
    def __init__(self, url: str):
        self.url = url
        self.node = f"{os.getpid()}-{os.urandom(4).hex()}"  # this node's own notifications are skipped
        self._cond = threading.Condition()
        self._seq = 0
        self._agents: set[str] | None = set()
        self._dues = False
        self._pending = False
        self._seen: dict[str, int] = {}  # what this node saw, not sent yet
        self._hello = False  # the server asked for the others' maps (sent on every LISTEN)
        self._greet = False  # the sender is to send the hello
        self._closed = False
        self._sender: threading.Thread | None = None  # started with the listener: a bus never started sends nothing
        self._listener: threading.Thread | None = None
        self._listen_conn: psycopg.Connection | None = None
        self.sent = self.received = self.reconnects = 0

    # --- announcing -------------------------------------------------------------------

    def announce(self, seq: int, agents: Sequence[str], dues: bool) -> None:
        with self._cond:
            self._seq = max(self._seq, seq)
            if self._agents is not None:
                self._agents.update(agents)
                if len(self._agents) > MAX_AGENTS:
                    self._agents = None
            self._dues = self._dues or dues
            self._pending = True
            self._cond.notify()

    def announce_seen(self, seen: Mapping[str, int]) -> None:
        if not seen:
            return
        with self._cond:
            self._keep(seen)
            self._cond.notify()

    def _keep(self, seen: Mapping[str, int]) -> None:
        """Merge ``seen`` into what waits to be sent, by max (under the lock)."""
        merge_latest(self._seen, seen)

    def hello(self) -> None:
        self._hello = True
        if self._listen_conn is not None:  # listening already: the sender asks now
            with self._cond:
                self._greet = True
                self._cond.notify()
        # else the listener asks once it listens (and again after each reconnect)

    def _send_loop(self) -> None:
        conn: psycopg.Connection | None = None
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._pending or self._seen or self._greet or self._closed)
                if self._closed and not (self._pending or self._seen):
                    break
                texts = [hello_payload(self.node)] if self._greet else []
                self._greet = False
                if self._pending:
                    seq, agents, dues = self._seq, self._agents, self._dues
                    self._agents, self._dues, self._pending = set(), False, False
                    texts.append(payload(self.node, seq, None if agents is None else sorted(agents), dues))
                seen, self._seen = self._seen, {}
            if seen:
                texts += seen_payloads(self.node, seen)
            try:
                if conn is None or conn.closed:
                    conn = _connect(self.url)
                for text in texts:
                    conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, text))
                    self.sent += 1
            except psycopg.Error:
                # PostgreSQL is away: the others' safety poll covers a commit
                # announcement; what this node saw is kept for the next try.
                if conn is not None:
                    conn.close()
                conn = None
                with self._cond:
                    if not self._closed:
                        self._keep(seen)
                    self._cond.wait_for(lambda: self._closed, timeout=RECONNECT_S)
        if conn is not None:
            conn.close()

    # --- listening --------------------------------------------------------------------

    def start(self, on_remote: OnRemote, on_seen: OnSeen | None = None) -> None:
        self._sender = threading.Thread(target=self._send_loop, name="kungfud-notify", daemon=True)
        self._sender.start()
        self._listener = threading.Thread(
            target=self._listen_loop, args=(on_remote, on_seen), name="kungfud-listen", daemon=True
        )
        self._listener.start()

    def _listen_loop(self, on_remote: OnRemote, on_seen: OnSeen | None) -> None:
        first = True
        while not self._closed:
            conn: psycopg.Connection | None = None
            try:
                conn = _connect(self.url)
                conn.execute(f"LISTEN {CHANNEL}")
                self._listen_conn = conn
                if self._hello:  # listening now: the others' answers reach this node
                    conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, hello_payload(self.node)))
            except psycopg.Error:
                self._listen_conn = None
                if conn is not None:
                    conn.close()
                time.sleep(RECONNECT_S)
                continue
            if not first:  # notifications sent while we were away are lost
                self.reconnects += 1
                self._deliver(on_remote, 0, None, True)
            first = False
            try:
                while not self._closed:
                    for n in conn.notifies(timeout=1.0):
                        try:
                            message = json.loads(n.payload)
                            if isinstance(message, dict):  # what another node saw
                                if message.get("node") != self.node and (seen := _seen_of(message)) is not None:
                                    self.received += 1
                                    self._deliver_seen(on_seen, seen or None)
                                continue
                            node, seq, agents, dues = message
                        except (ValueError, TypeError):
                            continue
                        if node != self.node:
                            self.received += 1
                            self._deliver(on_remote, seq, agents, dues)
            except psycopg.Error:
                pass
            finally:
                conn.close()
                self._listen_conn = None

    @staticmethod
    def _deliver(on_remote: OnRemote, seq: int, agents: list[str] | None, dues: bool) -> None:
        try:
            on_remote(seq, agents, dues)
        except Exception:
            log.exception("handling a remote announcement failed")

    @staticmethod
    def _deliver_seen(on_seen: OnSeen | None, seen: dict[str, int] | None) -> None:
        if on_seen is None:
            return
        try:
            on_seen(seen)
        except Exception:
            log.exception("handling what another node saw failed")

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        with contextlib.suppress(OSError, psycopg.Error, AttributeError):  # the listener wakes now, not at its 1 s timeout
            with socket.socket(fileno=os.dup(self._listen_conn.fileno())) as s:  # type: ignore[union-attr]
                s.shutdown(socket.SHUT_RDWR)
        if self._sender is not None:
            self._sender.join(timeout=5)
        if self._listener is not None:
            self._listener.join(timeout=5)


class AdvisoryLease:
    def __init__(self, url: str, key: int = LOCK_DEADLINES):
        self.url = url
        self.key = key
        self._conn: psycopg.Connection | None = None
        self._held = False
        self._checked = 0.0

    def try_acquire(self) -> bool:
        now = time.monotonic()
        try:
            if self._held:
                if now - self._checked >= CHECK_S:
                    self._checked = now
                    self._conn.execute("SELECT 1")  # type: ignore[union-attr]
                return True
            if self._conn is None or self._conn.closed:
                self._conn = _connect(self.url)
            row = self._conn.execute("SELECT pg_try_advisory_lock(%s)", (self.key,)).fetchone()
            self._held = bool(row and row[0])
            self._checked = now
            return self._held
        except psycopg.Error:
            self._drop()  # a lost session is a lost lease
            return False

    def _drop(self) -> None:
        self._held = False
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:
                pass
        self._conn = None

    def release(self) -> None:
        self._drop()  # ending the session releases its advisory locks


def pg_nodes(url: str) -> Nodes:
    """The mechanisms of one node on the PostgreSQL store ``url``."""
    return Nodes(
        NotifyBus(url), AdvisoryLease(url), shared=True,
        lease_for=lambda name, n: AdvisoryLease(url, LOCK_FAMILIES[name] + n),
    )
