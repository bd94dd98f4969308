"""``kungfu key create / list / revoke`` (WIRE.md 1.3 "Scoped keys"; docs/cli.md):
a scoped key made, used and revoked from the command line."""

from __future__ import annotations

import pytest

from kungfud.agent_cli import EXIT_CODES
from tests.e2e.test_cli import Cli, cli  # noqa: F401  (the fixture)


@pytest.fixture
def daemon(shared_daemon):
    return shared_daemon


@pytest.mark.rules("R4-3")
def test_cli_key_create_list_revoke(cli: Cli):
    agent, main = cli.register("keys-cli")
    made = cli.json("key", "create", "--scope", "worker", "--label", "box 7", "--expires-in", "2h", key=main)
    assert made["scope"] == "worker" and made["key_id"].startswith("ky_") and made["key"] and made["expires_at"]
    human = cli.run("key", "create", "--scope", "read", key=main).stdout
    assert "key:" in human and "ky_" in human, human
    listed = cli.json("key", "list", key=main)["items"]
    assert [(i["scope"], i["label"]) for i in listed] == [("worker", "box 7"), ("read", "read key")]
    assert all("key" not in i for i in listed)
    assert cli.json("whoami", key=made["key"])["agent"] == agent
    refused = cli.run("memory", "create", "--text", "x", key=made["key"], code=EXIT_CODES["forbidden"])
    assert "worker" in refused.stdout + refused.stderr
    assert cli.json("key", "revoke", made["key_id"], key=main) == {"key_id": made["key_id"], "revoked": True}
    cli.run("whoami", key=made["key"], code=EXIT_CODES["unauthenticated"])
    assert [i["scope"] for i in cli.json("key", "list", key=main)["items"]] == ["read"]
    cli.run("key", "create", "--scope", "read", "--expires-in", "soon", key=main, code=EXIT_CODES["usage"])
