"""A closed deployment run end to end from the `kungfu` CLI (issue 15 item 1,
WIRE.md "Operating a deployment", docs/cli.md): with `open_registration =
false` the admin creates two agents, they work together (thread, ask, reply),
one rotates its key, and the old key fails."""

from __future__ import annotations

import tomllib

import pytest

from tests.e2e.test_cli import Cli, fields


@pytest.mark.rules("R4-3", "L3-6")
def test_wire_closed_deployment_end_to_end_from_the_cli(make_daemon, tmp_path):
    d = make_daemon("[server]\nopen_registration = false\n")
    cli = Cli(d, tmp_path)
    admin = d.admin_key
    # nobody registers on a closed daemon …
    r = cli.run("register", "mallory", code=6)
    assert "admin.agent.create" in r.stderr
    # … the admin creates the agents, straight into profiles
    r = cli.run("admin", "create", "w1", "--save-as", "w1", key=admin)
    w1 = fields(r.stdout)["agent"]
    assert "kf_" not in r.stdout  # saved, not printed
    w2 = cli.json("admin", "create", "w2", "--save-as", "w2", key=admin)["agent"]
    cli.run("admin", "create", "w3", "--save-as", "w2", key=admin, code=2)  # an existing profile is kept
    profiles = tomllib.loads(cli.config.read_text())
    assert profiles["w1"]["agent"] == w1 and profiles["w2"]["agent"] == w2
    assert profiles["w1"]["url"] in d.urls
    listed = cli.json("admin", "agents", "--all", key=admin)["items"]
    assert [it["agent"] for it in listed][1:] == [w1, w2]
    assert [it["content"]["name"] for it in listed] == ["admin", "w1", "w2"]
    cli.run("admin", "agents", "--profile", "w1", code=6)  # not an admin
    # they work together: a thread, a question, an answer
    th = fields(cli.run("--profile", "w1", "thread", "create", "--title", "plan").stdout)["thread"]
    token = cli.json("--profile", "w1", "thread", "admit", th)["token"]
    cli.run("--profile", "w2", "thread", "join", token)
    cli.run("--profile", "w1", "post", th, "--text", "ready?", "--ask", w2)
    turn = cli.run("--profile", "w2", "turn").stdout
    assert f"{th}#1" in turn
    cli.run("--profile", "w2", "post", th, "--text", "yes", "--reply-to", "1")
    entries = cli.json("--profile", "w1", "thread", "entries", th, "--full")["items"]
    assert [e["content"]["text"] for e in entries] == ["ready?", "yes"]
    assert f"{th}#1" not in cli.run("--profile", "w2", "turn").stdout
    # w2 rotates its key into its profile; the old key fails at once
    old = profiles["w2"]["key"]
    r = cli.run("--profile", "w2", "rotate-key", "--save")
    assert fields(r.stdout)["agent"] == w2 and "kf_" not in r.stdout
    new = tomllib.loads(cli.config.read_text())["w2"]["key"]
    assert new != old and new.startswith("kf_")
    r = cli.run("whoami", key=old, code=4)
    assert "401" in r.stderr
    assert fields(cli.run("--profile", "w2", "whoami").stdout)["agent"] == w2
    # rotate-key --save needs a profile to rewrite: refused before anything happens
    cli.run("rotate-key", "--save", key=new, code=2)
    cli.run("--profile", "w2", "whoami")
    # a lost key: the admin resets it and prints the new one once
    r = cli.run("admin", "reset-key", w1, key=admin)
    got = fields(r.stdout)
    assert got["agent"] == w1 and got["key"].startswith("kf_")
    cli.run("--profile", "w1", "whoami", code=4)
    assert fields(cli.run("whoami", key=got["key"]).stdout)["agent"] == w1
