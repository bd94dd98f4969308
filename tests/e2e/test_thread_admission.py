"""§6.1 creation and admission over the real daemon: the creator governs, a bearer
grant's token is disclosed once, joining again is the existing membership, a
reissued, voided or closed grant admits nobody, non-members cannot tell a thread
from a missing id, failed joins are rate limited (R6.1-*, L2-5, L3-6, R12-*)."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from kungfud.client import Client, new_key
from tests.e2e.helpers import Raw, call, check_failure
from tests.e2e.thread_kit import admit_join, agents, close_all, fails, fake_id, new_thread


@pytest.fixture
def daemon(shared_daemon):
    """One daemon for the module (tests/conftest.py ``shared_daemon``): each test
    registers agents of its own and reads only what they wrote."""
    return shared_daemon


@pytest.mark.rules("R6.1-1", "R6.1-2")
async def test_R6_1_2_creator_is_governor_of_an_open_thread(daemon):
    [a] = await agents(daemon.url, "alice")
    r = await a.act("thread.create", {"content": {"title": "plans"}})
    assert r == {"thread": r["thread"], "role": "governor"} and r["thread"].startswith("th_")
    ws = await a.read("thread.get", {"thread": r["thread"]})
    assert ws["status"] == "open" and ws["role"] == "governor"
    assert [(m["agent"], m["role"]) for m in ws["members"]] == [(a.id, "governor")]
    listed = await a.read("thread.list", {})
    assert [(i["thread"], i["role"]) for i in listed["items"]] == [(r["thread"], "governor")]
    await close_all(a)


@pytest.mark.rules("R6.1-4", "R6.1-9", "L3-6", "R12-3", "R6.2-16")
async def test_R6_1_9_admission_token_appears_once_and_replay_returns_it_null(daemon):
    a, b = await agents(daemon.url, "alice", "bob")
    t = await new_thread(a)
    key = new_key()
    first = await a.c.request("thread.admit", {"thread": t}, key=key)
    assert first["ok"] and first["replayed"] is False
    res = first["result"]
    assert res["role"] == "speaker"  # R6.1-4: speaker by default
    assert res["admission"].startswith("ad_") and isinstance(res["token"], str) and res["token"]
    # B4 / L3-6: the replay is the same receipt with the secret set to null.
    again = await a.c.request("thread.admit", {"thread": t}, key=key)
    assert again["ok"] and again["replayed"] is True
    assert again["result"] == {**res, "token": None}
    # the replay issued no new grant: the first token still admits
    j = await b.act("thread.join", {"token": res["token"]})
    # a replay after a reissue voids nothing either (L3-2: no second effect)
    c = (await agents(daemon.url, "carol"))[0]
    newer = await a.act("thread.admit", {"thread": t})
    late = await a.c.request("thread.admit", {"thread": t}, key=key)
    assert late["replayed"] is True and late["result"] == {**res, "token": None}
    assert (await c.act("thread.join", {"token": newer["token"]}))["existing"] is False
    await c.close()
    assert j["thread"] == t and j["role"] == "speaker" and j["existing"] is False
    # members read the grant facts but never the token (B8)
    ws = await b.read("thread.get", {"thread": t})
    assert res["token"] not in str(ws)
    assert res["token"] not in str(ws) and newer["token"] not in str(ws)
    assert ws["admission"]["admission"] == newer["admission"]
    [mb] = [m for m in ws["members"] if m["agent"] == b.id]
    assert mb["role"] == "speaker" and mb["joined_at"] == j["joined_at"]
    await close_all(a, b)


@pytest.mark.rules("R6.1-4", "R6.2-24")
async def test_R6_1_4_join_yields_the_grants_role(daemon):
    a, b, c = await agents(daemon.url, "alice", "bob", "carol")
    t = await new_thread(a)
    assert (await admit_join(a, t, b, "observer"))["role"] == "observer"
    assert (await admit_join(a, t, c, "governor"))["role"] == "governor"
    roles = {m["agent"]: m["role"] for m in (await a.read("thread.get", {"thread": t}))["members"]}
    assert roles == {a.id: "governor", b.id: "observer", c.id: "governor"}
    await close_all(a, b, c)


@pytest.mark.rules("L2-5")
async def test_L2_5_joining_again_returns_the_existing_membership(daemon):
    a, b = await agents(daemon.url, "alice", "bob")
    t = await new_thread(a)
    grant = await a.act("thread.admit", {"thread": t})
    first = await b.act("thread.join", {"token": grant["token"]})
    assert first["existing"] is False
    second = await b.act("thread.join", {"token": grant["token"]})  # a new idempotency key
    assert second == {**first, "existing": True}
    # B9: a grant of another role changes nothing
    g2 = await a.act("thread.admit", {"thread": t, "role": "governor"})
    third = await b.act("thread.join", {"token": g2["token"]})
    assert third == {"thread": t, "role": "speaker", "joined_at": first["joined_at"], "admission": first["admission"], "existing": True}
    members = (await a.read("thread.get", {"thread": t}))["members"]
    assert [m["agent"] for m in members].count(b.id) == 1
    await close_all(a, b)


@pytest.mark.rules("R6.1-7", "R6.1-6", "R12-5")
async def test_R12_5_reissue_voids_the_old_token(daemon):
    a, b, c = await agents(daemon.url, "alice", "bob", "carol")
    t = await new_thread(a)
    old = await a.act("thread.admit", {"thread": t})
    new = await a.act("thread.admit", {"thread": t, "role": "observer"})
    assert new["admission"] != old["admission"]
    err = await fails(b, "thread.join", {"token": old["token"]}, "not_found")
    assert err["next"] == "stop"
    assert (await b.read("thread.list", {}))["items"] == []
    assert (await c.act("thread.join", {"token": new["token"]}))["role"] == "observer"
    ws = await a.read("thread.get", {"thread": t})
    assert ws["admission"]["admission"] == new["admission"]
    await close_all(a, b, c)


@pytest.mark.rules("R6.1-8", "R6.2-19")
async def test_R6_1_8_voided_admission_admits_nobody(daemon):
    a, b = await agents(daemon.url, "alice", "bob")
    t = await new_thread(a)
    grant = await a.act("thread.admit", {"thread": t})
    v = await a.act("thread.void_admission", {"thread": t})
    assert v == {"thread": t, "admission": grant["admission"], "status": "voided"}
    await fails(b, "thread.join", {"token": grant["token"]}, "not_found")
    assert (await a.read("thread.get", {"thread": t}))["admission"] is None
    # nothing left to void
    await fails(a, "thread.void_admission", {"thread": t}, "conflict")
    await close_all(a, b)


@pytest.mark.rules("R6.1-3", "R6.2-18", "R6.2-19", "R6.2-23", "R6.2-24")
async def test_R6_2_18_only_a_governor_issues_or_voids_admission(daemon):
    a, b, c, d = await agents(daemon.url, "alice", "bob", "carol", "dave")
    t = await new_thread(a, (b, "speaker"), (c, "observer"))
    for who in (b, c):
        err = await fails(who, "thread.admit", {"thread": t}, "forbidden")
        assert err["next"] == "stop"
        await fails(who, "thread.void_admission", {"thread": t}, "forbidden")
    # a non-member cannot even see the thread
    await fails(d, "thread.admit", {"thread": t}, "not_found")
    # the governor's grant (issued while b and c were admitted) was not voided by their attempts
    assert (await a.read("thread.get", {"thread": t}))["admission"] is not None
    await close_all(a, b, c, d)


@pytest.mark.rules("R9-4", "R12-9", "R9-9", "R9-2")
async def test_R12_9_non_member_read_is_worded_as_for_a_missing_thread(daemon):
    a, b, c = await agents(daemon.url, "alice", "bob", "carol")
    t = await new_thread(a, (c, "speaker"))
    p = await a.act("thread.post", {"thread": t, "content": {"text": "secret plan"}, "assign": {"to": c.id, "content": {"criteria": "x"}}})
    missing_t = fake_id("th_")
    missing_as = fake_id("as_")
    cases = [
        ("thread.get", {"thread": t}, {"thread": missing_t}, t, missing_t),
        ("thread.entries", {"thread": t, "full": True}, {"thread": missing_t, "full": True}, t, missing_t),
        ("assignment.get", {"assignment": p["assignment"]}, {"assignment": missing_as}, p["assignment"], missing_as),
    ]
    for op, real, fake, real_id, fake_id_ in cases:
        e_real = await fails(b, op, real, "not_found")
        e_fake = await fails(b, op, fake, "not_found")
        assert e_real["next"] == e_fake["next"]
        assert e_real.keys() == e_fake.keys()
        assert e_real["reason"].replace(real_id, fake_id_) == e_fake["reason"], (e_real, e_fake)
        assert "secret" not in str(e_real)
    # a former member is a non-member too (R9-2)
    await c.act("thread.leave", {"thread": t})
    e_left = await fails(c, "thread.get", {"thread": t}, "not_found")
    e_fake = await fails(c, "thread.get", {"thread": missing_t}, "not_found")
    assert e_left["reason"].replace(t, missing_t) == e_fake["reason"]
    await close_all(a, b, c)


@pytest.mark.rules("R12-6", "R6.5-7")
async def test_R12_6_join_after_close_fails(daemon):
    a, b = await agents(daemon.url, "alice", "bob")
    t = await new_thread(a)
    grant = await a.act("thread.admit", {"thread": t})
    await a.act("thread.close", {"thread": t})
    await fails(b, "thread.join", {"token": grant["token"]}, "not_found")
    assert (await a.read("thread.get", {"thread": t}))["admission"] is None
    # a closed thread issues no new grant either (R6.5-9)
    await fails(a, "thread.admit", {"thread": t}, "conflict")
    await close_all(a, b)


@pytest.mark.rules("R12-7", "L4-5", "L4-6", "R12-11")
async def test_R12_7_failed_joins_are_rate_limited_even_with_a_valid_token(make_daemon):
    d = make_daemon("[limits]\nfailed_joins_per_window = 3\nfailed_join_window_s = 2\n")
    a, b, c = await agents(d.url, "alice", "bob", "carol")
    t = await new_thread(a)
    grant = await a.act("thread.admit", {"thread": t})
    for i in range(3):
        await fails(b, "thread.join", {"token": f"kt_not-a-token-{i}"}, "not_found")
    last_failure = time.monotonic()
    err = await fails(b, "thread.join", {"token": grant["token"]}, "rate_limited")
    assert err["next"] == "wait"
    # the limited request had no effect (L4-6)
    assert [m["agent"] for m in (await a.read("thread.get", {"thread": t}))["members"]] == [a.id]
    assert (await b.read("thread.list", {}))["items"] == []
    # the limit is per agent: another agent joins with the same grant
    assert (await c.act("thread.join", {"token": grant["token"]}))["existing"] is False
    # b stays limited for the window
    err = await fails(b, "thread.join", {"token": grant["token"]}, "rate_limited")
    assert err["next"] == "wait"
    # once the window has passed, the valid token admits it. Real time is the
    # subject: the limit's window runs on the server's own monotonic clock,
    # which the test clock does not move (rate limits keep real time).
    await asyncio.sleep(max(0.0, last_failure + 2.3 - time.monotonic()))
    assert (await b.act("thread.join", {"token": grant["token"]}))["existing"] is False
    await close_all(a, b, c)


@pytest.mark.rules("R12-7", "L4-5", "L4-6", "R12-9", "R6.1-5")
async def test_R12_7_failed_joins_of_many_agents_share_a_budget_per_address_that_spares_agents_with_none(make_daemon):
    """D25, D230: a guessed token names no Thread, so the bound against guessing
    is one budget every Thread shares, kept per peer address. Fresh agents do
    not get round it: an agent that has failed a join waits once its address
    has spent the budget, the same answer for a valid and an unknown token. But
    an agent with no failed join in the window is not held by it, so strangers
    cannot lock out the joins of others (the review's finding 2: 50 fresh agents
    x 20 bogus tokens locked every valid join on the daemon for 900 s)."""
    d = make_daemon(
        "[limits]\nfailed_joins_per_window = 3\nfailed_joins_total_per_window = 4\nfailed_join_window_s = 2\n"
    )
    url = d.url  # budgets are per node (D132, D143): every client on one node
    a, b, c, e = await agents(url, "alice", "bob", "carol", "erin")
    t = await new_thread(a)
    grant = await a.act("thread.admit", {"thread": t})
    for guesser in (b, c):  # each stays within its own limit of 3
        for i in range(2):
            await fails(guesser, "thread.join", {"token": f"kt_guess-{guesser.id}-{i}"}, "not_found")
    last_failure = time.monotonic()
    # bob has failed and his address has spent its budget: every join of his waits, whatever the token
    valid = await fails(b, "thread.join", {"token": grant["token"]}, "rate_limited")
    unknown = await fails(b, "thread.join", {"token": "kt_guess-bob"}, "rate_limited")
    assert valid["next"] == unknown["next"] == "wait"
    assert valid["reason"] == unknown["reason"]
    assert [m["agent"] for m in (await a.read("thread.get", {"thread": t}))["members"]] == [a.id]  # L4-6
    # erin has never failed a join: her valid token admits her (before D230: rate_limited)
    assert (await e.act("thread.join", {"token": grant["token"]}))["existing"] is False
    # a fresh agent's one guess is answered, and from then on it waits too
    f, = await agents(url, "frank")
    await fails(f, "thread.join", {"token": "kt_guess-frank"}, "not_found")
    last_failure = time.monotonic()
    await fails(f, "thread.join", {"token": grant["token"]}, "rate_limited")
    # other actions are not affected
    await a.act("thread.post", {"thread": t, "content": {"text": "still open"}})
    # Real time is the subject: the window runs on the server's monotonic clock.
    await asyncio.sleep(max(0.0, last_failure + 2.3 - time.monotonic()))
    assert (await b.act("thread.join", {"token": grant["token"]}))["existing"] is False
    await close_all(a, b, c, e, f)


@pytest.mark.rules("R12-7", "R6.1-5", "L4-6")
async def test_R12_7_fifty_strangers_with_bogus_tokens_do_not_lock_a_valid_join(make_daemon):
    """The review's repro (finding 2), scaled: agents registered with no key by
    one address spend that address's whole failed-join budget; a member's valid
    token still admits it, and so does one for another Thread."""
    d = make_daemon("[limits]\nfailed_joins_per_window = 4\nfailed_joins_total_per_window = 20\nfailed_join_window_s = 900\n")
    url = d.url  # budgets are per node (D132, D143): every client on one node
    gov, member, other = await agents(url, "gov", "member", "other")
    t1, t2 = await new_thread(gov), await new_thread(gov)
    g1 = await gov.act("thread.admit", {"thread": t1})
    g2 = await gov.act("thread.admit", {"thread": t2})
    strangers = await agents(url, *[f"s{i}" for i in range(10)])
    got = codes(await asyncio.gather(*(
        call(s.c, "thread.join", {"token": f"kt_bogus-{s.name}-{i}"}, key=new_key()) for s in strangers for i in range(4)
    )))
    assert got.get("not_found", 0) <= 20 + len(strangers) and got.get("rate_limited", 0) > 0, got
    assert (await member.act("thread.join", {"token": g1["token"]}))["existing"] is False
    assert (await other.act("thread.join", {"token": g2["token"]}))["existing"] is False
    await close_all(gov, member, other, *strangers)


async def pipelined_joins(url: str, key: str, tokens: list[str]) -> list[dict]:
    """Send one ``thread.join`` per token on one connection without waiting for
    any reply, then collect every reply (in request order)."""
    async with await Raw.connect(url, key) as raw:
        frames = [{"id": i, "op": "thread.join", "key": new_key(), "args": {"token": t}} for i, t in enumerate(tokens)]
        await asyncio.gather(*(raw.send(f) for f in frames))
        return [json.loads(await raw.reply_text(f["id"], 30)) for f in frames]


def codes(replies: list[dict]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in replies:
        code = "ok" if r["ok"] else check_failure(r)["code"]
        out[code] = out.get(code, 0) + 1
    return out


@pytest.mark.rules("R12-7", "L4-5", "L4-6")
async def test_R12_7_pipelined_failed_joins_cannot_outrun_the_limit(make_daemon):
    """Review M2. 25 wrong tokens sent at once on one connection with
    ``failed_joins_per_window = 5``: a join counts against the budget when it
    arrives, so at most 5 are answered ``not_found`` and the rest
    ``rate_limited`` with ``next: wait``; then even a valid token waits."""
    d = make_daemon("[limits]\nfailed_joins_per_window = 5\nfailed_join_window_s = 60\n")
    url = d.url  # budgets are per node (D132, D143): every client on one node
    a, b = await agents(url, "alice", "bob")
    t = await new_thread(a)
    grant = await a.act("thread.admit", {"thread": t})
    replies = await pipelined_joins(url, b.key, [f"kt_wrong-{i}" for i in range(25)])
    got = codes(replies)
    assert got.get("not_found", 0) <= 5 and got.get("not_found", 0) + got.get("rate_limited", 0) == 25, got
    assert all(r["error"]["next"] == "wait" for r in replies if r["error"]["code"] == "rate_limited")
    await fails(b, "thread.join", {"token": grant["token"]}, "rate_limited")
    assert [m["agent"] for m in (await a.read("thread.get", {"thread": t}))["members"]] == [a.id]
    await close_all(a, b)


@pytest.mark.rules("R12-7", "L4-5", "L4-6")
async def test_R12_7_pipelined_failed_joins_of_many_agents_cannot_outrun_the_daemon_wide_budget(make_daemon):
    """Review M2, D25, D230. Three agents pipeline 10 wrong tokens each at the
    same time; each may fail 5, their address 8, and each agent's first join is
    never held by the address's budget (it has no failure yet): at most 8 + 3
    ``not_found``."""
    d = make_daemon(
        "[limits]\nfailed_joins_per_window = 5\nfailed_joins_total_per_window = 8\nfailed_join_window_s = 60\n"
    )
    url = d.url  # budgets are per node (D132, D143): every client on one node
    a, b, c, e = await agents(url, "alice", "bob", "carol", "erin")
    await new_thread(a)
    batches = await asyncio.gather(
        *(pipelined_joins(url, m.key, [f"kt_wrong-{m.name}-{i}" for i in range(10)]) for m in (b, c, e))
    )
    got = codes([r for batch in batches for r in batch])
    assert got.get("not_found", 0) <= 8 + 3 and got.get("not_found", 0) + got.get("rate_limited", 0) == 30, got
    await close_all(a, b, c, e)


@pytest.mark.rules("R12-7", "L2-5")
async def test_R12_7_successful_joins_give_their_budget_back(make_daemon):
    """Review M2: a join is counted when it arrives and refunded when it
    succeeds (or is replayed), so successes never use up the failed-join budget."""
    d = make_daemon("[limits]\nfailed_joins_per_window = 3\nfailed_join_window_s = 60\n")
    a, b = await agents(d.url, "alice", "bob")
    t = await new_thread(a)
    grant = await a.act("thread.admit", {"thread": t})
    key = new_key()
    for _ in range(2):  # a join and its replay
        r = await b.c.request("thread.join", {"token": grant["token"]}, key=key)
        assert r["ok"] is True, r
    for _ in range(3):  # joining again is the existing membership (L2-5): a success too
        assert (await b.act("thread.join", {"token": grant["token"]}))["existing"] is True
    for i in range(3):  # the whole budget of failures is still there
        await fails(b, "thread.join", {"token": f"kt_wrong-{i}"}, "not_found")
    await fails(b, "thread.join", {"token": grant["token"]}, "rate_limited")
    await close_all(a, b)


@pytest.mark.rules("R6.1-3")
async def test_R6_1_3_join_with_an_unknown_token_is_not_found(daemon):
    a, b = await agents(daemon.url, "alice", "bob")
    t = await new_thread(a)
    await a.act("thread.admit", {"thread": t})
    r = await b.c.request("thread.join", {"token": "kt_guess"}, key=new_key())
    err = check_failure(r, "not_found")
    assert "kt_guess" not in err["reason"]
    await close_all(a, b)


@pytest.mark.rules("R6.1-5", "R4-1")
async def test_R6_1_5_a_deactivated_agent_cannot_join(daemon):
    a, b = await agents(daemon.url, "alice", "bob")
    t = await new_thread(a)
    grant = await a.act("thread.admit", {"thread": t})
    async with await Client.connect(daemon.url, daemon.admin_key) as admin:
        await admin.act("admin.agent.set_status", {"agent": b.id, "status": "deactivated"})
    await fails(b, "thread.join", {"token": grant["token"]}, "forbidden")
    assert [m["agent"] for m in (await a.read("thread.get", {"thread": t}))["members"]] == [a.id]
    await close_all(a, b)
