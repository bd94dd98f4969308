"""The audit log written off the event loop (kungfud.server.audit, D270):
the same lines the logging handler wrote, byte for byte, in both formats; a
queue that never blocks its caller and stays bounded when the stream stalls."""

from __future__ import annotations

import json
import logging
import os
import re
import time

import pytest

from kungfud import logs
from kungfud.server import audit

RECEIPTS = [
    (None, False, b'{"memory":"me_01abc","version":1}'),
    (None, True, b'{"thread":"th_0a","entry":3,"assignment":"as_9z","key":"kf_secretsecret","content":{"t":1}}'),
    (None, False, b'{"agent":"ag_x1","key":"kf_AAAAbbbbCCCC"}'),
    (None, False, b'{"task":"tk_1","engagement":"en_2","inputs":[{"memory":"me_1","version":2}],"contract_version":1}'),
    (None, False, b'{"thread":"th_1","members":["ag_a","ag_b"],"nested":{"deep":{"x":"ag_c"}, "seq":4}}'),
    (None, False, '{"\u00e9":"ag_x","authorization":"th_1","bearer":["ag_b"],"n":{"token":"kt_abcdefgh"}}'.encode()),
    (None, False, b'{"memory":"me_bearer x","thread":"th_authorization","seq":7,"entry":true}'),
    (None, False, b'{"content":{"x":"ag_a"},"key":["ag_b"],"token":{"t":"ag_c"},"seq":1.5,"version":true,"l":["ag_a",1]}'),
    (None, False, b"not json"),
    (None, False, None),
    ("forbidden", False, None),
    ("bad_request", False, b'{"ignored":"ag_a"}'),
]


_OLD_ID = re.compile(r"^(ag|me|th|as|tk|en|ad)_[0-9a-z_]{1,60}$")


def _old_ids_of(obj: dict, depth: int = 0) -> dict:
    """The receipt's ids as audit.py took them before issue 27 (the reference)."""
    out: dict = {}
    for k, v in obj.items():
        if k in ("key", "token") or k == "content":
            continue
        if isinstance(v, str) and _OLD_ID.match(v):
            out[k] = v
        elif k in {"entry", "version", "contract_version", "seq"} and isinstance(v, int) and not isinstance(v, bool):
            out[k] = v
        elif isinstance(v, list) and v and all(isinstance(x, str) and _OLD_ID.match(x) for x in v):
            out[k] = v
        elif isinstance(v, dict) and depth == 0:
            inner = _old_ids_of(v, 1)
            if inner:
                out[k] = inner
    return out


def _old_receipt_ids(result):
    try:
        obj = json.loads(result) if result else None
    except ValueError:
        return {}
    return _old_ids_of(obj) if isinstance(obj, dict) else {}


def _old_line(created: float, at_ms: int, agent, op, code, replayed, result, fmt: str) -> str:
    """What ``audit.record`` logged before issue 27: a record on
    ``kungfud.audit`` through the handler of ``logs.setup``."""
    f = {"at": audit.rfc3339(at_ms), "agent": agent, "op": op, "ok": code is None}
    if code is not None:
        f["code"] = code
    f["replayed"] = replayed
    if code is None:
        f["ids"] = _old_receipt_ids(result)
    rec = logging.LogRecord("kungfud.audit", logging.INFO, __file__, 1, "%s", (json.dumps(f, separators=(",", ":")),), None)
    rec.created, rec.msecs = created, int((created - int(created)) * 1000) + 0.0
    rec.audit = f
    logs.Redact().filter(rec)
    formatter = logs.JsonFormatter() if fmt == "json" else logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s")
    return formatter.format(rec)


@pytest.mark.rules("R12-1")
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_audit_lines_are_the_lines_the_logging_handler_wrote(fmt):
    """WIRE.md "Operating a deployment": same fields, same order, same bytes
    (a secret-shaped id in the message is blanked as the handler's filter did)."""
    created = 1764504000.0
    for i, (code, replayed, result) in enumerate(RECEIPTS):
        for agent in ("ag_alice", None, "ag_kf_looks_like_a_key", "ag_kt_looks_like_a_token"):
            t = created + i * 1.0137
            for op in ("thread.post", 'odd "op"\\ é'):  # the second takes the general path
                args = (1764504000123 + i, agent, op, code, replayed, result)
                old = _old_line(t, *args, fmt)
                assert audit.line(t, audit.fields(*args), fmt) == old
                assert audit._line_of(fmt, t, *args) == old  # what the log's thread writes
                # logged at the outcome's own millisecond (what record() queues)
                at_ms = args[0]
                assert audit._line_of(fmt, None, *args) == _old_line((at_ms + 0.5) / 1000, *args, fmt)


@pytest.mark.rules("R12-1")
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_batch_of_outcomes_gives_the_lines_one_at_a_time_gives(fmt):
    """What the log's thread writes for a batch (audit._lines_of, issue 38):
    the bytes of each outcome's own line, whatever recurs in the batch —
    callers, ops, outcomes, a millisecond shared or not, a trace id, a
    secret-shaped caller, a refusal after an acceptance of the same op."""
    odd = [  # keys JSON writes with a quote, a comma, a colon or a space inside: never respaced by hand
        (None, False, b'{"a\\":b":"ag_x","c, \\"d":["ag_y","ag_z"],"e: f":{"g":"th_1"},"seq":2}'),
        (None, False, b'{"x":{"y":"ag_q","entry":5},"l":["ag_a","ag_b"],"k":[]}'),
    ]
    items = []
    for i, (code, replayed, result) in enumerate(RECEIPTS * 2 + odd):
        for agent in ("ag_alice", None, "ag_kf_looks_like_a_key", "ag_bob"):
            for op in ("thread.post", 'odd "op"\\ é', "memory.create"):
                for trace in (None, "0af7651916cd43dd8448eb211c80319c") if i % 5 == 4 else (None,):
                    items.append((audit._lines_of, 1764504000123 + i // 3 * 997, agent, op, code, replayed, result, trace))
    got = audit._lines_of(fmt, items)
    assert got == [audit._line_of(fmt, None, *item[1:]) for item in items]
    assert audit._lines_of(fmt, items) == got  # a second batch, its parts kept from the first


def test_no_content_or_secret_in_a_line():
    f = audit.fields(1, "ag_a", "agent.rotate_key", None, False, b'{"agent":"ag_a","key":"kf_zzzzzzzz","content":"ag_b"}')
    assert f["ids"] == {"agent": "ag_a"}
    assert "kf_" not in audit.line(0.0, f, "text")


def _read_until(r: int, marker: bytes, timeout: float = 10) -> bytes:
    got = b""
    os.set_blocking(r, False)
    deadline = time.monotonic() + timeout
    while marker not in got and time.monotonic() < deadline:
        try:
            got += os.read(r, 1 << 16)
        except BlockingIOError:
            time.sleep(0.01)
    return got


def _writer(monkeypatch, fmt: str, **kw) -> tuple[logs.LineWriter, int, int]:
    r, w = os.pipe()
    lw = logs.LineWriter(w, fmt, **kw)
    lw.warn = lambda n: f"WARN {n} dropped"
    monkeypatch.setattr(logs, "_writer", lw)
    return lw, r, w


def test_record_never_blocks_and_stays_bounded_when_the_stream_stalls(monkeypatch):
    """D270: a pipe nobody reads blocks the log's thread, never the caller;
    past the bound lines are dropped and counted, and the count is written
    once the stream takes lines again."""
    lw, r, w = _writer(monkeypatch, "json", limit=500, gather_s=0.001)
    try:
        started = time.perf_counter()
        for i in range(20_000):  # ~5 MB of lines against a 64 KiB pipe
            audit.record(1764504000000 + i, "ag_a", "memory.create", None, False, b'{"memory":"me_1","version":1}')
        assert time.perf_counter() - started < 5  # never waited on the pipe (generous)
        assert lw.queued <= 500
        assert lw.dropped >= 20_000 - 500 - 2_000  # the pipe and the thread's chunk took the rest
        dropped = lw.dropped
        got = _read_until(r, b"WARN")  # the reader comes back: what was queued, then the count
        got += _read_until(r, b"\n", 0.5) if not got.endswith(b"\n") else b""
        lines = got.decode().splitlines()
        assert lines[-1] == f"WARN {dropped} dropped"
        assert len(lines) - 1 == 20_000 - dropped
        assert all(json.loads(x)["op"] == "memory.create" for x in lines[:-1])  # whole lines only
    finally:
        os.close(r)
        os.close(w)


def test_flush_writes_what_is_queued_in_order(monkeypatch):
    """The last lines reach the stream at exit (logging.shutdown flushes),
    audit lines and other lines in the order they were logged."""
    lw, r, w = _writer(monkeypatch, "text", gather_s=10)  # would wait long: a flush does not
    handler = logs.QueuedHandler(lw)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))
    other = logging.getLogger("kungfud.test")
    other.addHandler(handler)
    other.propagate = False
    try:
        audit.record(1764504000000, "ag_a", "memory.create", None, False, b'{"memory":"me_1","version":1}')
        other.warning("between")
        audit.record(1764504000001, "ag_a", "memory.create", "forbidden")
        assert lw.flush(2.0)
        os.set_blocking(r, False)
        lines = os.read(r, 1 << 16).decode().splitlines()
    finally:
        other.removeHandler(handler)
        other.propagate = True
        os.close(r)
        os.close(w)
    assert len(lines) == 3
    assert " INFO kungfud.audit {" in lines[0] and '"ok":true' in lines[0]
    assert lines[1] == "WARNING kungfud.test between"
    assert '"code":"forbidden"' in lines[2]


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_an_audit_line_carries_the_trace_id_of_its_request_top_level_in_json(fmt):
    """WIRE.md 1.3 "Tracing": audit lines carry ``trace_id`` (a top-level field
    in JSON format); a line without one is the line it always was."""
    trace = "0af7651916cd43dd8448eb211c80319c"
    args = (1764504000123, "ag_01abc", "memory.create", None, False, b'{"memory":"me_01x","version":1}')
    with_id = audit._line_of(fmt, 1764504000.5, *args, trace)
    assert audit._line_of(fmt, 1764504000.5, *args) == _old_line(1764504000.5, *args, fmt)
    if fmt == "json":
        line = json.loads(with_id)
        assert line["trace_id"] == trace and line["op"] == "memory.create" and json.loads(line["msg"])["trace_id"] == trace
    else:
        assert json.loads(with_id.split(" kungfud.audit ", 1)[1])["trace_id"] == trace
