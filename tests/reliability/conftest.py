"""Helpers for the reliability tests: a websocket client written by hand over a
TCP stream (so a test controls every byte: invalid UTF-8, raw fragments, a
handshake that never completes, a client that never reads), ``kungfud check``,
and the daemon's resident memory."""

from __future__ import annotations

import asyncio
import base64
import os
import struct
import subprocess
import sys
from pathlib import Path
from typing import Iterable
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[2]

OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA


def kungfud_check(store: Path | list[str]) -> subprocess.CompletedProcess:
    """``python -m kungfud check --data-dir DIR`` (read-only; safe beside a live
    daemon); ``store`` may instead be a daemon's ``store_args`` (``--store URL``)."""
    return subprocess.run(
        [sys.executable, "-m", "kungfud", "check", *(["--data-dir", str(store)] if isinstance(store, Path) else store)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def rss_mb(pid: int) -> float:
    """Resident memory of a process in MiB (from /proc)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _mask(data: bytes, mask: bytes) -> bytes:
    if not data:
        return b""
    m = (mask * (len(data) // 4 + 1))[: len(data)]
    return (int.from_bytes(data, "big") ^ int.from_bytes(m, "big")).to_bytes(len(data), "big")


class RawWS:
    """RFC 6455 client frames written by hand over an asyncio TCP stream."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader = reader
        self.writer = writer
        self.status: int | None = None
        self.headers: dict[str, str] = {}

    @classmethod
    async def open_tcp(cls, url: str) -> "RawWS":
        u = urlparse(url)
        reader, writer = await asyncio.open_connection(u.hostname, u.port)
        return cls(reader, writer)

    @classmethod
    async def connect(cls, url: str, key: str | None = None, extra_headers: Iterable[str] = ()) -> "RawWS":
        self = await cls.open_tcp(url)
        status = await self.handshake(url, key, extra_headers)
        assert status == 101, (status, self.headers)
        return self

    async def handshake(self, url: str, key: str | None = None, extra_headers: Iterable[str] = ()) -> int:
        u = urlparse(url)
        lines = [
            f"GET {u.path or '/'} HTTP/1.1",
            f"Host: {u.hostname}:{u.port}",
            "Upgrade: websocket",
            "Connection: Upgrade",
            f"Sec-WebSocket-Key: {base64.b64encode(os.urandom(16)).decode()}",
            "Sec-WebSocket-Version: 13",
        ]
        if key:
            lines.append(f"Authorization: Bearer {key}")
        lines += list(extra_headers)
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
        await self.writer.drain()
        head = await asyncio.wait_for(self.reader.readuntil(b"\r\n\r\n"), 15)
        status_line, *rest = head.decode("latin-1").split("\r\n")
        self.status = int(status_line.split()[1])
        self.headers = {
            h.split(":", 1)[0].strip().lower(): h.split(":", 1)[1].strip() for h in rest if ":" in h
        }
        return self.status

    @staticmethod
    def frame(opcode: int, payload: bytes, fin: bool = True) -> bytes:
        """One masked client frame."""
        mask = os.urandom(4)
        n = len(payload)
        head = bytes([(0x80 if fin else 0) | opcode])
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 65536:
            head += bytes([0x80 | 126]) + struct.pack("!H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack("!Q", n)
        return head + mask + _mask(payload, mask)

    def write(self, data: bytes) -> None:
        self.writer.write(data)

    async def send(self, opcode: int, payload: bytes, fin: bool = True) -> None:
        self.writer.write(self.frame(opcode, payload, fin))
        await self.writer.drain()

    async def send_text(self, text: str | bytes) -> None:
        await self.send(OP_TEXT, text.encode() if isinstance(text, str) else text)

    async def recv_frame(self, timeout: float = 10.0) -> tuple[int, bytes]:
        async def read() -> tuple[int, bytes]:
            b0, b1 = await self.reader.readexactly(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack("!H", await self.reader.readexactly(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", await self.reader.readexactly(8))[0]
            return b0 & 0x0F, await self.reader.readexactly(n)

        return await asyncio.wait_for(read(), timeout)

    async def recv_text(self, timeout: float = 10.0) -> str:
        """The next text message (pings are answered, pongs skipped)."""
        while True:
            op, payload = await self.recv_frame(timeout)
            if op == OP_PING:
                await self.send(OP_PONG, payload)
                continue
            if op == OP_PONG:
                continue
            if op == OP_CLOSE:
                code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else None
                raise ConnectionError(f"closed by the daemon with code {code}: {payload[2:]!r}")
            assert op == OP_TEXT, op
            return payload.decode()

    async def close_code(self, timeout: float = 20.0) -> int | None:
        """Read until the daemon's close frame and return its code (None: the
        connection ended without one)."""
        try:
            while True:
                op, payload = await self.recv_frame(timeout)
                if op == OP_CLOSE:
                    return struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else None
        except (asyncio.IncompleteReadError, ConnectionError):
            return None

    def close(self) -> None:
        self.writer.close()
