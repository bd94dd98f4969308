"""The audit log (WIRE.md "Operating a deployment"): one line per action
outcome on the logger ``kungfud.audit`` at INFO.

A line holds ``at, agent, op``, ``ok`` (and ``code`` when refused),
``replayed``, and ``ids``: the object ids the receipt names. Never content,
keys or tokens: only id-shaped strings and entry/version/seq numbers are taken
from a receipt, and its secret fields are skipped by name as well. With
``--log-format json`` the fields are the line's JSON object (see
:mod:`kungfud.logs`); in text the message is the same object as JSON.
``[server] audit_log = false`` turns it off.

Off the event loop (issue 27, D270): :func:`record` hands the outcome as it
is to the log's writer thread (:class:`kungfud.logs.LineWriter`, a deque
append), which turns it into the line the logging handler wrote, byte for
byte (:func:`line`), and writes it with every other log line, in order. The
writer's queue is bounded: while the log's reader stalls, lines past the
bound are dropped and counted, never a reply held. A process killed (kill -9)
loses the lines still queued, at most the last few milliseconds': they are a
log, not facts.
"""

from __future__ import annotations

import json
import logging
import re
import time
from typing import Any

import msgspec

from .. import logs
from ..conventions import SECRET_FIELDS, rfc3339

__all__ = ["log", "record", "fields", "line", "message", "receipt_ids"]

log = logging.getLogger("kungfud.audit")

_ID = re.compile(r"^(ag|me|th|as|tk|en|ad)_[0-9a-z_]{1,60}$")
_NUMBERS = frozenset({"entry", "version", "contract_version", "seq"})
_dec = msgspec.json.Decoder()
_enc = msgspec.json.Encoder()


def _ids_of(obj: dict, depth: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in obj.items():
        if k in SECRET_FIELDS or k == "content":
            continue
        if isinstance(v, str) and _ID.match(v):
            out[k] = v
        elif k in _NUMBERS and isinstance(v, int) and not isinstance(v, bool):
            out[k] = v
        elif isinstance(v, list) and v and all(isinstance(x, str) and _ID.match(x) for x in v):
            out[k] = v
        elif isinstance(v, dict) and depth == 0:
            inner = _ids_of(v, 1)
            if inner:
                out[k] = inner
    return out


def receipt_ids(result: bytes | None) -> dict[str, Any]:
    """The ids a receipt (JSON) names, by field."""
    if not result:
        return {}
    try:
        obj = _dec.decode(result)
    except msgspec.DecodeError:
        return {}
    return _ids_of(obj) if isinstance(obj, dict) else {}


def fields(at_ms: int, agent: str | None, op: str, code: str | None, replayed: bool, result: bytes | None) -> dict[str, Any]:
    """One outcome's fields, in their order."""
    out: dict[str, Any] = {"at": rfc3339(at_ms), "agent": agent, "op": op, "ok": code is None}
    if code is not None:
        out["code"] = code
    out["replayed"] = replayed
    if code is None:
        out["ids"] = receipt_ids(result)
    return out


def message(f: dict[str, Any]) -> str:
    """The fields as the line's message: compact JSON, ASCII (as ``json.dumps``
    with ``(",", ":")`` separators writes it; msgspec writes the same bytes
    for ASCII strings, and every field is id-, op- or code-shaped)."""
    text = _enc.encode(f).decode()
    return text if text.isascii() else json.dumps(f, separators=(",", ":"))


def _redact(text: str) -> str:
    """:func:`kungfud.logs.redact`, which the handler applied to the message;
    skipped when nothing in the text could match it."""
    low = text.lower()
    if "k" in text and ("kf_" in text or "kt_" in text or '"key"' in text or '"token"' in text) or (
        "authorization" in low or "bearer" in low
    ):
        return logs.redact(text)
    return text


_local: list[Any] = [None, ""]  # (second, "YYYY-mm-dd HH:MM:SS") of the text format's clock


def _asctime(created: float) -> str:
    """``logging.Formatter``'s default ``%(asctime)s``: local time, then ``,`` and milliseconds."""
    s = int(created)
    last = _local
    if last[0] != s:
        last = [s, time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(created))]
        _local[:] = last
    return f"{last[1]},{int((created - s) * 1000):03d}"


def line(created: float, f: dict[str, Any], fmt: str) -> str:
    """The line the logging handler of :func:`kungfud.logs.setup` wrote for
    this outcome, logged at ``created`` (``time.time()``), without its newline."""
    msg = _redact(message(f))
    if fmt == "json":
        ms = int((created - int(created)) * 1000)
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created)) + f".{ms:03d}Z"
        return json.dumps({"ts": ts, "level": "info", "logger": log.name, "msg": msg, **f}, ensure_ascii=False)
    return f"{_asctime(created)} INFO {log.name} {msg}"


def _line_of(
    fmt: str, created: float, at_ms: int, agent: str | None, op: str, code: str | None, replayed: bool,
    result: bytes | None,
) -> str:
    return line(created, fields(at_ms, agent, op, code, replayed, result), fmt)


def record(
    at_ms: int, agent: str | None, op: str, code: str | None = None, replayed: bool = False, result: bytes | None = None
) -> None:
    """Log one action outcome: accepted (``code`` None) or refused with ``code``."""
    w = logs.writer()
    if w is not None:
        w.put((_line_of, time.time(), at_ms, agent, op, code, replayed, result))
    else:  # logging set up elsewhere (an in-process server): through the logger
        f = fields(at_ms, agent, op, code, replayed, result)
        log.info("%s", message(f), extra={"audit": f})
