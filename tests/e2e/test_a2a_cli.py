"""`kungfu a2a` (issue 34 §1): publish the card, show it with its URL, send
work and read it back as an A2A Task, clear the card."""

from __future__ import annotations

import pytest

from .test_cli import Cli


@pytest.fixture
def daemon(shared_daemon):
    return shared_daemon


@pytest.mark.rules("L3-2")
def test_a2a_cli_publish_show_send_task_tasks_and_clear(daemon, tmp_path):
    cli = Cli(daemon, tmp_path)
    worker, wkey = cli.register("worker")
    client, ckey = cli.register("client")
    made = cli.json("a2a", "publish", "--name", "Poet", "--description", "Writes short poems.",
                    "--skill", "haiku:Haiku:A 5-7-5 poem", "--accept", client, key=wkey)
    assert made["agent"] == worker and made["card_url"].endswith(f"/a2a/agents/{worker}/.well-known/agent-card.json")
    shown = cli.json("a2a", "show", worker, key=ckey)
    assert shown["content"]["skills"][0]["id"] == "haiku" and shown["accept"] == {"agents": [client]}
    assert "card_url" in cli.run("a2a", "show", key=wkey).stdout
    # The same messageId is the same Task (the key is derived from it).
    first = cli.json("a2a", "send", worker, "--text", "a haiku", "--message-id", "cli-1", key=ckey)
    again = cli.json("a2a", "send", worker, "--text", "a haiku", "--message-id", "cli-1", key=ckey)
    assert again["task"] == first["task"] and first["state"] == "TASK_STATE_SUBMITTED"
    task = cli.json("a2a", "task", first["task"], key=ckey)
    assert task["id"] == first["task"] and task["history"][0]["parts"] == [{"text": "a haiku"}]
    listed = cli.json("a2a", "tasks", "--all", key=ckey)
    assert [i["id"] for i in listed["items"]] == [first["task"]]
    assert cli.json("a2a", "cancel", first["task"], key=ckey)["state"] == "TASK_STATE_CANCELED"
    assert cli.json("a2a", "clear", key=wkey) == {"cleared": True}
    cli.run("a2a", "show", worker, key=ckey, code=5)  # not_found
