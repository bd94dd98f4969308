"""Logging setup: text for people, one JSON object per line for collectors.

Secrets never reach a log line, at any level (WIRE.md: "the key is never
logged"; §12): every handler carries :class:`Redact`, which blanks the
``Authorization`` header, every ``key``/``token`` field of a frame (websockets
logs frames at DEBUG) and anything shaped like an agent key or admission token,
in the message, its arguments and a logged traceback.

Lines leave through one thread of their own (:class:`LineWriter`, D270): a
line is formatted where it is logged and written by ``kungfud-log``, so no
thread — the event loop least — waits for stderr; a stalled reader costs
dropped, counted lines (``[server] log_queue``), never a held reply.
"""

from __future__ import annotations

import dataclasses
import collections
import json
import logging
import os
import re
import select
import sys
import threading
import time
from typing import Any

__all__ = ["setup", "writer", "LineWriter", "QueuedHandler", "JsonFormatter", "Redact", "redact"]

REDACTED = "[redacted]"

# A JSON field that carries a secret: the agent key (`hello`, `agent.register`'s
# reply, key rotation), the admission token (`thread.admit`'s reply,
# `thread.join`), and — harmless but of the same name — the idempotency key.
_SECRET_FIELD = re.compile(r'("(?:key|token|secret)"\s*:\s*")(?:[^"\\]|\\.)*"?', re.S)
_SECRET_FIELD_B = re.compile(rb'("(?:key|token|secret)"\s*:\s*")(?:[^"\\]|\\.)*"?', re.S)
# Agent keys are kf_…, admission tokens kt_… (base64url); anything of that shape.
# A webhook's signing secret is whsec_… (standard base64).
_SECRET_SHAPE = re.compile(r"k[ft]_[A-Za-z0-9_-]{4,}|whsec_[A-Za-z0-9+/=]{4,}")
_SECRET_SHAPE_B = re.compile(rb"k[ft]_[A-Za-z0-9_-]{4,}|whsec_[A-Za-z0-9+/=]{4,}")
# The credential of an HTTP Authorization header (websockets logs each header).
_AUTHORIZATION = re.compile(r"(?i)(authorization\s*:\s*|\bbearer\s+)[^\r\n]*")


def redact(text: str) -> str:
    text = _SECRET_FIELD.sub(lambda m: m.group(1) + REDACTED + '"', text)
    text = _AUTHORIZATION.sub(lambda m: m.group(1) + REDACTED, text)
    return _SECRET_SHAPE.sub(REDACTED, text)


def _redact_bytes(data: bytes) -> bytes:
    data = _SECRET_FIELD_B.sub(lambda m: m.group(1) + REDACTED.encode() + b'"', data)
    return _SECRET_SHAPE_B.sub(REDACTED.encode(), data)


def _redact_arg(arg: Any) -> Any:
    """A websockets frame is logged as its elided repr, which keeps the frame's
    last bytes — often the tail of a key. Redact the whole payload first."""
    data = getattr(arg, "data", None)
    if isinstance(data, (bytes, bytearray)) and dataclasses.is_dataclass(arg):
        return str(dataclasses.replace(arg, data=_redact_bytes(bytes(data))))
    return arg


class Redact(logging.Filter):
    """Blank secrets in every record a handler emits (never drops a record)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple):
            args = tuple(_redact_arg(a) for a in args)
        try:
            message = record.msg % args if args else str(record.msg)
        except (TypeError, ValueError, KeyError):
            message = record.getMessage()
        record.msg, record.args = redact(message), ()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        audit = getattr(record, "audit", None)
        if audit is not None:  # an audit line: its fields are the object (kungfud.server.audit)
            out.update(audit)
        if record.exc_info or record.exc_text:
            out["exc"] = record.exc_text or self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False)


# --- the writer: every line off the caller's thread, bounded (issue 27, D270) ---------

#: Lines queued at most (``[server] log_queue``) while the log's reader stalls.
QUEUE_LIMIT = 20_000
GATHER_S = 0.02  # how long the writer lets lines gather before it writes them
_CHUNK = 128  # items turned into text per pass (the GIL is let go between passes)
_PIPE_BUF = 4096  # a write of at most this many bytes to a pipe is never split


class LineWriter:
    """The queue between every thread that logs and the ``kungfud-log`` thread,
    which writes to the log's file descriptor.

    An item is a line (``str``, formatted by the caller), or a tuple ``(fn,
    *args)``: the writer turns the tuples of one ``fn`` that follow each other
    into their lines with one call, ``fn(fmt, tuples)`` — the audit log hands
    over its outcomes so (:mod:`kungfud.server.audit`), so the event loop
    never encodes them, and they are encoded a batch at a time. :meth:`put` never blocks: past
    ``limit`` queued items a line is dropped and counted (``dropped``), and
    once the stream takes lines again one WARNING line says how many were
    lost. Lines leave in writes of whole lines of at most ``PIPE_BUF`` bytes,
    so the lines of several processes sharing one pipe never interleave.
    """

    def __init__(self, fd: int, fmt: str, limit: int = QUEUE_LIMIT, gather_s: float = GATHER_S) -> None:
        self.fd, self.fmt, self.limit, self.gather_s = fd, fmt, limit, gather_s
        self.dropped = 0
        self.warn: Any = lambda n: f"{n} log lines were dropped"  # the WARNING line's text (setup sets it)
        self._reported = 0
        self._queue: collections.deque[Any] = collections.deque()
        self._wake = threading.Event()
        self._hurry = threading.Event()
        self._busy = False  # the writer holds lines it took from the queue
        self._poll = select.poll()
        self._poll.register(fd, select.POLLOUT)
        self._thread = threading.Thread(target=self._run, name="kungfud-log", daemon=True)
        self._thread.start()

    def put(self, item: Any) -> None:
        if len(self._queue) >= self.limit:
            self.dropped += 1  # not atomic across threads; a count for operators
        else:
            self._queue.append(item)
        if not self._wake.is_set():
            self._wake.set()

    def put_line(self, text: str) -> None:
        """A line of the rest of the log (not the audit log's): written at
        once, as a StreamHandler did, while nothing waits before it and the
        stream can take it without blocking (``poll``: a pipe with room for
        ``PIPE_BUF`` bytes, a file); queued otherwise. A daemon's own lines are
        few (start, stop, a connection opened or closed), and a test or an
        operator reading the log sees them at once."""
        if not self._queue and not self._busy and len(text) < _PIPE_BUF and self._poll.poll(0):
            try:
                _write_all(self.fd, (text + "\n").encode(errors="replace"))
                return
            except OSError:
                pass
        self.put(text)

    @property
    def queued(self) -> int:
        return len(self._queue)

    def flush(self, timeout: float = 2.0) -> bool:
        """Wait (at most ``timeout`` s) until what was queued is written."""
        if threading.current_thread() is self._thread:
            return False
        done = threading.Event()
        self._queue.append(done)
        self._hurry.set()
        self._wake.set()
        return done.wait(timeout)

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._hurry.wait(self.gather_s)  # let a few loop turns' lines gather
            self._wake.clear()
            self._hurry.clear()
            try:
                self._drain()
            except Exception as e:  # the log must not take the process down; where else to say it
                try:
                    os.write(self.fd, f"kungfud: the log could not be written: {e!r}\n".encode())
                except OSError:
                    pass

    def _drain(self) -> None:
        q, fmt = self._queue, self.fmt
        self._busy = True
        try:
            self._drain_queue(q, fmt)
        finally:
            self._busy = False

    def _drain_queue(self, q: collections.deque, fmt: str) -> None:
        while q:
            lines: list[str] = []
            run: list[tuple] = []  # tuples of one function, turned into lines together
            for _ in range(min(len(q), _CHUNK)):
                item = q.popleft()
                if type(item) is tuple:
                    if run and run[0][0] is not item[0]:
                        lines += run[0][0](fmt, run)
                        run = []
                    run.append(item)
                    continue
                if run:
                    lines += run[0][0](fmt, run)
                    run = []
                if isinstance(item, str):
                    lines.append(item)
                else:  # a flush's Event: what came before it is written first
                    self._write(lines)
                    lines = []
                    item.set()
            if run:
                lines += run[0][0](fmt, run)
            self._write(lines)
            if q:
                time.sleep(0)  # let the event loop have the GIL between chunks
        if self.dropped > self._reported:
            lost, self._reported = self.dropped - self._reported, self.dropped
            self._write([self.warn(lost)])

    def _write(self, lines: list[str]) -> None:
        """Whole lines (each without its newline), in writes of at most
        ``PIPE_BUF`` bytes (a longer line alone)."""
        batch: list[str] = []
        size = 0
        for text in lines:
            if size + len(text) >= _PIPE_BUF and batch:
                _write_all(self.fd, ("\n".join(batch) + "\n").encode(errors="replace"))
                batch, size = [], 0
            batch.append(text)
            size += len(text) + 1
        if batch:
            _write_all(self.fd, ("\n".join(batch) + "\n").encode(errors="replace"))


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class QueuedHandler(logging.Handler):
    """A handler that formats on the caller's thread (as a StreamHandler did)
    and leaves the write to a :class:`LineWriter`."""

    def __init__(self, writer: LineWriter) -> None:
        super().__init__()
        self.writer = writer

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.writer.put_line(self.format(record))
        except Exception:
            self.handleError(record)

    def flush(self) -> None:  # logging.shutdown() at exit: the last lines
        self.writer.flush()


_writer: LineWriter | None = None


def writer() -> LineWriter | None:
    """The writer :func:`setup` installed, or None (logging set up elsewhere:
    a test's in-process server; then log through :mod:`logging`)."""
    return _writer


def setup(level: str = "INFO", fmt: str = "text", queue: int = QUEUE_LIMIT) -> None:
    global _writer
    fmt = "json" if fmt == "json" else "text"
    formatter = JsonFormatter() if fmt == "json" else logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        fd = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # a stderr with no file (a test's capture)
        fd = -1
    if fd >= 0:
        if _writer is None:
            _writer = LineWriter(fd, fmt, queue)
        if _writer.fd != fd:
            _writer.fd = fd
            _writer._poll = select.poll()
            _writer._poll.register(fd, select.POLLOUT)
        _writer.fmt, _writer.limit = fmt, queue
        _writer.warn = lambda n: formatter.format(logging.LogRecord(
            "kungfud.logs", logging.WARNING, __file__, 0,
            "%d log lines were dropped: the log's reader did not keep up (kungfud_log_lines_dropped_total)",
            (n,), None,
        ))
        handler: logging.Handler = QueuedHandler(_writer)
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter)
    handler.addFilter(Redact())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(getattr(logging, level.upper(), logging.INFO))
