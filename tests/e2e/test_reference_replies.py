"""docs/reference.md's results against a real daemon (issue 26 item 1): each
documented example reply names only fields the daemon sends for that op (a
page's item only fields of the real items), and each op's result description
names every field the daemon sent, so the reference can neither show a field
that does not exist nor miss one that does. A flow through most ops, by the
client library."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from kungfud.client import Client

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "docs"))

import gen_reference as ref  # noqa: E402


def _keys(example: dict, real: dict) -> tuple[set, set]:
    if "items" in example:
        assert real["items"], "a page to compare with is empty"
        return set(example["items"][0]), set(real["items"][0])
    return set(example), set(real)


@pytest.mark.rules("R10.3-1")
async def test_reference_example_replies_name_only_fields_the_daemon_sends(daemon):
    async with await Client.connect(daemon.url) as anon:
        a = await anon.act("agent.register", {"content": {"name": "alice"}})
        b = await anon.act("agent.register", {"content": {"name": "bob"}})
    A, B = await Client.connect(daemon.url, a["key"]), await Client.connect(daemon.url, b["key"])
    got: dict[str, dict] = {}
    try:
        got["agent.whoami"] = await A.read("agent.whoami")
        me = got["memory.create"] = await A.act("memory.create", {"content": {"t": 1}})
        got["memory.update"] = await A.act("memory.update", {"memory": me["memory"], "content": {"t": 2}})
        got["memory.get"] = await A.read("memory.get", {"memory": me["memory"]})
        got["memory.list"] = await A.read("memory.list", {})
        got["thread.create"] = await A.act("thread.create", {"content": {"title": "x"}})
        t = got["thread.create"]["thread"]
        adm = got["thread.admit"] = await A.act("thread.admit", {"thread": t})
        got["thread.join"] = await B.act("thread.join", {"token": adm["token"]})
        example = ref.RESULTS["thread.post"][1]
        post = got["thread.post"] = await A.act("thread.post", {
            **example, "thread": t, "assign": {**example["assign"], "to": b["agent"]}})
        asg = post["assignment"]
        got["opportunities"] = await B.read("opportunities")
        got["assignment.take"] = await B.act("assignment.take", {"assignment": asg})
        got["assignment.get"] = await A.read("assignment.get", {"assignment": asg})
        got["assignment.deliver"] = await B.act("assignment.deliver", {"assignment": asg, "content": {"x": 1}})
        got["turn"] = await A.read("turn")
        got["assignment.judge"] = await A.act("assignment.judge", {**ref.RESULTS["assignment.judge"][1], "assignment": asg})
        got["outcomes"] = await B.read("outcomes")
        got["thread.get"] = await A.read("thread.get", {"thread": t})
        got["thread.entries"] = await A.read("thread.entries", {"thread": t, "full": True})
        got["thread.list"] = await A.read("thread.list", {})
        got["task.create"] = await A.act("task.create", {"audience": "open", "contract": ref.CONTRACT})
        tk = got["task.create"]["task"]
        got["task.list"] = await B.read("task.list", {})
        got["task.take"] = await B.act("task.take", {"task": tk})
        en = got["task.take"]["engagement"]
        got["task.deliver"] = await B.act("task.deliver", {"engagement": en, "content": {"x": 1}})
        got["task.pause"] = await A.act("task.pause", {"task": tk})
        got["task.judge"] = await A.act("task.judge", {"engagement": en, "verdict": "adopt"})
        got["task.resume"] = await A.act("task.resume", {"task": tk})
        got["task.drop"] = await B.act("task.drop", {"engagement": (await B.act("task.take", {"task": tk}))["engagement"]})
        p2 = await A.act("thread.post", {"thread": t, "content": {"text": "w"}, "ask": [],
                                         "assign": {"to": b["agent"], "content": {"criteria": "c"}}})
        got["assignment.void"] = await A.act("assignment.void", {"assignment": p2["assignment"]})
        p3 = await A.act("thread.post", {"thread": t, "content": {"text": "w"}, "ask": [],
                                         "assign": {"to": b["agent"], "content": {"criteria": "c"}}})
        await B.act("assignment.take", {"assignment": p3["assignment"]})
        got["assignment.drop"] = await B.act("assignment.drop", {"assignment": p3["assignment"]})
        q = await A.act("thread.post", {"thread": t, "content": {"text": "q"}, "ask": [b["agent"]]})
        got["thread.handle"] = await B.act("thread.handle", {"thread": t, "entry": q["entry"], "content": {"note": "ok"}})
        got["thread.entry"] = await A.read("thread.entry", {"thread": t, "entry": q["entry"]})
        got["memory.publish"] = await A.act("memory.publish", {"memory": me["memory"]})
        got["subscribe"] = await A.read("subscribe", {})
        got["agent.rotate_key"] = await B.act("agent.rotate_key", {})
    finally:
        await A.close()
        await B.close()
    assert len(got) >= 34
    wrong = []
    for op, real in got.items():
        example = ref.RESULTS[op][2]
        if not isinstance(example, dict):
            continue
        doc, actual = _keys(example, real)
        if not doc <= actual:
            wrong.append((op, "documented but not sent", doc - actual))
        # and the result's description names every field the daemon sent
        described = set(re.findall(r"[a-z_]+", ref.RESULTS[op][0]))
        if not actual <= described:
            wrong.append((op, "sent but not described", actual - described))
    assert not wrong, wrong
