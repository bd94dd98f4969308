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
loses the lines still queued, at most the last ~20 ms' lines: they are a
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


_SKIP = frozenset((*SECRET_FIELDS, "content"))


def _ids_of(obj: dict, depth: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in obj.items():
        t = type(v)  # as decoded from JSON: exactly str, int, bool, list, dict, float or None
        if t is str:
            if v[2:3] == "_" and _ID.match(v) and k not in _SKIP:
                out[k] = v
        elif t is int:  # never a bool: type(True) is bool
            if k in _NUMBERS:
                out[k] = v
        elif t is list:
            if v and k not in _SKIP and all(type(x) is str and x[2:3] == "_" and _ID.match(x) for x in v):
                out[k] = v
        elif t is dict and depth == 0 and k not in _SKIP:
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


def fields(
    at_ms: int, agent: str | None, op: str, code: str | None, replayed: bool, result: bytes | None,
    trace_id: str | None = None,
) -> dict[str, Any]:
    """One outcome's fields, in their order; ``trace_id`` last, when the
    request had a span (WIRE.md 1.3 "Tracing")."""
    out: dict[str, Any] = {"at": rfc3339(at_ms), "agent": agent, "op": op, "ok": code is None}
    if code is not None:
        out["code"] = code
    out["replayed"] = replayed
    if code is None:
        out["ids"] = receipt_ids(result)
    if trace_id is not None:
        out["trace_id"] = trace_id
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


def _asctime(s: int, ms: int) -> str:
    """``logging.Formatter``'s default ``%(asctime)s`` of second ``s`` and
    millisecond ``ms``: local time, then ``,`` and milliseconds."""
    last = _local
    if last[0] != s:
        last = [s, time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(s))]
        _local[:] = last
    return f"{last[1]},{ms:03d}"


def _split(created: float) -> tuple[int, int]:
    """A ``time.time()`` as logging splits it: (second, millisecond)."""
    s = int(created)
    return s, int((created - s) * 1000)


def line(created: float, f: dict[str, Any], fmt: str) -> str:
    """The line the logging handler of :func:`kungfud.logs.setup` wrote for
    this outcome, logged at ``created`` (``time.time()``), without its newline."""
    msg = _redact(message(f))
    if fmt == "json":
        return _spaced.encode({"ts": _ts(*_split(created)), "level": "info", "logger": log.name, "msg": msg, **f})
    return f"{_asctime(*_split(created))} INFO {log.name} {msg}"


_PLAIN = re.compile(r"^[A-Za-z0-9_.\-]+$")  # a string JSON writes as itself, that no redaction matches
_plain_seen: dict[str | None, bool] = {None: True}  # agents, ops and codes recur: match each once


def _plain(text: str | None) -> bool:
    known = _plain_seen.get(text)
    if known is None:
        if len(_plain_seen) > 100_000:
            _plain_seen.clear()
            _plain_seen[None] = True
        known = _plain_seen[text] = _PLAIN.match(text) is not None  # type: ignore[arg-type]
    return known


_spaced = json.JSONEncoder(ensure_ascii=False)  # JsonFormatter's separators: ", " and ": "
_utc: list[Any] = [None, ""]  # (second, "YYYY-mm-ddTHH:MM:SS") of the json format's clock


def _ts(s: int, ms: int) -> str:
    """:class:`kungfud.logs.JsonFormatter`'s ``ts`` of second ``s`` and millisecond ``ms``."""
    last = _utc
    if last[0] != s:
        last = [s, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(s))]
        _utc[:] = last
    return f"{last[1]}.{ms:03d}Z"


def _line_of(
    fmt: str, created: float | None, at_ms: int, agent: str | None, op: str, code: str | None, replayed: bool,
    result: bytes | None, trace_id: str | None = None,
) -> str:
    """:func:`line` of one outcome, on the log's thread. The line is put
    together from its parts where they are id-, op- and code-shaped (every
    outcome the server logs), which writes the bytes :func:`line` writes
    (tested against the logging path) in a third of the time; anything else
    takes :func:`line`. ``created`` None: logged at ``at_ms``."""
    if created is None:
        created = (at_ms + 0.5) / 1000  # what _split turns back into at_ms's second and millisecond
        sec, ms = divmod(at_ms, 1000)
    else:
        sec, ms = _split(created)
    if trace_id is not None or not (_plain(agent) and _plain(op) and _plain(code)):
        return line(created, fields(at_ms, agent, op, code, replayed, result, trace_id), fmt)
    at = rfc3339(at_ms)
    who = "null" if agent is None else f'"{agent}"'
    rep = "true" if replayed else "false"
    if code is None:
        ids = receipt_ids(result)
        compact = _enc.encode(ids).decode()
        if not compact.isascii():
            return line(created, fields(at_ms, agent, op, code, replayed, result), fmt)
        msg = f'{{"at":"{at}","agent":{who},"op":"{op}","ok":true,"replayed":{rep},"ids":{compact}}}'
    else:
        msg = f'{{"at":"{at}","agent":{who},"op":"{op}","ok":false,"code":"{code}","replayed":{rep}}}'
    # Of the redaction's patterns (kungfud.logs.redact) only a secret's shape
    # can occur here: fields named key/token are skipped at every depth (so
    # no "key": or "token": is written), agent, op and code are plain, and
    # nothing has the spaces or the unquoted colon the header patterns need.
    if "kf_" in msg or "kt_" in msg:
        msg = logs.redact(msg)
    if fmt != "json":
        return f"{_asctime(sec, ms)} INFO kungfud.audit {msg}"
    tail = f'"ok": true, "replayed": {rep}, "ids": {_spaced.encode(ids)}}}' if code is None else (
        f'"ok": false, "code": "{code}", "replayed": {rep}}}'
    )
    return (
        f'{{"ts": "{_ts(sec, ms)}", "level": "info", "logger": "kungfud.audit", "msg": {_enc.encode(msg).decode()}, '
        f'"at": "{at}", "agent": {who}, "op": "{op}", {tail}'
    )


def _lines_of(fmt: str, items: list[tuple]) -> list[str]:
    """:func:`_line_of` of a batch of outcomes queued by :func:`record`, each
    ``(_lines_of, at_ms, agent, op, code, replayed, result, trace_id)``, on
    the log's thread, in one pass: the text a line shares with the others of
    its caller, op and outcome is made once and kept while they recur, and
    the time stamps once per millisecond. The same bytes as :func:`_line_of`
    (tested); a line with anything not plain (a trace id, an odd op or id, a
    secret's shape to blank) is made by it."""
    out: list[str] = []
    add = out.append
    shared = _shared[fmt]
    if len(shared) > 50_000:  # callers come and go: kept bounded
        shared.clear()
    json_fmt = fmt == "json"
    last_ms = -1
    stamp = at = ""
    for _, at_ms, agent, op, code, replayed, result, trace_id in items:
        parts = shared.get((agent, op, code, replayed)) if trace_id is None else None
        if parts is None:
            if trace_id is not None or not (_plain(agent) and _plain(op) and _plain(code)):
                add(_line_of(fmt, None, at_ms, agent, op, code, replayed, result, trace_id))
                continue
            parts = shared[(agent, op, code, replayed)] = _parts(agent, op, code, replayed)
        if at_ms != last_ms:
            last_ms = at_ms
            sec, ms = divmod(at_ms, 1000)
            at = rfc3339(at_ms)
            stamp = _ts(sec, ms) if json_fmt else _asctime(sec, ms)
        if code is None:
            ids = receipt_ids(result)
            compact = _enc.encode(ids).decode()
            msg = '{"at":"' + at + parts[0] + compact + "}"
        else:
            msg = '{"at":"' + at + parts[0]
        if "kf_" in msg or "kt_" in msg or not msg.isascii():
            add(_line_of(fmt, None, at_ms, agent, op, code, replayed, result))
        elif not json_fmt:
            add(stamp + " INFO kungfud.audit " + msg)
        elif code is None:
            # json's ", " and ": " put into the compact ids where every string is plain (no quote,
            # comma or colon inside one): the bytes _spaced.encode(ids) writes, in a fifth of the time
            spaced = compact.replace(',"', ', "').replace('":', '": ') if _PLAIN_JSON.match(compact) else _spaced.encode(ids)
            add('{"ts": "' + stamp + _JSON_MID + _enc.encode(msg).decode() + ', "at": "' + at + parts[1] + spaced + "}")
        else:
            add('{"ts": "' + stamp + _JSON_MID + _enc.encode(msg).decode() + ', "at": "' + at + parts[1])
    return out


_PLAIN_JSON = re.compile(r'^[{}\[\]",:0-9A-Za-z_.\-]*$')  # compact JSON whose strings are all plain
_JSON_MID = '", "level": "info", "logger": "kungfud.audit", "msg": '
_shared: dict[str, dict[tuple, tuple[str, str]]] = {"text": {}, "json": {}}


def _parts(agent: str | None, op: str, code: str | None, replayed: bool) -> tuple[str, str]:
    """What follows the ``at`` of one (caller, op, outcome)'s lines, as
    :func:`_line_of` writes them: in the message (compact; the ids follow
    when accepted) and in the JSON format's fields (the ids follow, then ``}``)."""
    who = "null" if agent is None else f'"{agent}"'
    rep = "true" if replayed else "false"
    if code is None:
        return (
            f'","agent":{who},"op":"{op}","ok":true,"replayed":{rep},"ids":',
            f'", "agent": {who}, "op": "{op}", "ok": true, "replayed": {rep}, "ids": ',
        )
    return (
        f'","agent":{who},"op":"{op}","ok":false,"code":"{code}","replayed":{rep}}}',
        f'", "agent": {who}, "op": "{op}", "ok": false, "code": "{code}", "replayed": {rep}}}',
    )


def record(
    at_ms: int, agent: str | None, op: str, code: str | None = None, replayed: bool = False, result: bytes | None = None,
    trace_id: str | None = None,
) -> None:
    """Log one action outcome: accepted (``code`` None) or refused with
    ``code``. ``at_ms`` (the wall clock's ms) is also the line's ``ts``;
    ``trace_id``: the trace of the request's span (tracing on)."""
    w = logs._writer
    if w is not None:
        w.put((_lines_of, at_ms, agent, op, code, replayed, result, trace_id))
    else:  # logging set up elsewhere (an in-process server): through the logger
        f = fields(at_ms, agent, op, code, replayed, result, trace_id)
        log.info("%s", message(f), extra={"audit": f})
