"""The `kungfu` CLI end to end: the real entry point as a subprocess
(`python -m kungfud.agent_cli`) against the real daemon. Covers WIRE.md
"Transport" (key, HTTP 401), "Frames"/"Failure" (exit codes per error code,
`--json` error objects), L3 (`--key` retries), "Ops" (every op reachable), and
`subscribe {since}` through `kungfu watch --state-file` (docs/cli.md)."""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import stat
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from kungfud import agent_cli
from kungfud.wire import OPS

ROOT = Path(__file__).resolve().parent.parent.parent


class Cli:
    """Runs `kungfu` with a clean environment: no inherited KUNGFU_* variables,
    profiles in a temporary file, the daemon's URL."""

    def __init__(self, url: str | Any, tmp: Path):
        # url: a URL, or the daemon under test: then each run is a client of the
        # daemon's next node (tests/cluster.py), unless a test set KUNGFU_URL itself
        self.daemon = None if isinstance(url, str) else url
        self.url = url if isinstance(url, str) else url.url
        self.config = tmp / "kungfu" / "profiles.toml"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("KUNGFU_")}
        self.env.update(KUNGFU_CONFIG=str(self.config), KUNGFU_URL=self.url)

    def run(self, *args: str, key: str | None = None, input: str | None = None, code: int | None = 0) -> subprocess.CompletedProcess:
        env = dict(self.env)
        if self.daemon is not None and env["KUNGFU_URL"] == self.url:
            env["KUNGFU_URL"] = self.url = self.env["KUNGFU_URL"] = self.daemon.url
        if key is not None:
            env["KUNGFU_KEY"] = key
        r = subprocess.run(
            [sys.executable, "-m", "kungfud.agent_cli", *args],
            capture_output=True, text=True, env=env, input=input, cwd=ROOT, timeout=60,
        )
        if code is not None:
            assert r.returncode == code, (args, r.returncode, r.stdout, r.stderr)
        return r

    def json(self, *args: str, **kw) -> dict:
        return json.loads(self.run(*args, "--json", **kw).stdout)

    def register(self, name: str) -> tuple[str, str]:
        r = self.json("register", name)
        return r["agent"], r["key"]


@pytest.fixture
def cli(daemon, tmp_path) -> Cli:
    return Cli(daemon, tmp_path)


@pytest.fixture
def daemon(shared_daemon):
    """One daemon for this module's tests (tests/conftest.py ``shared_daemon``):
    each registers agents of its own and reads only what they wrote; the two
    that kill the daemon or read ``task list`` start their own. (The modules
    that import ``cli`` from here keep their own ``daemon``.)"""
    return shared_daemon


def fields(stdout: str) -> dict[str, str]:
    """Human receipt lines `name: value` as a dict."""
    return dict(line.split(": ", 1) for line in stdout.splitlines() if ": " in line and not line.startswith(" "))


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# --- the op catalogue and the documentation (no daemon) ------------------------------

_SAMPLES = {
    "THREAD#ENTRY": "th_x#1", "THREAD": "th_x", "MEMORY[@VERSION]": "me_x@2", "MEMORY": "me_x",
    "AGENT": "ag_x", "TOKEN": "kt_x", "TASK": "tk_x", "ROLE": "observer", "TEXT": "t", "JSON": "{}",
    "NAME": "n", "N": "2", "as_…": "as_x", "tk_…": "tk_x", "en_…": "en_x",
}


def _concrete(command: str) -> list[str]:
    """OP_COMMANDS' placeholder form as a runnable command line."""
    words = shlex.split(re.sub(r"\s*\[[^\]]*\]", "", command))
    return [_SAMPLES.get(w, w.split("|")[0] if "|" in w and not w.startswith("{") else w) for w in words]


def test_wire_ops_every_op_has_a_cli_command_and_is_documented():
    doc = (ROOT / "docs" / "cli.md").read_text()
    assert set(agent_cli.OP_COMMANDS) == set(OPS)
    for op, command in agent_cli.OP_COMMANDS.items():
        ns, call = agent_cli.plan(_concrete(command))
        if op == "agent.register":
            assert ns.cmd == "register"
        elif op == "subscribe":
            assert ns.cmd == "watch"
        else:
            assert call is not None and call.op == op, (op, command, call)
        assert f"| `{op}` |" in doc, f"docs/cli.md does not list {op}"


def test_wire_cli_dispatches_one_verb_by_id_prefix():
    def op(*argv: str) -> str:
        return agent_cli.plan(list(argv))[1].op

    assert op("take", "as_1") == "assignment.take" and op("take", "tk_1") == "task.take"
    assert op("deliver", "as_1", "--text", "x") == "assignment.deliver"
    assert op("deliver", "en_1", "--text", "x") == "task.deliver"
    assert op("judge", "as_1", "adopt") == "assignment.judge" and op("judge", "en_1", "adopt") == "task.judge"
    assert op("drop", "as_1") == "assignment.drop" and op("drop", "en_1") == "task.drop"
    _, take = agent_cli.plan(["take", "tk_1", "--memory", "me_1@3", "--key", "k-1"])
    assert take.args == {"task": "tk_1", "deliver": {"memory": {"memory": "me_1", "version": 3}}}
    assert take.key == "k-1"
    _, post = agent_cli.plan(
        ["post", "th_1", "--text", "hi", "--ask", "ag_1", "ag_2", "--reply-to", "2", "--assign-to", "ag_1", "--criteria", "c"]
    )
    assert post.args == {
        "thread": "th_1", "content": {"text": "hi"}, "reply_to": 2, "ask": ["ag_1", "ag_2"],
        "assign": {"to": "ag_1", "content": {"criteria": "c"}},
    }
    with pytest.raises(agent_cli.UsageError):
        agent_cli.plan(["take", "en_1"])


def test_wire_cli_a_refused_handshake_is_the_rejection_its_status_stands_for():
    """WIRE.md "Transport": 401 is an unknown key, 503 the connection limit; the
    one mapping (kungfud.handshake) gives the CLI's exit code, and any other
    status (a wrong URL path) is failing to connect."""
    from websockets.datastructures import Headers
    from websockets.exceptions import InvalidStatus
    from websockets.http11 import Response

    from kungfud.agent_cli.shell import handshake_failure

    def refused(status: int) -> tuple[str, str, int]:
        e = handshake_failure(InvalidStatus(Response(status, "", Headers())), "ws://127.0.0.1:1/v1")
        return e.error["code"], e.error["next"], agent_cli.EXIT_CODES[e.error["code"]]

    assert refused(401) == ("unauthenticated", "stop", 4)
    assert refused(503) == ("unavailable", "retry", 11)
    assert refused(404) == ("cannot_connect", "stop", 13)


def test_wire_cli_help_epilog_and_docs_document_every_exit_code():
    r = subprocess.run([sys.executable, "-m", "kungfud.agent_cli", "--help"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0
    doc = (ROOT / "docs" / "cli.md").read_text()
    for name, code in agent_cli.EXIT_CODES.items():
        label = name.replace("_", " ") if name == "cannot_connect" else name
        assert re.search(rf"^\s*{code}\s+{re.escape(label if name != 'usage' else 'usage error')}", r.stdout, re.M), name
        assert f"| {code} |" in doc, name


# --- account and profiles --------------------------------------------------------


def test_account_cli_register_saves_profile_with_mode_0600(cli, daemon):
    r = cli.run("register", "alice", "--save", "--profile", "alice")
    got = fields(r.stdout)
    assert got["agent"].startswith("ag_") and got["key"].startswith("kf_")
    mode = stat.S_IMODE(cli.config.stat().st_mode)
    assert mode == 0o600, oct(mode)
    prof = tomllib.loads(cli.config.read_text())["alice"]
    assert prof == {"url": cli.url, "key": got["key"], "agent": got["agent"]}  # the URL it registered at
    # A second profile keeps the first one and the mode.
    cli.run("register", "bob", "--save", "--profile", "bob")
    assert set(tomllib.loads(cli.config.read_text())) == {"alice", "bob"}
    assert stat.S_IMODE(cli.config.stat().st_mode) == 0o600
    # The profile gives identity and URL, even with KUNGFU_URL pointing elsewhere.
    cli.env["KUNGFU_URL"] = f"ws://127.0.0.1:{closed_port()}/v1"
    me = cli.json("--profile", "alice", "whoami")
    assert me == {"agent": got["agent"], "status": "active", "content": {"name": "alice"}}
    # An existing profile is never overwritten by accident.
    r = cli.run("register", "again", "--save", "--profile", "alice", code=2)
    assert "already exists" in r.stderr


@pytest.mark.rules("L3-2", "L3-6")
def test_L3_6_cli_register_replayed_with_key_hides_the_agent_key(cli):
    first = cli.json("register", "carol", "--key", "reg-carol-1")
    again = cli.run("register", "carol", "--key", "reg-carol-1", "--json")
    replay = json.loads(again.stdout)
    assert first["key"].startswith("kf_")
    assert replay == {"agent": first["agent"], "key": None}
    assert "replayed" in again.stderr


# --- memory ----------------------------------------------------------------------


@pytest.mark.rules("R5-2", "R5-3", "R5-7")
def test_memory_cli_create_get_update_list_in_human_and_json_form(cli):
    _, key = cli.register("alice")
    made = fields(cli.run("memory", "create", "--text", "hello", key=key).stdout)
    mem = made["memory"]
    assert mem.startswith("me_") and made["version"] == "1" and made["visibility"] == "private"

    human = cli.run("memory", "get", mem, key=key).stdout
    assert f"memory: {mem}" in human and "version: 1" in human and "status: valid" in human
    assert 'content: {"text": "hello"}' in human  # content printed as JSON (L6)

    got = cli.json("memory", "get", mem, key=key)
    assert got["memory"] == mem and got["version"] == 1 and got["latest"] == 1
    assert got["visibility"] == "private" and got["content"] == {"text": "hello"}

    # Content from stdin, then a new version from --content.
    other = cli.json("memory", "create", "--file", "-", input='{"title": "plan", "steps": [1, 2]}', key=key)
    upd = cli.json("memory", "update", other["memory"], "--content", '{"title": "plan v2"}', key=key)
    assert upd == {"memory": other["memory"], "version": 2}
    assert cli.json("get", f"{other['memory']}@1", key=key)["content"] == {"title": "plan", "steps": [1, 2]}
    assert cli.json("memory", "get", other["memory"], key=key)["content"] == {"title": "plan v2"}

    listed = cli.run("memory", "list", "--all", key=key).stdout.splitlines()
    assert any(line.startswith(f"{mem} v1 private valid") for line in listed)
    assert any(line.startswith(f"{other['memory']} v2 private valid") for line in listed)

    r = cli.run("memory", "create", "--content", "[1, 2]", key=key, code=2)
    assert "expected a JSON object" in r.stderr


# --- idempotency -------------------------------------------------------------------


@pytest.mark.rules("L3-2", "L3-3")
def test_L3_2_cli_key_retry_returns_the_same_receipt_replayed(cli):
    _, key = cli.register("alice")
    first = cli.run("memory", "create", "--text", "once", "--key", "retry-me-1", key=key)
    again = cli.run("memory", "create", "--text", "once", "--key", "retry-me-1", key=key)
    assert again.stdout == first.stdout
    assert "replayed" in again.stderr and "replayed" not in first.stderr
    as_json = cli.json("memory", "create", "--text", "once", "--key", "retry-me-1", key=key)
    assert as_json == {"memory": fields(first.stdout)["memory"], "version": 1, "visibility": "private"}
    assert len(cli.json("memory", "list", "--all", key=key)["items"]) == 1  # one Memory, not three
    # L3-3: the same key with other args is refused, exit 8, and changes nothing.
    r = cli.run("memory", "create", "--text", "twice", "--key", "retry-me-1", key=key, code=8)
    assert r.stderr.startswith("idempotency_mismatch: ")
    assert len(cli.json("memory", "list", "--all", key=key)["items"]) == 1
    # Without --key, each action gets a fresh key: two commands, two Memories.
    cli.run("memory", "create", "--text", "once", key=key)
    assert len(cli.json("memory", "list", "--all", key=key)["items"]) == 2


# --- exit codes (WIRE.md "Failure") -------------------------------------------------------


@pytest.mark.rules("L2-4")
def test_wire_cli_exit_code_distinguishes_not_found(cli):
    _, key = cli.register("alice")
    r = cli.run("memory", "get", "me_01m8pbrq3wek2fgvkj3k6bn9wg", "--json", key=key, code=5)
    err = json.loads(r.stdout)
    assert err["code"] == "not_found" and err["next"] == "stop" and err["reason"]
    assert r.stderr.splitlines()[0] == f"not_found: {err['reason']} (next: stop)"


@pytest.mark.rules("L2-4")
def test_wire_cli_exit_code_distinguishes_conflict(cli):
    _, key = cli.register("alice")
    mem = cli.json("memory", "create", "--text", "x", key=key)["memory"]
    cli.run("memory", "publish", mem, key=key)
    r = cli.run("memory", "publish", mem, key=key, code=7)
    assert r.stderr.startswith("conflict: ") and "(next: stop)" in r.stderr


@pytest.mark.rules("L2-4")
def test_wire_cli_exit_code_distinguishes_bad_request_and_prints_the_hint(cli):
    me, key = cli.register("alice")
    r = cli.run("call", "memory.get", "--args", '{"memory": 5}', key=key, code=3)
    assert r.stderr.startswith("bad_request: ") and "`memory` must be a Memory id" in r.stderr
    # A read sent with a key is bad_request too (WIRE.md "Frames").
    cli.run("call", "agent.whoami", "--key", "k", key=key, code=3)
    # A governor removing itself: bad_request with a hint, printed as a command.
    th = cli.json("thread", "create", key=key)["thread"]
    r = cli.run("thread", "remove", th, me, key=key, code=3)
    hint = [line for line in r.stderr.splitlines() if line.startswith("hint: ")]
    assert hint == [f"hint: kungfu call thread.leave --args '{json.dumps({'thread': th})}'"]


def test_wire_cli_exit_code_distinguishes_unauthenticated_key_refused_with_http_401(cli):
    r = cli.run("whoami", "--json", key="kf_not_a_key_of_this_daemon", code=4)
    assert json.loads(r.stdout)["code"] == "unauthenticated"
    assert "401" in r.stderr
    # No key at all: refused before connecting, same exit code.
    r = cli.run("turn", code=4)
    assert "no agent key" in r.stderr


@pytest.mark.rules("R4-1")
def test_wire_cli_exit_code_distinguishes_forbidden_and_admin_set_status(cli, daemon):
    bob, bob_key = cli.register("bob")
    r = cli.run("admin", "set-status", bob, "deactivated", key=bob_key, code=6)
    assert r.stderr.startswith("forbidden: ")
    got = fields(cli.run("admin", "set-status", bob, "deactivated", key=daemon.admin_key).stdout)
    assert got["agent"] == bob and got["status"] == "deactivated"
    r = cli.run("memory", "create", "--text", "x", key=bob_key, code=6)  # R4-1
    assert r.stderr.startswith("forbidden: ")
    cli.run("admin", "set-status", bob, "deactivated", key=daemon.admin_key, code=7)  # changes nothing
    cli.run("admin", "set-status", bob, "active", key=daemon.admin_key)
    cli.run("memory", "create", "--text", "x", key=bob_key)


def test_wire_cli_exit_code_distinguishes_cannot_connect_and_usage(cli):
    url = f"ws://127.0.0.1:{closed_port()}/v1"
    r = cli.run("--url", url, "whoami", "--json", key="kf_x", code=13)
    assert json.loads(r.stdout)["code"] == "cannot_connect"
    assert r.stderr.startswith("cannot_connect: ")
    cli.run("deliver", "tk_01m8pbrq3wek2fgvkj3k6bn9wg", "--text", "x", key="kf_x", code=2)  # wrong kind of id
    cli.run("memory", "frobnicate", key="kf_x", code=2)
    cli.run("--profile", "nobody", "whoami", code=2)


def test_wire_cli_exit_code_path_refused_with_http_404_is_cannot_connect(cli, daemon):
    _, key = cli.register("alice")
    cli.run("--url", daemon.url.rsplit("/", 1)[0] + "/nope", "whoami", key=key, code=13)


# --- a whole collaboration, CLI only ------------------------------------------------------


@pytest.mark.rules("R8-4", "R8-22", "R8-25", "R8-29", "R8-31", "R8-35", "R8-37", "R6.4-20")
def test_thread_cli_collaboration_end_to_end(cli):
    cli.run("register", "alice", "--save", "--profile", "alice")
    bob, bob_key = cli.register("bob")  # bob uses KUNGFU_KEY
    alice = ["--profile", "alice"]

    th = cli.json(*alice, "thread", "create", "--title", "release 1.2")["thread"]
    token = cli.json(*alice, "thread", "admit", th, "--role", "speaker")["token"]
    joined = fields(cli.run("thread", "join", token, key=bob_key).stdout)
    assert joined["thread"] == th and joined["role"] == "speaker"

    # Alice asks bob; bob's turn names the entry the way `handle` takes it.
    post = fields(cli.run(*alice, "post", th, "--text", "review the changelog?", "--ask", bob).stdout)
    assert post["entry"] == "1" and post["responders"] == bob
    turn = cli.run("turn", key=bob_key).stdout.splitlines()
    assert len(turn) == 1 and f" respond {th}#1 next=respond" in turn[0]
    ob = turn[0].split()[0]
    handled = fields(cli.run("thread", "handle", f"{th}#1", "--note", "looked, fine", key=bob_key).stdout)
    assert handled["ended"] == ob
    assert cli.run("turn", key=bob_key).stdout.strip() == "(none)"

    # Assignment: post with --assign-to, found among opportunities, taken, delivered.
    post = cli.json(*alice, "post", th, "--text", "write upgrade notes", "--reply-to", "1",
                    "--assign-to", bob, "--criteria", "covers every breaking change")
    assignment = post["assignment"]
    opps = cli.run("opportunities", key=bob_key).stdout
    assert f"assignment {th}/{assignment} creator=" in opps
    taken = fields(cli.run("take", assignment, key=bob_key).stdout)
    assert taken["state"] == "taken" and taken["deliver_by"]
    assert [line.split()[1:3] for line in cli.run("turn", key=bob_key).stdout.splitlines()] == [
        ["deliver", f"{th}/{assignment}"]
    ]
    delivered = fields(cli.run("deliver", assignment, "--text", "notes: …", key=bob_key).stdout)
    assert delivered["state"] == "delivered"
    cli.run("deliver", assignment, "--text", "again", key=bob_key, code=7)

    # Alice judges from her turn.
    judge = cli.json(*alice, "turn")["items"]
    assert [(i["obligation"], i["ref"]) for i in judge] == [("judge", {"thread": th, "assignment": assignment})]
    assert fields(cli.run(*alice, "judge", assignment, "adopt").stdout)["state"] == "adopted"

    ws = cli.json(*alice, "get", assignment)
    assert ws["state"] == "adopted" and ws["delivery"]["content"] == {"text": "notes: …"}
    human = cli.run(*alice, "assignment", "get", assignment).stdout
    assert "state: adopted" in human and 'content: {"text": "notes: …"}' in human

    entries = cli.json(*alice, "thread", "entries", th, "--full", "--all")["items"]
    assert [e["content"] for e in entries] == [{"text": "review the changelog?"}, {"text": "write upgrade notes"}]
    assert entries[0]["responses"] == [{"agent": bob, "state": "handled", "content": {"note": "looked, fine"}}]
    shown = cli.run(*alice, "thread", "get", th).stdout
    assert f"thread: {th}" in shown and "member_count: 2" in shown and "entries: 2" in shown

    # Bob leaves; the thread closes.
    cli.run("thread", "leave", th, key=bob_key)
    assert fields(cli.run(*alice, "thread", "close", th).stdout)["status"] == "closed"
    cli.run(*alice, "post", th, "--text", "late", code=7)


@pytest.mark.rules("R8-29", "R8-35", "R8-38", "L2-6")
def test_task_cli_cycle_publish_take_deliver_reject_retake_adopt(make_daemon, tmp_path):
    cli = Cli(make_daemon(), tmp_path)  # a daemon of its own: `task list` lists every open Task of the daemon
    alice, alice_key = cli.register("alice")
    bob, bob_key = cli.register("bob")
    tk = cli.json("task", "create", "--output", "a haiku", "--criteria", "5-7-5", key=alice_key)
    assert tk["contract_version"] == 1
    task = tk["task"]
    listed = cli.run("task", "list", key=bob_key).stdout
    assert listed.startswith(f"{task} by {alice} open v1 accepting")

    en = cli.json("take", task, key=bob_key)
    assert en["task"] == task and en["state"] == "taken" and en["existing"] is False
    assert cli.json("take", task, key=bob_key)["existing"] is True  # L2-6: the same engagement
    engagement = en["engagement"]
    assert cli.json("deliver", engagement, "--text", "leaves fall", key=bob_key)["state"] == "delivered"
    r = cli.run("judge", engagement, "reject", key=alice_key, code=3)  # a rejection needs a reason
    assert r.stderr.startswith("bad_request: ")
    assert cli.json("judge", engagement, "reject", "--reason", "not 5-7-5", key=alice_key)["state"] == "rejected"
    seen = cli.json("engagement", "get", engagement, key=bob_key)
    assert seen["judgment"]["verdict"] == "reject" and seen["judgment"]["content"] == {"reason": "not 5-7-5"}

    # Revise, retake with delivery in one action, adopt.
    assert cli.json("task", "revise", task, "--output", "a haiku", "--criteria", "5-7-5, about frogs",
                    key=alice_key)["contract_version"] == 2
    again = cli.json("take", task, "--text", "old pond / frog jumps in / splash", key=bob_key)
    assert again["engagement"] != engagement and again["contract_version"] == 2
    assert cli.json("engagement", "get", again["engagement"], key=bob_key)["state"] == "delivered"
    assert fields(cli.run("judge", again["engagement"], "adopt", key=alice_key).stdout)["state"] == "adopted"

    # Pause stops new engagements; a dropped engagement goes through `drop en_…`.
    assert cli.json("task", "pause", task, key=alice_key)["accepting"] is False
    cli.run("take", task, key=bob_key, code=7)
    assert cli.json("task", "resume", task, key=alice_key)["accepting"] is True
    third = cli.json("take", task, key=bob_key)["engagement"]
    dropped = cli.json("drop", third, key=bob_key)
    assert dropped["engagement"] == third and dropped["state"] == "dropped"
    got = cli.json("task", "get", task, key=alice_key)
    assert got["contract"]["content"]["criteria"] == "5-7-5, about frogs"
    assert {e["state"] for e in got["engagements"]} >= {"rejected", "adopted", "dropped"}
    assert cli.json("task", "list", "--mine", key=alice_key)["items"][0]["task"] == task


def test_wire_cli_call_sends_any_op_as_written(cli):
    me, key = cli.register("alice")
    assert cli.json("call", "hello", "--args", json.dumps({"key": key})) == {"agent": me, "status": "active"}
    assert cli.json("call", "agent.whoami", key=key)["agent"] == me
    made = cli.json("call", "memory.create", "--args", "-", input='{"content": {"a": 1}}', key=key)
    assert made["version"] == 1
    cli.run("call", "no.such.op", key=key, code=3)


# --- subscribe {since}: watch with a state file ------------------------------------------


@pytest.mark.rules("R8-20")
def test_wire_subscribe_cli_watch_resumes_from_state_file_without_gaps(cli, tmp_path):
    alice, alice_key = cli.register("alice")
    bob, bob_key = cli.register("bob")
    th = cli.json("thread", "create", key=alice_key)["thread"]
    token = cli.json("thread", "admit", th, key=alice_key)["token"]
    cli.run("thread", "join", token, key=bob_key)
    state = tmp_path / "bob.seq"

    # No seq yet: subscribing records the newest seq, so nothing after it is missed.
    cli.run("watch", "--state-file", str(state), "--timeout", "0.3", key=bob_key)
    start = int(state.read_text())

    def ask(n: int) -> None:
        cli.run("post", th, "--text", f"question {n}", "--ask", bob, key=alice_key)

    for n in (1, 2, 3):
        ask(n)
    r = cli.run("watch", "--state-file", str(state), "--count", "2", "--timeout", "20", "--json", key=bob_key)
    first = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(first) == 2 and all(e["seq"] > start for e in first)
    assert int(state.read_text()) == first[-1]["seq"]

    ask(4)  # while nobody watches
    r = cli.run("watch", "--state-file", str(state), "--count", "2", "--timeout", "20", "--json", key=bob_key)
    second = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(second) == 2

    everything = cli.run("watch", "--since", str(start), "--count", "4", "--timeout", "20", "--json", key=bob_key)
    full = [json.loads(line) for line in everything.stdout.splitlines()]
    assert first + second == full  # in order, no gap, no duplicate
    assert [e["data"]["added"][0]["ref"] for e in full] == [{"thread": th, "entry": n} for n in (1, 2, 3, 4)]

    # Human form: one line per change, refs ready for `kungfu thread handle`.
    human = cli.run("watch", "--since", str(start), "--count", "1", "--timeout", "20", key=bob_key).stdout
    assert re.fullmatch(rf"{full[0]['seq']} turn \+ob_\S+ respond {th}#1 next=respond\n", human)


# --- a lost connection (a stand-in server that drops the first connections) ----------------


async def _drop_then_answer(drops: int, argv: list[str]) -> tuple[int, str, list[dict]]:
    """Run `kungfu` against a websocket server that closes the first ``drops``
    connections after reading the request, then answers; returns (exit code,
    stderr, frames received)."""
    import asyncio

    from websockets.asyncio.server import serve

    frames: list[dict] = []

    async def handler(ws):
        frame = json.loads(await ws.recv())
        frames.append(frame)
        if len(frames) <= drops:
            await ws.close()
            return
        result = {"memory": "me_01m8pbrq3wek2fgvkj3k6bn9wg", "version": 1, "visibility": "private"}
        await ws.send(json.dumps({"id": frame["id"], "ok": True, "replayed": False, "result": result}))
        async for _ in ws:
            pass

    env = {k: v for k, v in os.environ.items() if not k.startswith("KUNGFU_")}
    async with serve(handler, "127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "kungfud.agent_cli", "--url", f"ws://127.0.0.1:{port}/v1", *argv,
            env={**env, "KUNGFU_KEY": "kf_test"}, cwd=ROOT,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        _, err = await asyncio.wait_for(proc.communicate(), 30)
    return proc.returncode, err.decode(), frames


async def test_wire_cli_lost_connection_resends_the_action_once_with_the_same_key():
    code, err, frames = await _drop_then_answer(1, ["memory", "create", "--text", "x", "--json"])
    assert code == 0, err
    assert len(frames) == 2 and frames[0]["key"] == frames[1]["key"]
    assert frames[0]["op"] == frames[1]["op"] == "memory.create" and frames[0]["args"] == frames[1]["args"]


async def test_wire_cli_lost_connection_twice_exits_13_and_prints_the_key_to_retry_with():
    code, err, frames = await _drop_then_answer(2, ["memory", "create", "--text", "x"])
    assert code == 13
    assert len(frames) == 2 and frames[0]["key"] == frames[1]["key"]
    assert f"--key {frames[0]['key']}" in err
    code, err, frames = await _drop_then_answer(2, ["memory", "create", "--text", "x", "--key", "mine-1"])
    assert code == 13 and [f["key"] for f in frames] == ["mine-1", "mine-1"] and "--key mine-1" in err


@pytest.mark.rules("R8-20")
@pytest.mark.single_node("restarts the daemon on the same port for a client that reconnects (across nodes: tests/reliability/test_nodes_crash.py)")
def test_wire_subscribe_cli_watch_resubscribes_with_since_after_the_daemon_restarts(make_daemon, tmp_path):
    daemon = make_daemon()  # a daemon of its own: it is killed and started again
    cli = Cli(daemon, tmp_path)
    alice, alice_key = cli.register("alice")
    bob, bob_key = cli.register("bob")
    th = cli.json("thread", "create", key=alice_key)["thread"]
    cli.run("thread", "join", cli.json("thread", "admit", th, key=alice_key)["token"], key=bob_key)
    port = int(daemon.url.rsplit(":", 1)[1].split("/")[0])
    watch = subprocess.Popen(
        [sys.executable, "-m", "kungfud.agent_cli", "watch", "--count", "2", "--timeout", "30", "--json"],
        env={**cli.env, "KUNGFU_KEY": bob_key}, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert "subscribed" in watch.stderr.readline()
        cli.run("post", th, "--text", "q1", "--ask", bob, key=alice_key)
        first = json.loads(watch.stdout.readline())
        daemon.kill()  # SIGKILL: the watch loses its connection
        daemon.start(listen=f"127.0.0.1:{port}")
        cli.run("post", th, "--text", "q2", "--ask", bob, key=alice_key)
        second = json.loads(watch.stdout.readline())
        assert watch.wait(30) == 0
    finally:
        if watch.poll() is None:
            watch.kill()
        watch.wait()
    assert [e["data"]["added"][0]["ref"]["entry"] for e in (first, second)] == [1, 2]
    assert second["seq"] > first["seq"]
    assert "resubscribing after seq" in watch.stderr.read()


@pytest.mark.rules("R6.3-7", "R6.3-8", "R8-18")
def test_thread_cli_no_ask_ends_an_exchange_and_printed_refs_paste_into_the_next_command(cli):
    """docs/cli.md "Ending an exchange" and "Output": `post --no-ask` sends `ask: []`
    (a reply that obligates no one), and a ref as a list prints it
    (`th_…/as_…`) is taken as it stands."""
    cli.run("register", "alice", "--save", "--profile", "alice")
    bob, bob_key = cli.register("bob")
    alice = ["--profile", "alice"]
    th = cli.json(*alice, "thread", "create", "--title", "t")["thread"]
    cli.run("thread", "join", cli.json(*alice, "thread", "admit", th, "--role", "speaker")["token"], key=bob_key)

    cli.run(*alice, "post", th, "--text", "which tool?", "--ask", bob)
    answer = cli.json("post", th, "--reply-to", "1", "--text", "alembic", key=bob_key)
    assert answer["responders"] != []  # a plain reply obligates the question's author
    assert cli.run(*alice, "turn").stdout.strip() != "(none)"
    thanks = cli.json(*alice, "post", th, "--reply-to", "2", "--text", "thanks", "--no-ask")
    assert thanks["responders"] == [] and thanks["ended"]
    for who in (alice, []):
        assert cli.run(*who, "turn", key=None if who else bob_key).stdout.strip() == "(none)"
    r = cli.run(*alice, "post", th, "--text", "x", "--ask", bob, "--no-ask", code=2)
    assert "--no-ask" in r.stderr

    cli.run(*alice, "post", th, "--text", "notes", "--no-ask", "--assign-to", bob, "--criteria", "c")
    line = next(l for l in cli.run("opportunities", key=bob_key).stdout.splitlines() if l.startswith("assignment "))
    ref = line.split()[1]
    assert ref.startswith(f"{th}/as_"), line
    assert fields(cli.run("take", ref, key=bob_key).stdout)["state"] == "taken"
    assert fields(cli.run("deliver", ref, "--text", "done", key=bob_key).stdout)["state"] == "delivered"
    assert fields(cli.run(*alice, "judge", ref, "adopt").stdout)["state"] == "adopted"
