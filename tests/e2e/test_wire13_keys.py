"""Outside conformance for WIRE.md 1.3 "Scoped keys", sentence by sentence,
over raw websocket frames (the client library would hide what the wire says):
the create receipt and its replay, the list's fields, the revoke receipt, the
exact op set of each scope over the whole catalogue, the refusal's wording,
``hello`` with a scoped key, ``expires_in_s``, and the 21st key."""

from __future__ import annotations

import re

import pytest

from kungfud.client import new_key
from tests.e2e.helpers import Raw, check_failure, fake_id, register

#: WIRE.md 1.0–1.3: every op and its kind (A action, R read), as the contract lists them.
CATALOGUE = {
    "hello": "R", "agent.register": "A", "agent.whoami": "R", "admin.agent.set_status": "A",
    "admin.agent.create": "A", "admin.agent.list": "R", "agent.rotate_key": "A", "admin.agent.reset_key": "A",
    "agent.key.create": "A", "agent.key.list": "R", "agent.key.revoke": "A",
    "memory.create": "A", "memory.update": "A", "memory.publish": "A", "memory.unpublish": "A",
    "memory.withdraw": "A", "memory.get": "R", "memory.list": "R",
    "thread.create": "A", "thread.admit": "A", "thread.void_admission": "A", "thread.join": "A",
    "thread.leave": "A", "thread.remove": "A", "thread.set_role": "A", "thread.post": "A",
    "thread.handle": "A", "thread.retract": "A", "thread.close": "A", "thread.get": "R",
    "thread.entries": "R", "thread.entry": "R", "thread.list": "R", "thread.assignments": "R",
    "assignment.take": "A", "assignment.deliver": "A", "assignment.judge": "A", "assignment.drop": "A",
    "assignment.void": "A", "assignment.get": "R",
    "task.create": "A", "task.revise": "A", "task.pause": "A", "task.resume": "A", "task.take": "A",
    "task.deliver": "A", "task.drop": "A", "task.judge": "A", "task.get": "R", "task.list": "R",
    "engagement.get": "R", "turn": "R", "opportunities": "R", "outcomes": "R", "subscribe": "R",
    "webhook.set": "A", "webhook.get": "R", "webhook.clear": "A", "search": "R",
}
#: WIRE.md 1.3: the actions `worker` may send besides every read.
WORKER = {
    "thread.post", "thread.handle", "assignment.take", "assignment.deliver", "assignment.drop",
    "task.take", "task.deliver", "task.drop",
}
_AG, _TH, _ME, _TK = fake_id("ag_"), fake_id("th_"), fake_id("me_"), fake_id("tk_")
_AS, _EN, _KY = fake_id("as_"), fake_id("en_"), fake_id("ky_")
#: well-formed args for each op (ids that name nothing), so what answers is the scope, not the shape
ARGS = {
    "admin.agent.set_status": {"agent": _AG, "status": "active"}, "admin.agent.create": {"content": {"name": "n"}},
    "admin.agent.reset_key": {"agent": _AG}, "agent.key.create": {"scope": "read", "label": "l"},
    "agent.key.revoke": {"key_id": _KY}, "memory.create": {"content": {"t": "x"}},
    "memory.update": {"memory": _ME, "content": {"t": "x"}}, "memory.publish": {"memory": _ME},
    "memory.unpublish": {"memory": _ME}, "memory.withdraw": {"memory": _ME}, "memory.get": {"memory": _ME},
    "thread.admit": {"thread": _TH}, "thread.void_admission": {"thread": _TH}, "thread.join": {"token": "t" * 20},
    "thread.leave": {"thread": _TH}, "thread.remove": {"thread": _TH, "agent": _AG},
    "thread.set_role": {"thread": _TH, "agent": _AG, "role": "speaker"},
    "thread.post": {"thread": _TH, "content": {"t": "x"}}, "thread.handle": {"thread": _TH, "entry": 1},
    "thread.retract": {"thread": _TH, "entry": 1}, "thread.close": {"thread": _TH}, "thread.get": {"thread": _TH},
    "thread.entries": {"thread": _TH}, "thread.entry": {"thread": _TH, "entry": 1},
    "thread.assignments": {"thread": _TH},
    "assignment.take": {"assignment": _AS}, "assignment.deliver": {"assignment": _AS, "content": {"t": "x"}},
    "assignment.judge": {"assignment": _AS, "verdict": "adopt"}, "assignment.drop": {"assignment": _AS},
    "assignment.void": {"assignment": _AS}, "assignment.get": {"assignment": _AS},
    "task.create": {"audience": "open", "contract": {"content": {"output": "o", "criteria": "c"}}},
    "task.revise": {"task": _TK, "contract": {"content": {"output": "o", "criteria": "c"}}},
    "task.pause": {"task": _TK}, "task.resume": {"task": _TK}, "task.take": {"task": _TK},
    "task.deliver": {"engagement": _EN, "content": {"t": "x"}}, "task.drop": {"engagement": _EN},
    "task.judge": {"engagement": _EN, "verdict": "adopt"}, "task.get": {"task": _TK},
    "engagement.get": {"engagement": _EN}, "webhook.set": {"url": "https://example.com/hook"},
    "search": {"q": "word"},
}
_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


async def _create(r: Raw, scope: str, label: str = "a label", **extra) -> dict:
    resp = await r.req("agent.key.create", {"scope": scope, "label": label, **extra}, key=new_key())
    assert resp["ok"] is True and resp["replayed"] is False, resp
    return resp["result"]


def _forbidden_naming_scope(resp: dict, scope: str, op: str) -> None:
    err = check_failure(resp, "forbidden")
    assert scope in err["reason"] and op in err["reason"], (op, err)


@pytest.mark.rules("R4-3", "L3-6")
async def test_the_receipt_shows_the_key_once_and_a_replay_gives_null(daemon):
    agent, main = await register(daemon.url, "keys")
    async with await Raw.connect(daemon.url, main) as r:
        k = new_key()
        args = {"scope": "read", "label": "no expiry"}
        first = await r.req("agent.key.create", args, key=k)
        made = first["result"]
        assert set(made) == {"key_id", "key", "scope"} and made["scope"] == "read", made  # expires_at? absent
        assert isinstance(made["key"], str) and made["key"] and made["key"] != main
        again = await r.req("agent.key.create", args, key=k)
        assert again["ok"] is True and again["replayed"] is True and again["result"] == {**made, "key": None}
        # the same key with other args: idempotency_mismatch, no second key
        check_failure(await r.req("agent.key.create", {"scope": "worker", "label": "x"}, key=k), "idempotency_mismatch")
        assert [i["key_id"] for i in (await r.req("agent.key.list"))["result"]["items"]] == [made["key_id"]]
    async with await Raw.connect(daemon.url) as r:  # the shown key authenticates by hello, as its agent
        hello = await r.req("hello", {"key": made["key"]})
        assert hello["ok"] is True and hello["result"]["agent"] == agent and hello["result"]["status"] == "active"


@pytest.mark.rules("R4-3")
async def test_the_list_shows_live_scoped_keys_with_the_listed_fields_only(daemon):
    _, main = await register(daemon.url, "lister")
    async with await Raw.connect(daemon.url, main) as r:
        assert (await r.req("agent.key.list"))["result"] == {"items": []}  # the main key is never listed
        a = await _create(r, "worker", "box 1", expires_in_s=600)
        b = await _create(r, "a2a", "bridge")
        gone = await _create(r, "read", "gone")
        revoked = await r.req("agent.key.revoke", {"key_id": gone["key_id"]}, key=new_key())
        assert revoked["ok"] is True and revoked["result"] == {"key_id": gone["key_id"], "revoked": True}
        page = (await r.req("agent.key.list"))["result"]
        assert set(page) == {"items"} | ({"cursor"} & set(page)), page
        items = page["items"]
        assert sorted(i["key_id"] for i in items) == sorted([a["key_id"], b["key_id"]])
        for item in items:
            assert {"key_id", "scope", "label", "created_at"} <= set(item), item
            assert set(item) <= {"key_id", "scope", "label", "created_at", "expires_at", "last_used_at"}, item
            assert "key" not in item and _TIME.match(item["created_at"]), item
            assert a["key"] not in str(item) and b["key"] not in str(item)
        by_id = {i["key_id"]: i for i in items}
        assert by_id[a["key_id"]]["scope"] == "worker" and by_id[a["key_id"]]["label"] == "box 1"
        assert by_id[a["key_id"]]["expires_at"] == a["expires_at"]
        assert "expires_at" not in by_id[b["key_id"]] and by_id[b["key_id"]]["scope"] == "a2a"
        # a revoked key is no more: revoking it again, or an id never issued, is not_found alike
        e1 = check_failure(await r.req("agent.key.revoke", {"key_id": gone["key_id"]}, key=new_key()), "not_found")
        e2 = check_failure(await r.req("agent.key.revoke", {"key_id": fake_id("ky_")}, key=new_key()), "not_found")
        assert e1["next"] == e2["next"]
    # another agent's key id is not_found too (its keys are its own)
    _, other = await register(daemon.url, "other")
    async with await Raw.connect(daemon.url, other) as r:
        check_failure(await r.req("agent.key.revoke", {"key_id": a["key_id"]}, key=new_key()), "not_found")
        assert (await r.req("agent.key.list"))["result"]["items"] == []


@pytest.mark.rules("R4-3")
async def test_expires_in_s_sets_expires_at_and_bad_args_are_bad_request(daemon):
    _, main = await register(daemon.url, "expiry")
    async with await Raw.connect(daemon.url, main) as r:
        made = await _create(r, "read", expires_in_s=3600)
        assert _TIME.match(made["expires_at"]), made
        (item,) = (await r.req("agent.key.list"))["result"]["items"]
        created, expires = item["created_at"], item["expires_at"]
        from datetime import datetime

        def t(s: str) -> float:
            return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()

        assert abs(t(expires) - t(created) - 3600) < 0.01, item
        for bad, field in (
            ({"scope": "admin", "label": "x"}, "scope"),
            ({"scope": "read"}, "label"),
            ({"label": "x"}, "scope"),
            ({"scope": "read", "label": "x", "expires_in_s": "soon"}, "expires_in_s"),
            ({"scope": "read", "label": "x", "expires_in_s": 0}, "expires_in_s"),
            ({"scope": "read", "label": "x", "expires_in_s": -5}, "expires_in_s"),
            ({"scope": "read", "label": "x", "colour": "red"}, "colour"),
            ({"scope": "read", "label": ""}, "label"),
            ({"scope": "read", "label": 7}, "label"),
            ({"scope": "read", "label": "x", "expires_in_s": 1.5}, "expires_in_s"),
        ):
            err = check_failure(await r.req("agent.key.create", bad, key=new_key()), "bad_request")
            assert field in err["reason"], (bad, err)
        check_failure(await r.req("agent.key.revoke", {}, key=new_key()), "bad_request")
        check_failure(await r.req("agent.key.list", {"limit": 5}), "bad_request")
        # actions need a key, reads refuse one
        check_failure(await r.req("agent.key.create", {"scope": "read", "label": "x"}, key=None), "bad_request")
        check_failure(await r.req("agent.key.list", {}, key=new_key()), "bad_request")


@pytest.mark.rules("R4-3")
@pytest.mark.parametrize("scope", ["read", "worker", "a2a"])
async def test_each_scope_allows_exactly_its_ops_over_the_whole_catalogue(daemon, scope):
    """Every op of the catalogue sent with a scoped key: those outside the
    scope are ``forbidden`` naming the scope and the op; those inside are never
    ``forbidden`` for the scope (they may fail otherwise: the ids name nothing). ``agent.whoami`` for every scope."""
    agent, main = await register(daemon.url, f"scope-{scope}")
    async with await Raw.connect(daemon.url, main) as r:
        key = (await _create(r, scope))["key"]
    async with await Raw.connect(daemon.url, key) as r:
        who = await r.req("agent.whoami")
        assert who["ok"] is True and who["result"]["agent"] == agent
        for op, kind in CATALOGUE.items():
            if op in ("hello", "agent.register", "agent.whoami"):
                continue
            # wire.md 1.3: read "every read", worker "reads" and its actions, a2a "the a2a.* ops" (D376)
            allowed = op.startswith("a2a.") if scope == "a2a" else (kind == "R" or (scope == "worker" and op in WORKER))
            resp = await r.req(op, ARGS.get(op, {}), key=new_key() if kind == "A" else None)
            if allowed:
                # never refused for the key's scope (an admin-only op is still forbidden to a non-admin agent)
                refused = resp.get("ok") is False and resp["error"]["code"] == "forbidden"
                assert not (refused and "scope" in resp["error"]["reason"]), (scope, op, resp)
            else:
                _forbidden_naming_scope(resp, scope, op)
                # whatever the args: the key may never send it (not a bad_request to revise in vain, D375)
                _forbidden_naming_scope(await r.req(op, {"colour": "red"}, key=new_key() if kind == "A" else None), scope, op)
        # the same calls with real args, where the scope allows them: they work
        if scope != "a2a":
            assert (await r.req("memory.list", {}))["ok"] is True
            assert (await r.req("turn", {}))["ok"] is True
            assert (await r.req("search", {"q": "anything"}))["ok"] is True
        # a forbidden action has no effect, and its refusal is not replayed as a receipt
        k = new_key()
        _forbidden_naming_scope(await r.req("thread.create", {}, key=k), scope, "thread.create")
        _forbidden_naming_scope(await r.req("thread.create", {}, key=k), scope, "thread.create")
    async with await Raw.connect(daemon.url, main) as r:
        assert (await r.req("thread.list"))["result"]["items"] == []
        # the main key's receipt is no replay for a scoped key: the same (agent, op, key) is still forbidden
        made = await r.req("memory.create", {"content": {"t": "x"}}, key=k)
        assert made["ok"] is True, made
    async with await Raw.connect(daemon.url, key) as r:
        _forbidden_naming_scope(await r.req("memory.create", {"content": {"t": "x"}}, key=k), scope, "memory.create")


@pytest.mark.rules("R4-3")
async def test_a_worker_key_does_the_work_it_is_offered(daemon):
    """`worker`: thread.post, thread.handle, assignment.take/.deliver, task.take/.deliver
    with real args succeed as the agent."""
    boss, boss_key = await register(daemon.url, "boss")
    hand, hand_main = await register(daemon.url, "hand")
    async with await Raw.connect(daemon.url, hand_main) as r:
        worker = (await _create(r, "worker"))["key"]
    async with await Raw.connect(daemon.url, boss_key) as b, await Raw.connect(daemon.url, worker) as w:
        th = (await b.req("thread.create", {}, key=new_key()))["result"]["thread"]
        token = (await b.req("thread.admit", {"thread": th, "role": "speaker"}, key=new_key()))["result"]["token"]
        # joining is not worker's
        _forbidden_naming_scope(await w.req("thread.join", {"token": token}, key=new_key()), "worker", "thread.join")
        async with await Raw.connect(daemon.url, hand_main) as m:
            assert (await m.req("thread.join", {"token": token}, key=new_key()))["ok"] is True
        posted = await b.req("thread.post", {"thread": th, "content": {"text": "do it"}, "assign": {
            "to": hand, "content": {"criteria": "done"}}}, key=new_key())
        asg = posted["result"]["assignment"]
        assert (await w.req("assignment.take", {"assignment": asg}, key=new_key()))["ok"] is True
        got = await w.req("assignment.deliver", {"assignment": asg, "content": {"text": "done"}}, key=new_key())
        assert got["ok"] is True and got["result"]["state"] == "delivered", got
        said = await w.req("thread.post", {"thread": th, "content": {"text": "delivered"}}, key=new_key())
        assert said["ok"] is True, said
        _forbidden_naming_scope(
            await w.req("assignment.judge", {"assignment": asg, "verdict": "adopt"}, key=new_key()), "worker", "assignment.judge"
        )
        task = (await b.req("task.create", {"audience": {"agents": [hand]}, "contract": {
            "content": {"output": "o", "criteria": "c"}}}, key=new_key()))["result"]["task"]
        took = await w.req("task.take", {"task": task}, key=new_key())
        assert took["ok"] is True, took
        done = await w.req("task.deliver", {"engagement": took["result"]["engagement"], "content": {"x": "y"}}, key=new_key())
        assert done["ok"] is True and done["result"]["state"] == "delivered", done


@pytest.mark.rules("R4-3", "R12-11")
async def test_the_twenty_first_live_key_is_conflict_and_expired_ones_do_not_count(clocked_daemon):
    daemon = clocked_daemon
    _, main = await register(daemon.url, "many")
    async with await Raw.connect(daemon.url, main) as r:
        for i in range(19):
            await _create(r, "read", f"k{i}")
        await _create(r, "read", "short", expires_in_s=60)
        err = check_failure(await r.req("agent.key.create", {"scope": "read", "label": "21"}, key=new_key()), "conflict")
        assert err["next"] in ("stop", "revise", "wait")
        assert len((await r.req("agent.key.list"))["result"]["items"]) == 20
    daemon.advance_clock(61)
    async with await Raw.connect(daemon.url, main) as r:
        assert len((await r.req("agent.key.list"))["result"]["items"]) == 19  # expired: not listed, not counted
        await _create(r, "read", "twentieth")
        check_failure(await r.req("agent.key.create", {"scope": "read", "label": "21"}, key=new_key()), "conflict")


@pytest.mark.rules("R4-3")
async def test_an_expired_or_revoked_key_is_unauthenticated_in_hello_like_an_unknown_one(clocked_daemon):
    daemon = clocked_daemon
    _, main = await register(daemon.url, "hello")
    async with await Raw.connect(daemon.url, main) as r:
        short = await _create(r, "worker", expires_in_s=30)
        gone = await _create(r, "read")
        await r.req("agent.key.revoke", {"key_id": gone["key_id"]}, key=new_key())
    daemon.advance_clock(31)
    errors = []
    for key in (short["key"], gone["key"], new_key()):
        async with await Raw.connect(daemon.url) as r:
            err = check_failure(await r.req("hello", {"key": key}), "unauthenticated")
            errors.append((err["reason"], err["next"]))
            # and nothing but hello/register before authenticating
            check_failure(await r.req("agent.whoami"), "unauthenticated")
    assert errors[0] == errors[1] == errors[2], errors  # refused like an unknown key
