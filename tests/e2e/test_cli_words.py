"""The CLI speaks the command line's words (issue 37 §2): a rejection of what a
subcommand built names the flag the user typed (``--reason``,
``--deliver-within``), not the wire field it filled (``kungfu call`` and
``--json`` keep the wire's words, which its user wrote); ``thread assignments``
writes agents by name, as every read of docs/cli.md "Names" does."""

from __future__ import annotations

import json

import pytest

from tests.e2e.test_cli import Cli, cli  # noqa: F401  (the fixture)


@pytest.fixture
def daemon(shared_daemon):
    """One daemon for the module: each test registers agents of its own."""
    return shared_daemon


def pair(cli: Cli):
    lead, lead_key = cli.register("lead")
    worker, worker_key = cli.register("worker")
    th = cli.json("thread", "create", "--title", "words", key=lead_key)["thread"]
    cli.run("thread", "join", cli.json("thread", "admit", th, "--role", "speaker", key=lead_key)["token"], key=worker_key)
    return th, lead, lead_key, worker, worker_key


@pytest.mark.rules("L2-4", "R6.4-26")
def test_rejections_of_a_subcommand_name_the_flags_the_user_typed(cli):
    th, lead, lead_key, worker, worker_key = pair(cli)
    r = cli.run("post", th, "--text", "x", "--assign-to", worker, "--criteria", "c", "--deliver-within", "0",
                key=lead_key, code=3)
    assert "`--deliver-within` must be at least 1" in r.stderr and "deliver_within_s" not in r.stderr, r.stderr
    r = cli.run("task", "create", "--output", "o", "--criteria", "c", "--judge-within", "0", key=lead_key, code=3)
    assert "`--judge-within`" in r.stderr and "judge_within_s" not in r.stderr, r.stderr
    asg = cli.json("post", th, "--text", "x", "--assign-to", worker, "--criteria", "c", key=lead_key)["assignment"]
    cli.run("take", asg, key=worker_key)
    cli.run("deliver", asg, "--text", "done", key=worker_key)
    r = cli.run("judge", asg, "reject", key=lead_key, code=3)
    assert "`--reason TEXT`" in r.stderr and '"content"' not in r.stderr, r.stderr
    # --json prints the daemon's error exactly; `kungfu call` keeps the wire's words.
    r = cli.run("judge", asg, "reject", "--json", key=lead_key, code=3)
    assert '"content": {"reason": "…"}' in json.loads(r.stdout)["reason"], r.stdout
    r = cli.run("call", "assignment.judge", "--args", json.dumps({"assignment": asg, "verdict": "reject"}),
                key=lead_key, code=3)
    assert '"content": {"reason": "…"}' in r.stderr, r.stderr
    r = cli.run("call", "thread.post", "--args", json.dumps({"thread": th, "content": {"text": "x"}, "assign": {
        "to": worker, "content": {"criteria": "c"}, "deliver_within_s": 0}}), key=lead_key, code=3)
    assert "`assign.deliver_within_s`" in r.stderr, r.stderr
    cli.run("judge", asg, "reject", "--reason", "needs more", key=lead_key)


@pytest.mark.rules("R6.4-3")
def test_thread_assignments_writes_agents_by_name(cli):
    th, lead, lead_key, worker, worker_key = pair(cli)
    asg = cli.json("post", th, "--text", "x", "--assign-to", worker, "--criteria", "c", key=lead_key)["assignment"]
    cli.run("take", asg, key=worker_key)
    out = cli.run("thread", "assignments", th, key=lead_key).stdout
    assert asg in out and 'creator="lead"' in out and 'to="worker"' in out and 'taker="worker"' in out, out
    assert lead not in out and worker not in out, out
    assert worker in cli.run("thread", "assignments", th, "--ids", key=lead_key).stdout
