"""Errors say what is accepted (issue 26 item 2; WIRE.md 1.1 "Wording of
rejections"): the first wrong guesses a newcomer makes, through the client
library against a real daemon, are answered with the accepted shape — and no
reason carries a ``$.args`` path or a regular expression."""

from __future__ import annotations

import pytest

from tests.e2e.thread_kit import agents, close_all, fails, new_thread
from tests.wording import check_wording


def taught(err: dict, *needles: str) -> str:
    reason = err["reason"]
    check_wording(reason, err.get("rule"))
    assert "$" not in reason and "regex" not in reason and "(?!" not in reason and "Expected `" not in reason, reason
    for n in needles:
        assert n in reason, (n, reason)
    return reason


@pytest.mark.rules("L2-4", "R6.4-26")
async def test_L2_4_newcomer_guesses_are_answered_with_the_accepted_shape(daemon):
    lead, worker = await agents(daemon.url, "lead", "worker")
    try:
        th = await new_thread(lead, (worker, "speaker"))
        assign = {"to": worker.id, "content": {"criteria": "c"}}
        for guess in ("deadline", "deliver_by", "delivery_deadline"):
            err = await fails(lead, "thread.post", {"thread": th, "assign": {**assign, guess: 60}}, "bad_request")
            taught(err, f"unknown field `{guess}` in `assign`", "`deliver_within_s`", "`judge_within_s`")
        err = await fails(lead, "task.create", {"audience": [worker.id], "contract": {
            "content": {"output": "o", "criteria": "c"}}}, "bad_request")
        taught(err, "`audience` must be", '{"agents": [', "not an array")
        err = await fails(lead, "thread.post", {"thread": th, "text": "hello"}, "bad_request")
        taught(err, "unknown field `text`", '"content": {"text": …}')
        err = await fails(lead, "thread.post", {"thread": th, "content": {"text": "x"}, "ask": ["worker"]}, "bad_request")
        taught(err, "`ask[0]` must be an agent id", "not a name", "`agent.whoami`", "`thread.get`")
        err = await fails(lead, "thread.post", {"thread": th, "content": {"text": "x"},
                                                "assign": {**assign, "to": "worker"}}, "bad_request")
        taught(err, "`assign.to` must be an agent id")
        asg = (await lead.act("thread.post", {"thread": th, "content": {"text": "w"}, "ask": [], "assign": assign}))["assignment"]
        await worker.act("assignment.take", {"assignment": asg})
        await worker.act("assignment.deliver", {"assignment": asg, "content": {"text": "r"}})
        err = await fails(lead, "assignment.judge", {"assignment": asg, "verdict": "reject", "reason": "no"}, "bad_request")
        taught(err, "unknown field `reason`", '"content": {"reason": …}')
        err = await fails(lead, "assignment.judge", {"assignment": asg, "verdict": "reject"}, "bad_request")
        assert err["rule"] == "R6.4-26"
        taught(err, '"content": {"reason": "…"}')
        err = await fails(lead, "assignment.judge", {"assignment": asg, "verdict": "reject", "content": {"why": "x"}},
                          "bad_request")
        taught(err, "`content` needs `reason`")
        err = await fails(lead, "turn", {"limit": 0}, "bad_request")
        taught(err, "`limit` must be at least 1")
        err = await fails(lead, "thread.admit", {"thread": th, "role": "boss"}, "bad_request")
        taught(err, "`role` may not be `boss`", '"speaker"')
    finally:
        await close_all(lead, worker)


@pytest.mark.rules("L2-4")
async def test_L2_4_an_admin_naming_an_agent_by_name_is_told_to_use_its_id(daemon):
    from kungfud.client import Client

    async with await Client.connect(daemon.url, daemon.admin_key) as admin:
        err = await fails(admin, "admin.agent.reset_key", {"agent": "worker2"}, "bad_request")
        taught(err, "`agent` must be an agent id", "`admin.agent.list`")
