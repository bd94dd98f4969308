"""Logging setup: text for people, one JSON object per line for collectors.

Secrets never reach a log line, at any level (WIRE.md: "the key is never
logged"; §12): every handler carries :class:`Redact`, which blanks the
``Authorization`` header, every ``key``/``token`` field of a frame (websockets
logs frames at DEBUG) and anything shaped like an agent key or admission token,
in the message, its arguments and a logged traceback.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import sys
import time
from typing import Any

__all__ = ["setup", "JsonFormatter", "Redact", "redact"]

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


def setup(level: str = "INFO", fmt: str = "text") -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    handler.addFilter(Redact())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(getattr(logging, level.upper(), logging.INFO))
