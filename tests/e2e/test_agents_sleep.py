"""docs/agents.md "Agents that sleep" runs as it is written: the worker and the
judge shown there are the bytes of examples/wake/*.sh, and each, under
``kungfu wake`` as the doc starts it, does its part against a live daemon —
the worker takes what is offered, answers, delivers, and sleeps; the judge
runs a test command and adopts or rejects with the test's output as reason."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
from pathlib import Path

import pytest

from tests.e2e.test_cli import ROOT, Cli, cli  # noqa: F401  (the fixture)
from tests.e2e.test_cli_wake import shim, until

DOC = ROOT / "docs" / "agents.md"


def sh_blocks() -> list[str]:
    return re.findall(r"^```sh\n(.*?)^```", DOC.read_text(), flags=re.S | re.M)


@pytest.mark.parametrize("script", ["worker.sh", "judge.sh"])
def test_docs_agents_that_sleep_show_the_example_scripts_byte_for_byte(script):
    text = (ROOT / "examples" / "wake" / script).read_text()
    assert text in sh_blocks(), f"docs/agents.md does not show examples/wake/{script} as it is"
    assert (ROOT / "examples" / "wake" / script).stat().st_mode & 0o111  # runnable as the doc runs it


def documented_wake(name: str) -> str:
    """The ``kungfu wake …`` line of docs/agents.md that runs examples/wake/NAME."""
    found = [line for b in sh_blocks() for line in b.splitlines() if line.startswith(f"kungfu wake --exec examples/wake/{name}")]
    assert len(found) == 1, found
    return found[0]


def start(cli: Cli, tmp: Path, key: str, command: str, env: dict | None = None) -> tuple[subprocess.Popen, Path]:
    log = tmp / f"wake-{key[-6:]}.log"
    proc = subprocess.Popen(
        command, shell=True, cwd=ROOT, stdout=open(log, "w"), stderr=subprocess.STDOUT, text=True,
        env={**cli.env, **shim(tmp), **(env or {}), "KUNGFU_KEY": key, "KUNGFU_URL": cli.url},
        start_new_session=True,  # stop() ends the shell, the wake it started and wake's run alike
    )
    until(lambda: "subscribed" in log.read_text() or proc.poll() is not None, what="wake to subscribe")
    assert proc.poll() is None, log.read_text()
    return proc, log


def stop(proc: subprocess.Popen) -> None:
    """SIGKILL to the documented line's whole process group: the shell, the
    ``kungfu wake`` it runs and any run in progress (killing the shell alone
    left ``kungfu wake`` running after the suite, issue 37 §3)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(10)


@pytest.mark.rules("R8-20", "R6.3-7", "R6.3-13")
def test_docs_the_sleeping_worker_takes_answers_and_delivers_when_woken(cli, tmp_path):
    lead, lead_key = cli.register("lead")
    worker, worker_key = cli.register("worker")
    th = cli.json("thread", "create", key=lead_key)["thread"]
    cli.run("thread", "join", cli.json("thread", "admit", th, "--role", "speaker", key=lead_key)["token"], key=worker_key)

    command = documented_wake("worker.sh").replace("~/.kungfu-worker.seq", shlex.quote(str(tmp_path / "w.seq")))
    proc, log = start(cli, tmp_path, worker_key, command + " --timeout 4")
    try:
        q = cli.json("post", th, "--text", "Which migration tool?", "--ask", worker, key=lead_key)["entry"]
        asg = cli.json("post", th, "--text", "Write the migration", "--assign-to", worker, "--criteria", "it runs",
                       key=lead_key)["assignment"]
        task = cli.json("task", "create", "--output", "a haiku", "--criteria", "5-7-5", "--audience", worker, "--adoption-limit", "1",
                        key=lead_key)["task"]
        # The worker took both, delivered both, answered: the lead now judges two deliveries.
        judged = until(lambda: (lambda items: items if len(items) == 2 else None)(cli.json("turn", key=lead_key)["items"]),
                       timeout=60, what="two deliveries to judge", every=0.5)
        assert sorted(i["obligation"] for i in judged) == ["judge", "judge"]
        for item in judged:
            ref = item["ref"]
            cli.run("judge", ref.get("assignment") or ref["engagement"], "adopt", key=lead_key)
        assert proc.wait(60) == 0, log.read_text()  # quiet for 4 s after the outcomes' run: asleep
    finally:
        stop(proc)
    assert cli.json("turn", key=worker_key)["items"] == [] and cli.json("opportunities", key=worker_key)["items"] == []
    assert cli.json("turn", key=lead_key)["items"] == []  # the answer asked nothing back (--no-ask)
    outcomes = cli.json("outcomes", key=worker_key)["items"]
    assert sorted(o["state"] for o in outcomes) == ["adopted", "adopted"]
    assert {o["ref"].get("assignment") or o["ref"]["task"] for o in outcomes} == {asg, task}
    entries = cli.json("thread", "entries", th, "--full", key=lead_key)["items"]
    answers = [e for e in entries if e.get("reply_to") == q]
    assert [(e["author"], e["content"]) for e in answers] == [(worker, {"text": "done"})]
    said = log.read_text()
    assert "not delivered" not in said and "not answered" not in said, said
    # A restricted Task stays offered until its adoption limit is reached, so a run
    # woken while the lead adopts may try to take it again and be refused at the
    # limit (seen on two workers): the script says so and goes on. Nothing else.
    lines = said.splitlines()
    for i, line in enumerate(lines):
        if "not taken" in line:
            assert i > 0 and "reached its adoption limit" in lines[i - 1], said


@pytest.mark.rules("R8-20", "R6.4-26")
def test_docs_the_sleeping_judge_rejects_with_the_tests_output_then_adopts(cli, tmp_path):
    author, author_key = cli.register("author")
    worker, worker_key = cli.register("worker")
    task = cli.json("task", "create", "--output", "a poem", "--criteria", "a frog in it", "--audience", worker,
                    key=author_key)["task"]
    test = 'grep -q "pond, frog" "$DELIVERY" || { echo "checking the delivery"; echo "no frog in it"; exit 1; }'
    proc, log = start(cli, tmp_path, author_key, "kungfu wake --on turn --exec examples/wake/judge.sh", {"JUDGE_TEST": test})
    try:
        cli.run("take", task, "--text", "an old silent pond", key=worker_key)
        rejected = until(lambda: cli.json("outcomes", key=worker_key)["items"], timeout=60, what="a verdict", every=0.5)
        assert [(o["state"], o["by"], o["content"]) for o in rejected] == [
            ("rejected", author, {"reason": "checking the delivery\nno frog in it"})
        ]
        cli.run("take", task, "--text", "an old silent pond, frog", key=worker_key)
        until(lambda: len(cli.json("outcomes", key=worker_key)["items"]) == 2, timeout=60, what="a second verdict",
              every=0.5)
    finally:
        stop(proc)
    assert [o["state"] for o in cli.json("outcomes", key=worker_key)["items"]] == ["adopted", "rejected"]
    assert cli.json("turn", key=author_key)["items"] == []
