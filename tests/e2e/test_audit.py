"""The audit log (WIRE.md "Additions in 1.1" → "Operating a deployment",
issue 15 item 2): every action's outcome is one line on the logger
``kungfud.audit`` at INFO — one JSON object per line with ``--log-format
json`` — holding ``at, agent, op, ok`` or ``code``, ``replayed`` and the ids
the receipt names; never content, keys or tokens. ``[server] audit_log =
false`` turns it off."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.request

import pytest

from kungfud.client import Client, new_key
from tests.cluster import ROOT
from tests.conftest import SECRET_SHAPE, Daemon
from tests.e2e.helpers import check_failure, register

MARK = "do-not-log-this-content"


def _audit_lines(d: Daemon) -> list[list[dict]]:
    """The audit lines of each node's log (one log per node; tests/cluster.py)."""
    logs = []
    for path in d.log_paths:
        out = []
        for line in path.read_text().splitlines():
            obj = json.loads(line)  # --log-format json: every line is one JSON object
            if obj.get("logger") == "kungfud.audit":
                out.append(obj)
        logs.append(out)
    return logs


def _in_session_order(want: list[tuple], logs: list[list[tuple]]) -> list[tuple]:
    """Every node logs the actions it served, in its own order: walk the session
    and take each expected line from the head of the log that has it next."""
    logs = [list(log) for log in logs]
    got = []
    for w in want:
        for log in logs:
            if log and log[0][:4] == w[:4]:
                got.append(log.pop(0))
                break
        else:
            heads = [log[0] if log else None for log in logs]
            raise AssertionError(f"expected next {w}, the logs' next lines are {heads}")
    return got + [line for log in logs for line in log]


async def _session(url: str, admin_key: str) -> tuple[list[tuple], list[str]]:
    """A scripted session; returns what the audit log must show, in order, as
    (agent, op, ok-or-code, replayed, ids), and every secret handed out."""
    want: list[tuple] = []
    a_id, a_key = await register(url, f"alice {MARK}")
    want.append((None, "agent.register", True, False, {"agent": a_id}))
    b_id, b_key = await register(url, f"bob {MARK}")
    want.append((None, "agent.register", True, False, {"agent": b_id}))
    secrets = [a_key, b_key, admin_key]
    async with await Client.connect(url, a_key) as a, await Client.connect(url, b_key) as b:
        me = await a.act("memory.create", {"content": {"text": MARK}})
        want.append((a_id, "memory.create", True, False, {"memory": me["memory"], "version": 1}))
        th = (await a.act("thread.create", {"content": {"title": MARK}}))["thread"]
        want.append((a_id, "thread.create", True, False, {"thread": th}))
        grant = await a.act("thread.admit", {"thread": th})
        secrets.append(grant["token"])
        want.append((a_id, "thread.admit", True, False, {"thread": th, "admission": grant["admission"]}))
        await b.act("thread.join", {"token": grant["token"]})
        want.append((b_id, "thread.join", True, False, {"thread": th}))
        post = await a.act("thread.post", {"thread": th, "content": {"text": MARK}, "ask": [b_id]})
        want.append((a_id, "thread.post", True, False, {"thread": th, "entry": post["entry"]}))
        asg = await a.act(
            "thread.post",
            {"thread": th, "content": {"text": MARK}, "assign": {"to": b_id, "content": {"criteria": MARK}}},
        )
        want.append((a_id, "thread.post", True, False, {"thread": th, "entry": asg["entry"], "assignment": asg["assignment"]}))
        await b.act("assignment.take", {"assignment": asg["assignment"]})
        want.append((b_id, "assignment.take", True, False, {"assignment": asg["assignment"]}))
        await b.act("assignment.deliver", {"assignment": asg["assignment"], "content": {"text": MARK}})
        want.append((b_id, "assignment.deliver", True, False, {"assignment": asg["assignment"]}))
        await a.act("assignment.judge", {"assignment": asg["assignment"], "verdict": "reject", "content": {"reason": MARK}})
        want.append((a_id, "assignment.judge", True, False, {"assignment": asg["assignment"]}))
        tk = (await a.act("task.create", {"audience": "open", "contract": {"content": {"output": MARK, "criteria": MARK}}}))["task"]
        want.append((a_id, "task.create", True, False, {"task": tk}))
        en = (await b.act("task.take", {"task": tk}))["engagement"]
        want.append((b_id, "task.take", True, False, {"task": tk, "engagement": en}))
        # a rejection: bob may not revise alice's Task
        check_failure(await b.request("task.revise", {"task": tk, "contract": {"content": {"output": MARK, "criteria": MARK}}}, key=new_key()))
        want.append((b_id, "task.revise", "forbidden", False, None))
        # a refusal before any actor: a malformed action
        check_failure(await a.request("memory.update", {"memory": "ag_wrong", "content": {"text": MARK}}, key=new_key()), "bad_request")
        want.append((a_id, "memory.update", "bad_request", False, None))
        # a replay, and a key change whose receipt names a key
        k = new_key()
        await a.act("memory.publish", {"memory": me["memory"]}, key=k)
        want.append((a_id, "memory.publish", True, False, {"memory": me["memory"]}))
        again = await a.request("memory.publish", {"memory": me["memory"]}, key=k)
        assert again["replayed"] is True
        want.append((a_id, "memory.publish", True, True, {"memory": me["memory"]}))
        secrets.append((await b.act("agent.rotate_key", {}))["key"])
        want.append((b_id, "agent.rotate_key", True, False, {"agent": b_id}))
        # reads are not actions: they leave no audit line
        await a.read("turn")
    return want, secrets


@pytest.mark.rules("L3-6", "R12-1")
async def test_wire_audit_log_has_every_action_outcome_and_no_secret_or_content(make_daemon):
    """WIRE.md "Operating a deployment", audit log: a scripted session (register,
    memory, thread create/admit/join/post, assignment, task, a rejection, a
    replay) is in the log line by line; no key, token or content is."""
    d = make_daemon(None, extra=["--log-format", "json"])
    try:
        want, secrets = await _session(d.url, d.admin_key)
    finally:
        d.stop()
    logs = []
    for lines in _audit_lines(d):
        logs.append([])
        for obj in lines:
            assert obj["level"] == "info"
            assert {"at", "agent", "op", "ok", "replayed"} <= obj.keys(), obj
            assert obj["at"].endswith("Z") and obj["ok"] is ("code" not in obj), obj
            logs[-1].append((obj["agent"], obj["op"], obj["ok"] or obj["code"], obj["replayed"], obj.get("ids")))
    got = _in_session_order(want, logs)
    for w, g in zip(want, got):
        agent, op, outcome, replayed, ids = g
        assert (agent, op, outcome, replayed) == w[:4], (w, g)
        if w[4] is not None:
            assert ids is not None and w[4].items() <= ids.items(), (w, g)
    assert len(got) == len(want), got[len(want):]
    text = b"".join(path.read_bytes() for path in d.log_paths)
    assert MARK.encode() not in text
    for secret in secrets:
        assert secret.encode() not in text
    assert not SECRET_SHAPE.search(text)


@pytest.mark.rules("R12-1")
async def test_wire_audit_log_off_and_in_text_format(make_daemon):
    """WIRE.md "Operating a deployment": ``audit_log = false`` turns it off; in
    the text format the message of each line is the same JSON object."""
    on = make_daemon(None, name="on")
    off = make_daemon("[server]\naudit_log = false\n", name="off")
    for d in (on, off):
        agent, key = await register(d.url, "alice")
        async with await Client.connect(d.url, key) as c:
            await c.act("memory.create", {"content": {"text": MARK}})
        d.stop()  # its lines are written by a thread of their own (D270): all of them by the stop
    on_lines = [ln for p in on.log_paths for ln in p.read_text().splitlines() if " kungfud.audit " in ln]
    ops = [json.loads(ln.split(" kungfud.audit ", 1)[1])["op"] for ln in on_lines]
    assert sorted(ops) == ["agent.register", "memory.create"], ops  # one node may log each
    assert " INFO " in on_lines[0]
    assert all("kungfud.audit" not in p.read_text() for p in off.log_paths)


class _StalledLog(Daemon):
    """A daemon whose stderr is a pipe nobody reads (a stalled journald)."""

    def spawn(self, listen: str = "127.0.0.1:0") -> None:
        self.pipe_r, w = os.pipe()
        cmd = [sys.executable, "-m", "kungfud", "serve", "--data-dir", str(self.data_dir), "--listen", listen,
               "--config", str(self.config), *self.extra]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=w, cwd=ROOT, text=True)
        os.close(w)


def _metric(url: str, name: str) -> int:
    base = url.replace("ws://", "http://").rsplit("/", 1)[0]
    with urllib.request.urlopen(base + "/metrics", timeout=10) as r:  # noqa: S310 (loopback only)
        for ln in r.read().decode().splitlines():
            if ln.startswith(name + " "):
                return int(float(ln.split()[1]))
    raise AssertionError(f"{name} not in /metrics")


def _dropped_counts(text: bytes) -> list[int]:
    out = []
    for ln in text.decode(errors="replace").splitlines():
        if '"logger": "kungfud.logs"' in ln and "log lines were dropped" in ln:
            out.append(int(json.loads(ln)["msg"].split()[0]))
    return out


@pytest.mark.rules("R12-1")
async def test_a_stalled_log_reader_never_holds_a_reply_and_its_lines_are_dropped_and_counted(tmp_path):
    """D270: with the log's pipe full and nobody reading, every action is
    still answered; past ``log_queue`` lines the log drops and counts
    them (``kungfud_log_lines_dropped_total``), memory stays bounded, and once the
    reader comes back a WARNING line says how many were lost."""
    cfg = tmp_path / "stall.toml"
    cfg.write_text("[server]\nlog_queue = 50\n[limits]\nactions_per_minute = 100000\n")
    d = _StalledLog(tmp_path / "stall", cfg, extra=["--log-format", "json"]).start()
    try:
        agent, key = await register(d.url, "alice")
        async with await Client.connect(d.url, key) as c:
            # ~1,500 lines of ~250 bytes: far past a 64 KiB pipe and the queue of 50
            for chunk in range(30):
                got = await asyncio.wait_for(
                    asyncio.gather(*(c.act("memory.create", {"content": {"i": i}}) for i in range(50))), 30
                )
                assert all(r["memory"].startswith("me_") for r in got)
        dropped = _metric(d.url, "kungfud_log_lines_dropped_total")
        assert dropped > 0
        # the reader comes back: what was queued is written, then the count
        text = b""
        os.set_blocking(d.pipe_r, False)
        deadline = time.monotonic() + 20
        while sum(_dropped_counts(text)) < dropped and time.monotonic() < deadline:
            try:
                text += os.read(d.pipe_r, 1 << 16)
            except BlockingIOError:
                await asyncio.sleep(0.05)
        lines = [json.loads(ln) for ln in text.decode().splitlines()]  # every line whole
        # each WARNING line counts those lost since the last (reading /metrics logged lines too)
        assert sum(_dropped_counts(text)) >= dropped
        assert [x for x in lines if x["logger"] == "kungfud.audit"]  # and the lines it could keep are there
    finally:
        d.stop()
        os.close(d.pipe_r)
