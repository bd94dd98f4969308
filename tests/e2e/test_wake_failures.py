"""``kungfu wake`` never lets work stall silently (issue 37 §2, D355–D357): a run
that fails is logged as an error and run again, with a growing pause, for the
same events, which stay unhandled in the state file until a run succeeds; the
command finds the ``kungfu`` wake was started as, even with no virtualenv on
PATH; the agent's own ``take`` does not wake it again; and at start wake runs
once when the turn is not empty, whatever the state file says. The real CLI in
subprocesses against a real daemon."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kungfud.agent_cli.wake import DEFAULT_ON, run_path, wakes
from tests.e2e.test_cli import ROOT, Cli, cli  # noqa: F401  (the fixture)
from tests.e2e.test_cli_wake import RECORD, Wake, new_pair, runs, until


@pytest.fixture
def daemon(shared_daemon):
    """One daemon for the module: each test registers agents of its own."""
    return shared_daemon


def seqs_run(log: str) -> list[str]:
    return re.findall(r"wake: run \d+ for \d+ event\(s\), (.*)", log)


@pytest.mark.rules("R8-20", "R8-21")
def test_a_failed_run_is_logged_run_again_with_backoff_and_never_recorded_as_handled(cli, tmp_path):
    th, alice, alice_key, bob, bob_key, ask = new_pair(cli)
    state = tmp_path / "bob.seq"
    # Fails (exit 3) until the file `ok` exists; records the events of every attempt.
    w = Wake(cli, tmp_path, bob_key, "--exec", f"{RECORD}; [ -e ok ] || exit 3", "--state-file", str(state), cwd=tmp_path)
    try:
        saved = int(state.read_text())
        ask("first")
        until(lambda: w.log().count("FAILED with exit 3") >= 2, timeout=60, what="two failed runs")
        log = w.log()
        assert "ERROR: run 1 FAILED with exit 3" in log and "NOT handled" in log, log
        assert "running again in 1s" in log and "running again in 2s" in log, log  # the pause grows
        assert int(state.read_text()) == saved, log  # nothing recorded as handled
        (tmp_path / "ok").write_text("")
        until(lambda: int(state.read_text()) > saved, timeout=60, what="the state file to move on", every=0.2)
    finally:
        w.kill()
    attempts = runs(tmp_path / "runs.jsonl")
    assert len(attempts) >= 3
    assert all(a == attempts[0] for a in attempts), attempts  # the same events, each time
    assert attempts[0][0]["event"] == "turn" and int(state.read_text()) >= attempts[0][-1]["seq"]


@pytest.mark.rules("R8-20")
def test_the_command_finds_the_kungfu_wake_was_started_as_without_it_on_path(cli, tmp_path):
    th, alice, alice_key, bob, bob_key, ask = new_pair(cli)
    installed = Path(sys.executable).parent / "kungfu"
    assert installed.exists(), "the test runs from an installed tree (pip install -e .), as README says"
    bare = "/usr/bin:/bin"
    assert shutil.which("kungfu", path=bare) is None
    log = tmp_path / "wake.log"
    proc = subprocess.Popen(
        [str(installed), "wake", "--exec", "kungfu whoami --json > whoami.json", "--timeout", "30"],
        env={**cli.env, "PATH": bare, "KUNGFU_KEY": bob_key, "KUNGFU_URL": cli.url}, cwd=tmp_path,
        stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True,
    )
    try:
        until(lambda: "subscribed" in log.read_text() or proc.poll() is not None, what="wake to subscribe")
        ask("who are you?")
        until(lambda: (tmp_path / "whoami.json").stat().st_size if (tmp_path / "whoami.json").exists() else 0,
              timeout=60, what="the run's kungfu whoami")
        until(lambda: "exited" in log.read_text(), what="the run to end")
    finally:
        proc.kill()
        proc.wait(10)
    assert json.loads((tmp_path / "whoami.json").read_text())["agent"] == bob, log.read_text()
    assert "FAILED" not in log.read_text(), log.read_text()


@pytest.mark.rules("R8-20")
def test_its_own_take_does_not_wake_the_agent_again(cli, tmp_path):
    th, alice, alice_key, bob, bob_key, ask = new_pair(cli)
    w = Wake(cli, tmp_path, bob_key, "--exec", f"{RECORD}; {ROOT}/examples/wake/worker.sh", "--timeout", "4", cwd=tmp_path)
    try:
        asg = cli.json("post", th, "--text", "write it", "--assign-to", bob, "--criteria", "any", key=alice_key)["assignment"]
        until(lambda: cli.json("turn", key=alice_key)["items"], timeout=60, what="the delivery to judge", every=0.5)
        cli.run("judge", asg, "adopt", key=alice_key)
        assert w.wait(60) == 0, w.log()
    finally:
        w.kill()
    got = runs(tmp_path / "runs.jsonl")
    # Run 1: offered and asked; the take (+deliver) and the delivery (-deliver) wake
    # no one; run 2: how it ended.
    assert [sorted({e["event"] for e in r}) for r in got] == [["opportunity", "turn"], ["outcome"]], (got, w.log())


@pytest.mark.rules("R8-20", "R8-21")
def test_at_start_wake_runs_once_when_the_turn_is_not_empty(cli, tmp_path):
    th, alice, alice_key, bob, bob_key, ask = new_pair(cli)
    state = tmp_path / "bob.seq"
    ask("still waiting?")
    # A wake that is not woken by turn events moves the state file past the ask,
    # as a run that failed silently once did: the event will not come again.
    first = Wake(cli, tmp_path, bob_key, "--on", "outcome", "--exec", "true", "--state-file", str(state), "--timeout", "3",
                 cwd=tmp_path)
    assert first.wait(60) == 0, first.log()
    assert "running once" not in first.log()
    handle = 'kungfu turn | { read -r ob obligation ref rest; kungfu thread handle "$ref"; }'
    w = Wake(cli, tmp_path, bob_key, "--exec", f"{RECORD}; {handle}", "--state-file", str(state), "--timeout", "4",
             cwd=tmp_path)
    try:
        assert w.wait(60) == 0, w.log()
    finally:
        w.kill()
    assert "turn is not empty at start: running once" in w.log(), w.log()
    assert runs(tmp_path / "runs.jsonl") == [[]], w.log()  # one run, woken by no event
    assert cli.json("turn", key=bob_key)["items"] == []


@pytest.mark.rules("R8-20")
def test_which_turn_events_wake_and_the_runs_path():
    def turn(*obligations: str) -> dict:
        return {"event": "turn", "data": {"added": [{"obligation": o} for o in obligations], "ended": []}}

    assert not wakes(turn("deliver"), DEFAULT_ON)  # the agent's own take
    assert wakes(turn("deliver", "respond"), DEFAULT_ON) and wakes(turn("judge"), DEFAULT_ON)
    assert run_path("/usr/bin:/bin", "/venv/bin") == "/usr/bin:/bin:/venv/bin"
    assert run_path("/venv/bin:/usr/bin", "/venv/bin") == "/venv/bin:/usr/bin"  # the user's order is kept
    assert run_path(None, None) == os.defpath
