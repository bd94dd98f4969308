"""Node mechanisms for sibling workers on one LMDB data directory.

- :class:`SocketBus`: each node binds a unix datagram socket
  ``DATA_DIR/nodes/<pid>.sock``; an announcement is one small msgpack datagram
  sent, without blocking, to every other socket there. A socket nobody is bound
  to (its worker died) is removed on ``ECONNREFUSED``; a full receive buffer
  drops the datagram (the safety poll covers it). What a node saw
  (``last_seen_at``, D175) goes the same way as a msgpack map
  ``{agent: ms}`` of at most ``MAX_DATAGRAM`` bytes; an empty map is a node's
  hello (D177). A "seen" datagram a peer's full buffer refuses is kept for
  that peer (merged by max) and sent again before the next datagram to it
  (D176): delayed, not lost, while the peer lives.
- :class:`FileLease`: ``flock(LOCK_EX | LOCK_NB)`` on ``DATA_DIR/deadlines.lock``;
  the kernel releases it when its holder dies, however it dies.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import socket
import threading
import time
from typing import Mapping, Sequence

import msgspec

from ..conventions import merge_latest
from . import MAX_AGENTS, Nodes, OnRemote, OnSeen, seen_messages

__all__ = ["SocketBus", "FileLease", "lmdb_nodes"]

log = logging.getLogger("kungfud.nodes")

MAX_DATAGRAM = 8000
PEERS_TTL_S = 1.0  # the directory is listed again at most this often (new workers)

_enc = msgspec.msgpack.Encoder()
# A commit announcement is an array, a "seen" message a map.
_dec = msgspec.msgpack.Decoder(tuple[int, list[str] | None, bool] | dict[str, int])
HELLO = _enc.encode({})


def encode(seq: int, agents: Sequence[str] | None, dues: bool) -> bytes:
    """One announcement; the agents are left out (None) when there are too many."""
    if agents is not None and len(agents) > MAX_AGENTS:
        agents = None
    data = _enc.encode((seq, None if agents is None else list(agents), dues))
    if len(data) > MAX_DATAGRAM:
        data = _enc.encode((seq, None, dues))
    return data


class SocketBus:
    def __init__(self, data_dir: str, name: str | None = None):
        self.dir = os.path.join(data_dir, "nodes")
        os.makedirs(self.dir, mode=0o700, exist_ok=True)
        self.name = (name or str(os.getpid())) + ".sock"
        self.path = os.path.join(self.dir, self.name)
        try:
            os.unlink(self.path)  # a dead process's socket under a reused pid
        except FileNotFoundError:
            pass
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self._out = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._out.setblocking(False)
        self._lock = threading.Lock()  # announce may come from more than one thread
        self._peers: list[str] = []
        self._listed = 0.0
        self._closed = False
        self._thread: threading.Thread | None = None
        self.sent = self.received = self.dropped = 0
        # Per peer, what a full receive buffer refused of the "seen" shares
        # (merged by max) and whether a hello was refused: sent again first
        # at the next send to that peer (D176).
        self._unsent: dict[str, dict[str, int]] = {}
        self._unsent_hello: set[str] = set()

    def _list_peers(self) -> list[str]:
        now = time.monotonic()
        if now - self._listed > PEERS_TTL_S:
            self._listed = now
            try:
                names = os.listdir(self.dir)
            except OSError:
                names = []
            self._peers = [os.path.join(self.dir, n) for n in names if n.endswith(".sock") and n != self.name]
            for peer in set(self._unsent) - set(self._peers):  # a sibling that closed its socket
                del self._unsent[peer]
            self._unsent_hello &= set(self._peers)
        return self._peers

    def announce(self, seq: int, agents: Sequence[str], dues: bool) -> None:
        if self._closed:
            return
        self._send([encode(seq, agents, dues)])

    def announce_seen(self, seen: Mapping[str, int]) -> None:
        if not self._closed and seen:
            self._send(seen_messages(seen, _enc.encode, MAX_DATAGRAM))

    def hello(self) -> None:
        if not self._closed:
            self._send([HELLO])

    def _send(self, messages: list[bytes]) -> None:
        with self._lock:
            gone = []
            for peer in self._list_peers():
                if not self._send_to(peer, self._owed(peer) + messages):
                    gone.append(peer)
            for peer in gone:
                self._peers.remove(peer)
                self._unsent.pop(peer, None)
                self._unsent_hello.discard(peer)
                if os.path.exists(peer):
                    try:
                        os.unlink(peer)  # nobody is bound to it: its worker died
                    except OSError:
                        pass

    def _owed(self, peer: str) -> list[bytes]:
        """What ``peer``'s full buffer refused before, to go first (under the lock)."""
        owed = [HELLO] if peer in self._unsent_hello else []
        self._unsent_hello.discard(peer)
        seen = self._unsent.pop(peer, None)
        if seen:
            owed += seen_messages(seen, _enc.encode, MAX_DATAGRAM)
        return owed

    def _send_to(self, peer: str, messages: list[bytes]) -> bool:
        """Send ``messages`` to ``peer`` without blocking; False when nobody is
        bound to it any more. A "seen" message its full buffer refuses is kept
        for the next send; a commit announcement is not (the safety poll
        covers it)."""
        for data in messages:
            try:
                self._out.sendto(data, peer)
                self.sent += 1
            except OSError as e:
                if e.errno in (errno.ECONNREFUSED, errno.ENOENT):
                    return False
                self.dropped += 1  # EAGAIN (its buffer is full) and the like
                try:
                    message = _dec.decode(data)
                except msgspec.DecodeError:  # pragma: no cover - we encoded it
                    continue
                if isinstance(message, dict):
                    if message:
                        merge_latest(self._unsent.setdefault(peer, {}), message)
                    else:
                        self._unsent_hello.add(peer)
        return True

    def start(self, on_remote: OnRemote, on_seen: OnSeen | None = None) -> None:
        def run() -> None:
            while not self._closed:
                try:
                    data = self.sock.recv(65536)
                except OSError:
                    return  # closed
                if not data:  # the wake-up close() sends itself
                    continue
                try:
                    message = _dec.decode(data)
                except msgspec.DecodeError:
                    continue
                self.received += 1
                try:
                    if isinstance(message, dict):
                        if not message:
                            self._listed = 0.0  # a hello: a new sibling, to be listed at the next send
                        if on_seen is not None:
                            on_seen(message or None)
                    else:
                        on_remote(*message)
                except Exception:
                    log.exception("handling a remote announcement failed")

        self._thread = threading.Thread(target=run, name="kungfud-bus", daemon=True)
        self._thread.start()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._out.sendto(b"", self.path)  # wakes the receiver, which sees _closed
        except OSError:
            pass
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=2)
        try:
            os.unlink(self.path)
        except OSError:
            pass
        self.sock.close()
        self._out.close()


class FileLease:
    def __init__(self, data_dir: str, name: str = "deadlines"):
        self.path = os.path.join(data_dir, f"{name}.lock")
        self.fd: int | None = None

    def try_acquire(self) -> bool:
        if self.fd is not None:
            return True
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return False
            raise
        self.fd = fd
        return True

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing the only descriptor releases the flock
            self.fd = None


def lmdb_nodes(data_dir: str) -> Nodes:
    """The mechanisms of one worker among siblings on ``data_dir``."""
    return Nodes(
        SocketBus(data_dir), FileLease(data_dir), shared=True, lease_for=lambda name, n: FileLease(data_dir, f"{name}.{n}")
    )
