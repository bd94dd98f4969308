"""Rejections an agent can act on (issue 14 item 5; WIRE.md 1.1 "Wording of
rejections"), through the websocket: reasons that name no internal reference (the
rule in `error.rule`), `not_found` that says "or you may not read it", a stale
token that says whom to ask, a re-issued admission that names the grant it voided,
deadline refusals that say when and what next, `reply_to` a missing entry to be
revised, and unknown ops that suggest the closest name."""

from __future__ import annotations

import re
from datetime import datetime, timezone

import pytest

from kungfud.client import Client, new_key
from kungfud.wire import OPS
from tests.e2e.helpers import check_failure, fake_id
from tests.e2e.thread_kit import agents, close_all, fails, new_thread, poll
from tests.wording import INTERNAL_REF


@pytest.fixture
def daemon(shared_daemon):
    """One daemon for the module (tests/conftest.py ``shared_daemon``): each test
    registers agents of its own and reads only what they wrote."""
    return shared_daemon


RFC3339 = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def when(reason: str) -> datetime:
    m = RFC3339.search(reason)
    assert m is not None, reason
    return datetime.fromisoformat(m.group().replace("Z", "+00:00"))


@pytest.mark.rules("R7.2-6", "R6.4-26")
async def test_wire_rejection_rule_ids_are_in_error_rule_not_in_the_reason(daemon):
    alice, bob = await agents(daemon.url, "alice", "bob")
    try:
        task = (await alice.act("task.create", {"audience": "open", "contract": {"content": {"output": "o", "criteria": "c"}}}))["task"]
        err = await fails(alice, "task.take", {"task": task}, "forbidden")
        assert err["reason"] == f"the author may not take its own task {task}" and err["rule"] == "R7.2-6", err
        th = await new_thread(alice, (bob, "speaker"))
        asg = (await alice.act("thread.post", {"thread": th, "content": {"text": "w"}, "ask": [],
                                               "assign": {"to": bob.id, "content": {"criteria": "c"}}}))["assignment"]
        await bob.act("assignment.take", {"assignment": asg})
        await bob.act("assignment.deliver", {"assignment": asg, "content": {"text": "r"}})
        err = await fails(alice, "assignment.judge", {"assignment": asg, "verdict": "reject"}, "bad_request")
        assert err["rule"] == "R6.4-26" and INTERNAL_REF.search(err["reason"]) is None, err
    finally:
        await close_all(alice, bob)


@pytest.mark.rules("R9-4", "R12-9")
async def test_wire_not_found_says_not_found_or_you_may_not_read_it(daemon):
    alice, eve = await agents(daemon.url, "alice", "eve")
    try:
        th = await new_thread(alice)
        err = await fails(eve, "thread.get", {"thread": th}, "not_found")
        assert err["reason"] == f"thread {th} was not found, or you may not read it" and err["next"] == "stop", err
        ghost = fake_id("th_")
        err = await fails(eve, "thread.get", {"thread": ghost}, "not_found")
        assert err["reason"] == f"thread {ghost} was not found, or you may not read it", err
    finally:
        await close_all(alice, eve)


@pytest.mark.rules("R6.1-7", "R6.1-5")
async def test_wire_reissued_admission_names_the_voided_grant_and_the_stale_token_says_ask_a_governor(daemon):
    alice, bob = await agents(daemon.url, "alice", "bob")
    try:
        th = await new_thread(alice)
        first = await alice.act("thread.admit", {"thread": th, "role": "speaker"})
        assert "voided" not in first, first  # nothing was replaced
        second = await alice.act("thread.admit", {"thread": th, "role": "speaker"})
        assert second["voided"] == first["admission"], second
        stale = await fails(bob, "thread.join", {"token": first["token"]}, "not_found")
        assert "ask a governor of the Thread for a new token" in stale["reason"], stale
        assert th not in stale["reason"] and first["admission"] not in stale["reason"], stale  # reveals no Thread
        never = await fails(bob, "thread.join", {"token": "kt_" + "x" * 43}, "not_found")
        assert never["reason"] == stale["reason"], (never, stale)  # a voided token and a made-up one read alike
        assert (await bob.act("thread.join", {"token": second["token"]}))["thread"] == th
    finally:
        await close_all(alice, bob)


@pytest.mark.rules("R6.4-13", "R6.4-12")
async def test_wire_deadline_refusals_say_when_the_deadline_passed_and_what_next(daemon):
    alice, bob = await agents(daemon.url, "alice", "bob")
    try:
        th = await new_thread(alice, (bob, "speaker"))

        async def assign(**deadlines) -> str:
            post = await alice.act("thread.post", {"thread": th, "content": {"text": "w"}, "ask": [],
                                                   "assign": {"to": bob.id, "content": {"criteria": "c"}, **deadlines}})
            return post["assignment"]

        late = await assign(deliver_within_s=1)
        taken = await bob.act("assignment.take", {"assignment": late})
        unjudged = await assign(judge_within_s=1)
        await bob.act("assignment.take", {"assignment": unjudged})
        delivered = await bob.act("assignment.deliver", {"assignment": unjudged, "content": {"text": "r"}})
        for asg in (late, unjudged):  # the marker: the working set shows the deadline has won
            ws = await poll(lambda a=asg: bob.read("assignment.get", {"assignment": a}),
                            lambda w: w["state"] in ("timed_out", "undecided"), timeout=30)
            assert ws["state"] in ("timed_out", "undecided"), ws

        err = await fails(bob, "assignment.deliver", {"assignment": late, "content": {"text": "r"}}, "conflict")
        assert err["next"] == "stop" and "delivery deadline passed at" in err["reason"], err
        assert when(err["reason"]) == datetime.fromisoformat(taken["deliver_by"].replace("Z", "+00:00")), err
        assert "read your turn" in err["reason"], err

        err = await fails(alice, "assignment.judge", {"assignment": unjudged, "verdict": "adopt"}, "conflict")
        assert "judgment deadline passed at" in err["reason"] and "undecided" in err["reason"], err
        assert when(err["reason"]) == datetime.fromisoformat(delivered["judge_by"].replace("Z", "+00:00")), err
        assert when(err["reason"]) < datetime.now(timezone.utc), err
    finally:
        await close_all(alice, bob)


@pytest.mark.rules("R6.3-3")
async def test_wire_reply_to_a_missing_entry_is_revise(daemon):
    alice, bob = await agents(daemon.url, "alice", "bob")
    try:
        th = await new_thread(alice, (bob, "speaker"))
        await alice.act("thread.post", {"thread": th, "content": {"text": "hi"}})
        err = await fails(bob, "thread.post", {"thread": th, "reply_to": 7, "content": {"text": "re"}}, "not_found")
        assert err["next"] == "revise", err
    finally:
        await close_all(alice, bob)


@pytest.mark.rules("L2-4")
async def test_wire_unknown_op_suggests_the_closest_name_cut_to_64_characters(daemon):
    async with await Client.connect(daemon.url) as c:
        err = check_failure(await c.request("memory.craete", {"content": {}}), "bad_request")
        assert err["reason"] == "unknown op `memory.craete`; did you mean `memory.create`?", err
        long = "memory.create" + "s" * 500
        err = check_failure(await c.request(long, {}), "bad_request")
        assert long[:63] + "…" in err["reason"] and long[:64] not in err["reason"] and len(err["reason"]) < 200, err
        err = check_failure(await c.request("zzzzzz", {}), "bad_request")
        assert "did you mean" not in err["reason"], err


@pytest.mark.rules("L2-4")
async def test_wire_every_op_refused_gives_reasons_without_internal_references(daemon):
    """Every op, sent by a stranger (ids that name nothing, objects it may not
    read), by an observer of the Thread, and by the author of every object: each
    refusal passes check_failure, which fails on a rule, section or decision
    number in a reason."""
    alice, eve = await agents(daemon.url, "alice", "eve")
    try:
        th = await new_thread(alice)
        me = (await alice.act("memory.create", {"content": {"t": 1}}))["memory"]
        tk = (await alice.act("task.create", {"audience": "open",
                                              "contract": {"content": {"output": "o", "criteria": "c"}}}))["task"]
        ids = {"thread": [th, fake_id("th_")], "memory": [me, fake_id("me_")], "task": [tk, fake_id("tk_")],
               "assignment": [fake_id("as_")], "engagement": [fake_id("en_")], "agent": [alice.id, fake_id("ag_")]}
        refused: set[str] = set()

        async def sweep(who) -> None:
            for op, spec in OPS.items():
                if op in ("hello", "agent.register", "agent.rotate_key"):
                    continue  # open ops, and the one that would end this connection
                fields = set(spec.args.__struct_fields__)
                for variant in (0, 1):
                    args = {name: vals[min(variant, len(vals) - 1)] for name, vals in ids.items()}
                    args.update(entry=1, token="kt_" + "y" * 43, role="speaker", verdict="reject",
                                content={"text": "x"}, status="deactivated")
                    args = {k: v for k, v in args.items() if k in fields}
                    resp = await who.c.request(op, args, key=new_key() if spec.kind == "A" else None)
                    if not resp["ok"]:
                        check_failure(resp)
                        refused.add(f"{resp['error']['code']}:{resp['error']['reason'][:30]}")

        await sweep(eve)  # a stranger
        grant = await alice.act("thread.admit", {"thread": th, "role": "observer"})
        await eve.act("thread.join", {"token": grant["token"]})
        await alice.act("thread.post", {"thread": th, "content": {"text": "hello"}})
        await sweep(eve)  # an observer: reads the Thread, may not post
        await sweep(alice)  # the author of everything: may not take its own Task, …
        assert len(refused) > 20, refused  # many distinct refusals were walked
    finally:
        await close_all(alice, eve)
