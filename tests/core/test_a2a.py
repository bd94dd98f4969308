"""A2A in the pure core (WIRE.md 1.3 "A2A"): the state table, exhaustively;
the generation; the rendering (structure only in ``status.message``, the
caller's messages, one artifact per delivery); and the decisions — create as a
restricted Task (§7) judged by the caller, both judging modes, verdicts, cancel
that never cuts off a taker, and not_found for what the caller did not make."""

from __future__ import annotations

import itertools
import json

import msgspec
import pytest

from kungfud.core import a2a, a2a_card, engagement, work
from kungfud.core.a2a_view import (
    CANCELED, COMPLETED, E, INPUT_REQUIRED, SUBMITTED, WORKING, Seen, artifact_parts, generation, render, state_of,
)
from kungfud.core.context import Limits
from kungfud.core.pins import Pin

from .world import World, ok, well_formed

HOUR = 3600
ENGAGEMENT_STATES = (None, "taken", "delivered", "adopted", "rejected", "undecided", "dropped", "timed_out")


def expected(adopted: bool, latest: str | None, client: bool, canceled: bool) -> str:
    """WIRE.md's table, row by row (first match wins)."""
    rows = [
        (adopted or latest == "adopted", COMPLETED),
        (latest == "taken", WORKING),
        (latest == "delivered" and client, INPUT_REQUIRED),
        (latest == "delivered" and not client, WORKING),
        (canceled and latest not in ("taken", "delivered"), CANCELED),
        (True, SUBMITTED),
    ]
    return next(state for matches, state in rows if matches)


@pytest.mark.rules("R7.3-18", "R7.3-17")
@pytest.mark.parametrize("adopted,latest,client,canceled", list(itertools.product(
    (False, True), ENGAGEMENT_STATES, (False, True), (False, True),
)))
def test_state_table_every_combination(adopted, latest, client, canceled):
    assert state_of(adopted, latest, client, canceled) == expected(adopted, latest, client, canceled)


def test_never_failed_rejected_or_auth_required():
    shown = {state_of(*c) for c in itertools.product((False, True), ENGAGEMENT_STATES, (False, True), (False, True))}
    assert shown == {SUBMITTED, WORKING, INPUT_REQUIRED, COMPLETED, CANCELED}


def seen(en: str, state: str, delivered: bool, content: bytes | None = None) -> Seen:
    return Seen(en, state, 1000, 9000, 2000 if delivered else None, 5000 if delivered else None,
                3000 if state not in ("taken", "delivered") else None, content)


def test_generation_counts_each_visible_change():
    assert generation([], False) == 1
    assert generation([], True) == 2
    assert generation([seen("en_1", "taken", False)], False) == 2
    assert generation([seen("en_1", "delivered", True)], False) == 3
    assert generation([seen("en_1", "rejected", True), seen("en_2", "adopted", True)], False) == 7
    assert generation([seen("en_1", "timed_out", False)], True) == 4


def test_artifact_parts_from_the_delivered_content():
    assert artifact_parts(b'{"a2a": {"parts": [{"text": "x"}, {"data": {"k": 1}}]}}') == [{"text": "x"}, {"data": {"k": 1}}]
    assert artifact_parts(b'{"text": "hi"}') == [{"text": "hi"}]
    assert artifact_parts(b'{"poem": "p"}') == [{"data": {"poem": "p"}}]


@pytest.mark.rules("R9-16")
def test_render_shows_structure_the_callers_messages_and_one_artifact_per_delivery():
    m1 = json.dumps({"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "secret words"}]}).encode()
    m2 = json.dumps({"messageId": "m2", "role": "ROLE_USER", "parts": [{"text": "no"}]}).encode()
    es = [seen("en_1", "rejected", True, b'{"text": "first"}'), seen("en_2", "delivered", True, b'{"text": "second"}')]
    out = render("tk_1", "cx_1", 500, [m1, m2], es, True, None, False)
    assert out["id"] == "tk_1" and out["contextId"] == "cx_1"
    assert out["status"]["state"] == INPUT_REQUIRED
    assert [a["artifactId"] for a in out["artifacts"]] == ["en_1", "en_2"]
    assert [h["messageId"] for h in out["history"]] == ["m1", "m2"]
    assert all(h["taskId"] == "tk_1" and h["contextId"] == "cx_1" for h in out["history"])
    status = json.dumps(out["status"])
    assert "secret words" not in status and "second" not in status
    data, text = out["status"]["message"]["parts"]
    assert data["data"]["kungfu"]["engagement"] == "en_2" and data["data"]["kungfu"]["state"] == "delivered"
    meta = out["metadata"][E]
    assert meta["generation"] == 6 and meta["state"] == "delivered" and "canceled" not in meta
    assert [e["engagement"] for e in meta["engagements"]] == ["en_1", "en_2"]
    assert "history" not in render("tk_1", "cx_1", 500, [m1], [], True, None, False, history_length=0)
    assert render("tk_1", "cx_1", 500, [m1, m2], [], True, None, False, history_length=5)["history"][0]["messageId"] == "m1"
    c = render("tk_1", "cx_1", 500, [m1], [], False, 700, False)
    assert c["status"]["state"] == CANCELED and c["metadata"][E]["canceled"] is True
    assert c["status"]["timestamp"].endswith("00.700Z")


# --- decisions --------------------------------------------------------------------

ENC = msgspec.json.Encoder()


def send(to: str, text: str = "write", *, client: bool = False, task: str | None = None, verdict: str | None = None,
         context: str | None = None, role: str = "ROLE_USER") -> a2a.Send:
    message = {"messageId": "m", "role": role, "parts": [{"text": text}]}
    return a2a.Send(
        to=to, message=ENC.encode(message), role=role,
        contract_content=ENC.encode({"criteria": text, "a2a": {"parts": message["parts"], "reference_tasks": []}}),
        client_judges=client, task=task, context=context, verdict=verdict,
        reason=ENC.encode({"reason": text}) if text else None,
    )


@pytest.fixture
def w() -> World:
    w = World(Limits(deliver_within_s=HOUR, judge_within_s=HOUR, a2a_auto_adopt_s=5))
    w.client = w.register("client")
    w.worker = w.register("worker")
    w.other = w.register("other")
    ok(w.act(w.worker, a2a_card.decide_set, a2a_card.SetCard(b'{"name": "w", "description": "d"}', None)))
    return w


def state(w: World, task: str) -> str:
    return a2a.current(w.states[a2a.a2a_obj(task)], w.states[task], w.ctx(w.client))[0]


def deliver(w: World, task: str) -> str:
    e = ok(w.act(w.worker, engagement.decide_take, work.Take(task))).result["engagement"]
    ok(w.act(w.worker, engagement.decide_deliver, work.Deliver(e, Pin(content=b'{"text": "out"}'))))
    return e


@pytest.mark.rules("R7.2-3", "R7.2-6", "R7.3-18")
def test_create_is_a_restricted_task_judged_by_the_deadline(w):
    d = ok(w.act(w.client, a2a.decide_send, send(w.worker)))
    task = d.result["task"]
    t = w.states[task]
    assert t.audience == [w.worker] and t.author == w.client and t.limit == 1
    contract = w.states[task + ".v1"].contract
    assert contract.judge_within_s == 5 and contract.on_no_judgment == "adopt" and contract.readers == "parties"
    assert json.loads(contract.content)["criteria"] == "write"
    assert w.states[a2a.a2a_obj(task)] == w.fold(a2a.a2a_obj(task))  # L1-1
    deliver(w, task)
    assert state(w, task) == WORKING
    w.advance(6)
    assert state(w, task) == COMPLETED  # the deadline R7.3-18 defines, no invented verdict
    # The other agent is not in the audience: it may not take.
    w.refuse("not_found", lambda: w.act(w.other, engagement.decide_take, work.Take(task)))  # restricted (R9-14)


def test_refusals_at_create(w):
    w.refuse("forbidden", lambda: w.act(w.worker, a2a.decide_send, send(w.worker)))
    w.refuse("bad_request", lambda: w.act(w.client, a2a.decide_send, send(w.worker, role="ROLE_AGENT")))
    a = w.refuse("not_found", lambda: w.act(w.client, a2a.decide_send, send(w.other)))
    b = w.refuse("not_found", lambda: w.act(w.client, a2a.decide_send, send("ag_nobody")))
    assert a.reason.replace(w.other, "X") == b.reason.replace("ag_nobody", "X")
    ok(w.act(w.worker, a2a_card.decide_set, a2a_card.SetCard(b'{"name": "w", "description": "d"}', [w.other])))
    w.refuse("forbidden", lambda: w.act(w.client, a2a.decide_send, send(w.worker)))


@pytest.mark.rules("R7.3-16", "R7.3-17")
def test_client_judging_verdicts(w):
    task = ok(w.act(w.client, a2a.decide_send, send(w.worker, client=True))).result["task"]
    e1 = deliver(w, task)
    assert state(w, task) == INPUT_REQUIRED
    r = w.refuse("conflict", lambda: w.act(w.client, a2a.decide_send, send(w.worker, task=task)))
    assert r.reason.startswith(a2a.UNSUPPORTED)
    w.refuse("bad_request", lambda: w.act(w.client, a2a.decide_send, send(w.worker, "", task=task, verdict="reject")))
    w.refuse("bad_request", lambda: w.act(w.client, a2a.decide_send, send(w.worker, task=task, verdict="maybe")))
    d = ok(w.act(w.client, a2a.decide_send, send(w.worker, "redo", task=task, verdict="reject")))
    assert d.result == {"task": task, "engagement": e1, "verdict": "reject", "state": SUBMITTED}
    assert len(w.states[a2a.a2a_obj(task)].messages) == 2
    deliver(w, task)
    assert ok(w.act(w.client, a2a.decide_send, send(w.worker, task=task, verdict="adopt"))).result["state"] == COMPLETED
    r = w.refuse("conflict", lambda: w.act(w.client, a2a.decide_send, send(w.worker, task=task, verdict="adopt")))
    assert r.reason.startswith(a2a.UNSUPPORTED)


@pytest.mark.rules("R7.3-21", "R7.3-23")
def test_cancel_never_cuts_off_a_taker(w):
    task = ok(w.act(w.client, a2a.decide_send, send(w.worker, client=True))).result["task"]
    e = ok(w.act(w.worker, engagement.decide_take, work.Take(task))).result["engagement"]
    assert ok(w.act(w.client, a2a.decide_cancel, a2a.Cancel(task))).result == {"task": task, "state": WORKING}
    ok(w.act(w.worker, engagement.decide_deliver, work.Deliver(e, Pin(content=b'{"text": "x"}'))))
    assert state(w, task) == INPUT_REQUIRED
    r = w.refuse("conflict", lambda: w.act(w.client, a2a.decide_cancel, a2a.Cancel(task)))
    assert r.reason.startswith(a2a.NOT_CANCELABLE) and r.hint is not None
    ok(w.act(w.client, a2a.decide_send, send(w.worker, "no", task=task, verdict="reject")))
    assert state(w, task) == CANCELED
    w.refuse("conflict", lambda: w.act(w.worker, engagement.decide_take, work.Take(task)))


@pytest.mark.rules("R12-9")
def test_only_the_callers_a2a_tasks_are_found(w):
    task = ok(w.act(w.client, a2a.decide_send, send(w.worker))).result["task"]
    for who, t in [(w.other, task), (w.worker, task), (w.client, "tk_nothing"), (w.client, task + ".v1"), (w.client, "x")]:
        r = w.refuse("not_found", lambda: w.act(who, a2a.decide_cancel, a2a.Cancel(t)))
        assert r == well_formed(r) and r.reason == f"task {t} was not found, or you may not read it"


@pytest.mark.rules("R7.3-18", "L1-1")
def test_every_visible_change_records_the_state_and_one_more_generation(w):
    """The Task's A2A marker follows each change in the same action (the
    a2a_task event's source): take, deliver, verdicts, deadlines, cancel."""
    take = a2a.progressing(engagement.decide_take)
    deliver_ = a2a.progressing(engagement.decide_deliver)
    expire = a2a.progressing(engagement.decide_expire)

    def marker(task: str) -> tuple[str, int]:
        m = w.states[a2a.a2a_obj(task)]
        assert m == w.fold(a2a.a2a_obj(task))
        return m.state, m.generation

    task = ok(w.act(w.client, a2a.decide_send, send(w.worker, client=True))).result["task"]
    assert marker(task) == (SUBMITTED, 1)
    e = ok(w.act(w.worker, take, work.Take(task))).result["engagement"]
    assert marker(task) == (WORKING, 2)
    ok(w.act(w.worker, deliver_, work.Deliver(e, Pin(content=b'{"text": "x"}'))))
    assert marker(task) == (INPUT_REQUIRED, 3)
    ok(w.act(w.client, a2a.decide_send, send(w.worker, "again", task=task, verdict="reject")))
    assert marker(task) == (SUBMITTED, 4)
    ok(w.act(w.worker, take, work.Take(task, Pin(content=b'{"text": "y"}'))))  # taken and delivered at once
    assert marker(task) == (INPUT_REQUIRED, 6)
    ok(w.act(w.client, a2a.decide_send, send(w.worker, task=task, verdict="adopt")))
    assert marker(task) == (COMPLETED, 7)
    # Deadline judging: the expiry records COMPLETED.
    t2 = ok(w.act(w.client, a2a.decide_send, send(w.worker))).result["task"]
    e2 = ok(w.act(w.worker, take, work.Take(t2))).result["engagement"]
    ok(w.act(w.worker, deliver_, work.Deliver(e2, Pin(content=b'{"text": "z"}'))))
    assert marker(t2) == (WORKING, 3)
    w.advance(6)
    ok(w.act(None, expire, work.Expire(t2)))
    assert marker(t2) == (COMPLETED, 4)
    # Cancel with nothing open: CANCELED, one more.
    t3 = ok(w.act(w.client, a2a.decide_send, send(w.worker))).result["task"]
    ok(w.act(w.client, a2a.decide_cancel, a2a.Cancel(t3)))
    assert marker(t3) == (CANCELED, 2)
