"""``kungfu wake`` end to end (docs/cli.md "wake", docs/agents.md "Agents that
sleep"): the real CLI in a subprocess against a real daemon, running a shell
command when events arrive — with the events, URL and key; one run at a time,
later events coalesced into one next run; resumed from a state file without
repeating a finished run or losing an unfinished one; a self-waking loop slowed
by --cooldown and stopped by --max-runs/--per; reconnecting across a daemon
restart."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.test_cli import ROOT, Cli, cli  # noqa: F401  (the fixture)


def until(cond, timeout: float = 30.0, what: str = "condition", every: float = 0.05):
    """Poll ``cond`` until it returns something truthy (generous margins, no speed
    asserted), every ``every`` seconds: longer for a ``cond`` that starts a process,
    which would otherwise keep a core busy beside the runs it waits for."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = cond()
        if got:
            return got
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}")


def shim(tmp: Path) -> dict:
    """A ``kungfu`` on PATH that runs this tree's CLI, as an installed one would."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    exe = bin_dir / "kungfu"
    exe.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m kungfud.agent_cli "$@"\n')
    exe.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}


class Wake:
    """``kungfu wake`` in the background, in its own process group (a kill
    reaches the run in progress too); stderr (its log) in a file. Every one
    a test started is killed at its end (``_no_wake_left``), whatever the test did."""

    started: list["Wake"] = []

    def __init__(self, cli: Cli, tmp: Path, key: str, *args: str, env: dict | None = None, cwd: Path = ROOT):
        self.log_path = tmp / f"wake-{time.monotonic_ns()}.log"
        self.err = open(self.log_path, "w")
        self.url = cli.url  # with several nodes, one of them
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kungfud.agent_cli", "wake", *args],
            env={**cli.env, **shim(tmp), **(env or {}), "KUNGFU_KEY": key, "KUNGFU_URL": self.url},
            cwd=cwd, stdout=self.err, stderr=self.err, text=True, start_new_session=True,
        )
        Wake.started.append(self)
        until(lambda: "subscribed" in self.log() or self.proc.poll() is not None, what="wake to subscribe")
        assert self.proc.poll() is None, self.log()

    def log(self) -> str:
        return self.log_path.read_text()

    def wait(self, timeout: float = 60.0) -> int:
        try:
            return self.proc.wait(timeout)
        finally:
            self.err.close()

    def kill(self) -> None:
        """SIGKILL to wake and the run in progress (kill -9: nothing cleaned up)."""
        try:  # the group, even after wake exited: a run it left must not outlive the test
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(10)
        self.err.close()


@pytest.fixture(autouse=True)
def _no_wake_left():
    """A test that fails half-way leaves no ``kungfu wake`` (or its run) behind."""
    yield
    while Wake.started:
        Wake.started.pop().kill()


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def runs(path: Path) -> list[list[dict]]:
    """The KUNGFU_EVENTS of each run, as the recording command wrote them."""
    return [json.loads(x) for x in lines(path)]


def asked_entries(run: list[dict]) -> list[int]:
    return [it["ref"]["entry"] for e in run if e["event"] == "turn" for it in e["data"].get("added", [])]


@pytest.fixture
def daemon(shared_daemon):
    """One daemon for the module (tests/conftest.py ``shared_daemon``): each test
    registers agents of its own and reads only what they wrote; the one that
    restarts the daemon starts its own."""
    return shared_daemon


@pytest.fixture
def pair(cli):
    return new_pair(cli)


def new_pair(cli: Cli):
    """alice and bob, speakers in one thread: (thread, alice, alice_key, bob, bob_key, ask)."""
    alice, alice_key = cli.register("alice")
    bob, bob_key = cli.register("bob")
    th = cli.json("thread", "create", key=alice_key)["thread"]
    cli.run("thread", "join", cli.json("thread", "admit", th, "--role", "speaker", key=alice_key)["token"], key=bob_key)

    def ask(text: str) -> int:
        return cli.json("post", th, "--text", text, "--ask", bob, key=alice_key)["entry"]

    return th, alice, alice_key, bob, bob_key, ask


#: wake's --timeout (exit after this long with no event and no run): the test's
#: next action must reach wake within it, and a `kungfu` call takes seconds on
#: the shared 2-core machine under load (2-3 s let wake exit before it came)
QUIET_S = "8"
RECORD = 'printf "%s\\n" "$KUNGFU_EVENTS" >> runs.jsonl'


@pytest.mark.rules("R8-20")
def test_wake_runs_the_command_with_the_events_that_woke_it_and_the_agents_url_and_key(cli, pair, tmp_path):
    th, alice, alice_key, bob, bob_key, ask = pair
    # The run answers with the key it was given (kungfu on PATH, KUNGFU_URL/KEY
    # from wake); that ends bob's obligation: a turn event that only ends one
    # wakes no one (D221), so there is exactly one run.
    cmd = (
        f'{RECORD}; echo "$KUNGFU_URL" > url.txt; kungfu whoami --json > whoami.json; '
        'kungfu turn | { read -r ob obligation ref rest; kungfu thread handle "$ref"; }'
    )
    w = Wake(cli, tmp_path, bob_key, "--exec", cmd, "--timeout", QUIET_S, cwd=tmp_path)
    entry = ask("are you there?")
    assert w.wait() == 0, w.log()
    (run,) = runs(tmp_path / "runs.jsonl")
    assert [e["event"] for e in run] == ["turn"] and asked_entries(run) == [entry]
    assert (tmp_path / "url.txt").read_text().strip() == w.url
    assert json.loads((tmp_path / "whoami.json").read_text())["agent"] == bob
    assert cli.json("turn", key=bob_key)["items"] == []  # the run's action, with bob's key
    assert "run 1 for 1 event(s)" in w.log() and "run 1 exited 0" in w.log() and "run 2" not in w.log()


@pytest.mark.rules("R8-20")
def test_wake_runs_one_at_a_time_and_events_during_a_run_wake_exactly_one_next_run(cli, pair, tmp_path):
    th, alice, alice_key, bob, bob_key, ask = pair
    # The first run waits until the test releases it; three questions arrive meanwhile.
    cmd = f'{RECORD}; echo start >> log; while [ ! -e release ]; do sleep 0.05; done; echo end >> log'
    w = Wake(cli, tmp_path, bob_key, "--exec", cmd, "--timeout", QUIET_S, cwd=tmp_path)
    first = ask("q1")
    until(lambda: lines(tmp_path / "log") == ["start"], what="the first run")
    later = [ask(f"q{n}") for n in (2, 3, 4)]
    time.sleep(0.5)  # the events reach wake while the run goes on
    assert lines(tmp_path / "log") == ["start"]  # no second run beside the first
    (tmp_path / "release").touch()
    assert w.wait() == 0, w.log()
    assert lines(tmp_path / "log") == ["start", "end", "start", "end"]  # one at a time
    got = runs(tmp_path / "runs.jsonl")
    assert [asked_entries(r) for r in got] == [[first], later], w.log()
    assert got[1][0]["seq"] > got[0][-1]["seq"]


@pytest.mark.rules("R8-20")
def test_wake_state_file_resumes_after_the_last_finished_run_repeating_none_and_losing_none(cli, pair, tmp_path):
    th, alice, alice_key, bob, bob_key, ask = pair
    state = tmp_path / "bob.seq"
    # Each run handles what bob owes, so a start finds his turn empty unless an
    # event came while wake was down (then wake runs once at start, D356: with
    # the replayed events, in one run).
    handle = 'kungfu turn --all | while read -r ob obligation ref rest; do kungfu thread handle "$ref" >/dev/null; done'
    cmd = f'{RECORD}; {handle}; if [ -e block ]; then while :; do sleep 0.05; done; fi'
    args = ("--exec", cmd, "--state-file", str(state), "--timeout", QUIET_S)

    w = Wake(cli, tmp_path, bob_key, *args, cwd=tmp_path)
    q1 = ask("q1")
    assert w.wait() == 0, w.log()
    assert [asked_entries(r) for r in runs(tmp_path / "runs.jsonl")] == [[q1]]
    after_q1 = int(state.read_text())

    q2, q3 = ask("q2"), ask("q3")  # while wake is down
    w = Wake(cli, tmp_path, bob_key, *args, cwd=tmp_path)
    assert w.wait() == 0, w.log()
    assert [asked_entries(r) for r in runs(tmp_path / "runs.jsonl")] == [[q1], [q2, q3]]  # q1 not again
    after_q3 = int(state.read_text())
    assert after_q3 > after_q1

    # Killed (kill -9, with its run) before the run for q4 finished: q4 is not lost.
    (tmp_path / "block").touch()
    w = Wake(cli, tmp_path, bob_key, *args, cwd=tmp_path)
    q4 = ask("q4")
    until(lambda: len(runs(tmp_path / "runs.jsonl")) == 3, what="the run for q4")
    w.kill()
    assert int(state.read_text()) == after_q3
    (tmp_path / "block").unlink()
    w = Wake(cli, tmp_path, bob_key, *args, cwd=tmp_path)
    assert w.wait() == 0, w.log()
    assert [asked_entries(r) for r in runs(tmp_path / "runs.jsonl")] == [[q1], [q2, q3], [q4], [q4]]
    assert int(state.read_text()) > after_q3


@pytest.mark.rules("R8-20")
def test_wake_sigterm_ends_the_run_in_progress_keeps_its_events_and_exits_143(cli, pair, tmp_path):
    th, alice, alice_key, bob, bob_key, ask = pair
    state = tmp_path / "bob.seq"
    cmd = f"{RECORD}; trap 'echo terminated >> log; exit 1' TERM; while :; do sleep 0.05; done"
    w = Wake(cli, tmp_path, bob_key, "--exec", cmd, "--state-file", str(state), cwd=tmp_path)
    before = int(state.read_text())
    q1 = ask("q1")
    until(lambda: runs(tmp_path / "runs.jsonl"), what="the run")
    w.proc.terminate()  # systemctl stop: SIGTERM to wake alone
    assert w.wait() == 143, w.log()
    until(lambda: lines(tmp_path / "log") == ["terminated"], what="the run to get SIGTERM")
    assert "stopped (SIGTERM)" in w.log()
    assert int(state.read_text()) == before  # the run did not finish: its event is kept
    w = Wake(cli, tmp_path, bob_key, "--exec", RECORD, "--state-file", str(state), "--timeout", QUIET_S, cwd=tmp_path)
    assert w.wait() == 0, w.log()
    assert [asked_entries(r) for r in runs(tmp_path / "runs.jsonl")] == [[q1], [q1]]


def _self_waking(cli: Cli, th: str, bob: str, alice_key: str) -> tuple[str, dict]:
    """A run whose action wakes it again: it has alice ask bob once more (two
    agents that keep waking each other, seen from one side)."""
    cmd = 'date +%s.%N >> starts; KUNGFU_KEY="$ALICE_KEY" kungfu post "$TH" --text again --ask "$BOB" > /dev/null'
    return cmd, {"ALICE_KEY": alice_key, "TH": th, "BOB": bob}


@pytest.mark.rules("R8-20")
def test_wake_max_runs_per_window_stops_a_self_waking_loop_with_exit_14_and_says_why(cli, pair, tmp_path):
    th, alice, alice_key, bob, bob_key, ask = pair
    cmd, env = _self_waking(cli, th, bob, alice_key)
    state = tmp_path / "bob.seq"
    w = Wake(cli, tmp_path, bob_key, "--exec", cmd, "--max-runs", "3", "--per", "120", "--state-file", str(state),
             env=env, cwd=tmp_path)
    ask("start")
    assert w.wait(60) == 14, w.log()
    assert len(lines(tmp_path / "starts")) == 3
    log = w.log()
    assert "stopping: 3 runs in the last 120s (--max-runs 3 --per 120)" in log, log
    assert "1 event(s) after seq" in log and "not handled" in log
    # The unhandled event stays after the saved seq: a restart runs for it.
    newest = cli.json("turn", key=bob_key)["items"][-1]["ref"]["entry"]
    w = Wake(cli, tmp_path, bob_key, "--exec", RECORD, "--state-file", str(state), "--timeout", QUIET_S, cwd=tmp_path)
    assert w.wait() == 0, w.log()
    assert [asked_entries(r) for r in runs(tmp_path / "runs.jsonl")] == [[newest]]


@pytest.mark.rules("R8-20")
def test_wake_cooldown_spaces_the_runs_of_a_self_waking_loop_and_says_so(cli, pair, tmp_path):
    th, alice, alice_key, bob, bob_key, ask = pair
    cmd, env = _self_waking(cli, th, bob, alice_key)
    cmd = 'date +%s.%N >> ends; ' + cmd + '; date +%s.%N >> ends'
    w = Wake(cli, tmp_path, bob_key, "--exec", cmd, "--cooldown", "0.5", "--max-runs", "3", "--per", "120",
             env=env, cwd=tmp_path)
    ask("start")
    assert w.wait(60) == 14, w.log()
    stamps = [float(x) for x in lines(tmp_path / "ends")]
    starts, ends = stamps[0::2], stamps[1::2]
    assert len(starts) == 3
    # Each run starts at least the cooldown after the previous one ended (a deliberate pause, not a speed).
    assert all(nxt - end >= 0.5 for end, nxt in zip(ends, starts[1:])), stamps
    assert w.log().count("cooling down") == 2, w.log()


@pytest.mark.rules("R8-20")
@pytest.mark.single_node("restarts the daemon on the same port for a wake that reconnects")
def test_wake_reconnects_across_a_daemon_restart_and_runs_for_events_after_it(make_daemon, tmp_path):
    daemon = make_daemon()  # a daemon of its own: it is killed and started again
    cli = Cli(daemon, tmp_path)
    th, alice, alice_key, bob, bob_key, ask = new_pair(cli)
    port = int(daemon.url.rsplit(":", 1)[1].split("/")[0])
    w = Wake(cli, tmp_path, bob_key, "--exec", RECORD, cwd=tmp_path)
    try:
        q1 = ask("q1")
        until(lambda: len(runs(tmp_path / "runs.jsonl")) == 1, what="the first run")
        daemon.kill()  # SIGKILL: wake loses its connection
        time.sleep(0.5)  # it retries against a closed port meanwhile
        daemon.start(listen=f"127.0.0.1:{port}")
        q2 = ask("q2")
        until(lambda: len(runs(tmp_path / "runs.jsonl")) == 2, what="a run after the restart")
        assert w.proc.poll() is None
    finally:
        w.kill()
    assert [asked_entries(r) for r in runs(tmp_path / "runs.jsonl")] == [[q1], [q2]]
    assert "resubscribing after seq" in w.log()


def test_wake_usage_errors_exit_2(cli, pair, tmp_path):
    *_, bob_key, _ = pair
    assert cli.run("wake", "--exec", "true", "--on", "turn,nonsense", key=bob_key, code=2).returncode == 2
    r = cli.run("wake", "--exec", "true", "--max-runs", "3", key=bob_key, code=2)
    assert "--max-runs and --per go together" in r.stderr


@pytest.mark.rules("R8-20")
def test_wake_on_task_offered_runs_for_an_open_task(cli, pair, tmp_path):
    """WIRE.md 1.2 "Open Tasks, announced": ``--on task_offered`` subscribes with
    ``open_tasks: true``; an open Task created by another agent wakes the run
    with a ``task_offered`` event naming it. (Needs the daemon side of WIRE 1.2.)"""
    th, alice, alice_key, bob, bob_key, ask = pair
    w = Wake(cli, tmp_path, bob_key, "--exec", RECORD, "--on", "task_offered", "--timeout", QUIET_S, cwd=tmp_path)
    ask("a question: not a task_offered event, wakes no one here")
    task = cli.json("task", "create", "--output", "a haiku", "--criteria", "5-7-5", key=alice_key)["task"]
    assert w.wait() == 0, w.log()
    (run,) = runs(tmp_path / "runs.jsonl")
    assert [(e["event"], e["data"]["task"], e["data"]["author"]) for e in run] == [("task_offered", task, alice)]
    assert set(run[0]["data"]) == {"task", "author", "contract_version", "at"}  # content-free


def test_wake_a_turn_event_that_only_ends_obligations_wakes_no_one():
    """D221: only events that may ask something of the agent start a run."""
    from kungfud.agent_cli.wake import DEFAULT_ON, wakes

    added = {"event": "turn", "seq": 5, "data": {"added": [{"obligation_id": "ob_1"}], "ended": []}}
    ended = {"event": "turn", "seq": 6, "data": {"added": [], "ended": [{"obligation_id": "ob_1", "why": "handled"}]}}
    outcome = {"event": "outcome", "seq": 7, "data": {"state": "adopted"}}
    offered = {"event": "task_offered", "seq": 8, "data": {"task": "tk_1"}}
    assert [wakes(e, DEFAULT_ON) for e in (added, ended, outcome, offered)] == [True, False, True, False]
    assert [wakes(e, ("outcome", "task_offered")) for e in (added, outcome, offered)] == [False, True, True]


def test_wake_kungfu_events_keeps_the_newest_events_that_fit_in_64_kib():
    """D222: one environment string stays far under Linux's 128 KiB limit."""
    from kungfud.agent_cli.wake import EVENTS_LIMIT, events_env

    batch = [{"event": "turn", "seq": n, "data": {"added": [{"ref": {"thread": "th_" + "x" * 200, "entry": n}}]}}
             for n in range(1, 1001)]
    text, omitted = events_env(batch)
    kept = json.loads(text)
    assert len(text.encode()) <= EVENTS_LIMIT and omitted > 0 and len(kept) + omitted == 1000
    assert kept == batch[omitted:]  # the newest, oldest first
    assert json.loads(events_env(batch[:3])[0]) == batch[:3] and events_env(batch[:3])[1] == 0
    huge = [{"event": "outcome", "seq": 1, "data": {"content": {"reason": "r" * (EVENTS_LIMIT * 2)}}}]
    assert events_env(huge) == ("[]", 1)  # too large alone: left out (the outcome is in `outcomes`)
    assert events_env(batch[:1] + huge) == ("[]", 2)  # the newest does not fit: nothing older is passed either
