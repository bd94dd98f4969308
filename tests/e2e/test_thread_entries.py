"""§6.3 entries and responses over the real daemon: pins, the four responder rules,
replies, handles with private notes, retraction, paging, and what pinned content
each reader sees (R6.3-*, R5-11, R5-14, R5-15, R9-10, R9-12)."""

from __future__ import annotations

import pytest

from kungfud.client import new_key
from tests.e2e.helpers import check_failure
from tests.e2e.thread_kit import (
    admit_join,
    agents,
    all_entries,
    close_all,
    entry,
    fails,
    new_thread,
    response_of,
    turn_items,
)


@pytest.fixture
def daemon(shared_daemon):
    """One daemon for the module (tests/conftest.py ``shared_daemon``): each test
    registers agents of its own and reads only what they wrote."""
    return shared_daemon


def _responds(items: list[dict]) -> list[tuple[str, int]]:
    return [(i["ref"]["thread"], i["ref"]["entry"]) for i in items if i["obligation"] == "respond"]


@pytest.mark.rules("R6.3-2", "R5-2", "R5-14")
async def test_R6_3_2_post_with_content_pins_version_1_of_a_new_private_memory(daemon):
    a, b = await agents(daemon.url, "alice", "bob")
    t = await new_thread(a, (b, "speaker"))
    r = await a.act("thread.post", {"thread": t, "content": {"text": "hello"}})
    assert r["thread"] == t and r["entry"] == 1 and r["ended"] == []
    pin = r["pin"]
    assert pin["version"] == 1 and pin["memory"].startswith("me_")
    mem = await a.read("memory.get", {"memory": pin["memory"]})
    assert mem["author"] == a.id and mem["visibility"] == "private" and mem["content"] == {"text": "hello"}
    # the memory stays private to others, yet members read the pinned version
    await fails(b, "memory.get", {"memory": pin["memory"]}, "not_found")
    e = await entry(b, t, 1, full=True)
    assert e["author"] == a.id and e["pin"] == pin and e["content"] == {"text": "hello"}
    assert isinstance(e["at"], str) and e["at"].endswith("Z")
    # digests without `full` carry no content (R8-12)
    assert "content" not in await entry(b, t, 1)
    r2 = await b.act("thread.post", {"thread": t, "content": {"text": "hi"}})
    assert r2["entry"] == 2
    await close_all(a, b)


@pytest.mark.rules("R6.3-2", "R5-8", "R5-7")
async def test_R5_8_post_with_a_memory_ref_pins_one_version(daemon):
    a, b = await agents(daemon.url, "alice", "bob")
    t = await new_thread(a, (b, "speaker"))
    m = (await a.act("memory.create", {"content": {"v": 1}}))["memory"]
    await a.act("memory.update", {"memory": m, "content": {"v": 2}})
    cur = await a.act("thread.post", {"thread": t, "memory": {"memory": m}})
    assert cur["pin"] == {"memory": m, "version": 2}
    old = await a.act("thread.post", {"thread": t, "memory": {"memory": m, "version": 1}})
    assert old["pin"] == {"memory": m, "version": 1}
    await a.act("memory.update", {"memory": m, "content": {"v": 3}})
    e1, e2 = await all_entries(b, t, full=True)
    assert (e1["pin"], e1["content"]) == ({"memory": m, "version": 2}, {"v": 2})
    assert (e2["pin"], e2["content"]) == ({"memory": m, "version": 1}, {"v": 1})
    # a version that does not exist is not found
    await fails(a, "thread.post", {"thread": t, "memory": {"memory": m, "version": 9}}, "not_found")
    await close_all(a, b)


@pytest.mark.rules("R6.3-6", "R6.3-9", "R6.3-12", "R8-22", "R8-23")
async def test_R6_3_9_with_exactly_two_speakers_the_other_is_responder(daemon):
    a, b, c = await agents(daemon.url, "alice", "bob", "carol")
    t = await new_thread(a, (b, "speaker"), (c, "observer"))  # the observer does not count
    r1 = await a.act("thread.post", {"thread": t, "content": {"n": 1}})
    assert r1["responders"] == [b.id]
    r2 = await b.act("thread.post", {"thread": t, "content": {"n": 2}})
    assert r2["responders"] == [a.id]
    e1 = await entry(c, t, 1)
    assert e1["responders"] == [b.id] and e1["responses"] == [{"agent": b.id, "state": "pending"}]
    assert _responds(await turn_items(b)) == [(t, 1)]
    assert _responds(await turn_items(a)) == [(t, 2)]
    assert await turn_items(c) == []
    await close_all(a, b, c)


@pytest.mark.rules("R6.3-10", "R6.3-11")
async def test_R6_3_10_with_three_speakers_a_plain_entry_is_a_broadcast(daemon):
    a, b, c, d = await agents(daemon.url, "alice", "bob", "carol", "dave")
    t = await new_thread(a, (b, "speaker"))
    r1 = await a.act("thread.post", {"thread": t, "content": {"n": 1}})
    assert r1["responders"] == [b.id]
    await admit_join(a, t, c, "speaker")
    r2 = await a.act("thread.post", {"thread": t, "content": {"n": 2}})
    assert r2["responders"] == []
    assert (await entry(c, t, 2))["responses"] == []
    # R6.3-11: the later arrival did not widen entry 1's responders
    assert (await entry(c, t, 1))["responders"] == [b.id]
    assert _responds(await turn_items(c)) == []
    # a governor joining later does not either
    await admit_join(a, t, d, "governor")
    assert (await entry(d, t, 1))["responders"] == [b.id]
    assert await turn_items(d) == []
    await close_all(a, b, c, d)


@pytest.mark.rules("R6.3-7", "R6.3-4")
async def test_R6_3_7_ask_names_the_responders_and_an_empty_ask_means_nobody(daemon):
    a, b, c = await agents(daemon.url, "alice", "bob", "carol")
    t = await new_thread(a, (b, "speaker"))
    # two speakers, yet an empty ask means nobody
    r = await a.act("thread.post", {"thread": t, "content": {"n": 1}, "ask": []})
    assert r["responders"] == []
    assert await turn_items(b) == []
    await admit_join(a, t, c, "speaker")
    r = await a.act("thread.post", {"thread": t, "content": {"n": 2}, "ask": [b.id, c.id]})
    assert sorted(r["responders"]) == sorted([b.id, c.id])
    e = await entry(a, t, 2)
    assert sorted(e["ask"]) == sorted([b.id, c.id])
    assert {x["agent"]: x["state"] for x in e["responses"]} == {b.id: "pending", c.id: "pending"}
    # rule 1 comes before rule 2: an asking reply asks whom it names
    r = await c.act("thread.post", {"thread": t, "content": {"n": 3}, "reply_to": 1, "ask": [b.id]})
    assert r["responders"] == [b.id]
    await close_all(a, b, c)


@pytest.mark.rules("R6.3-8", "R6.3-14")
async def test_R6_3_8_reply_to_another_members_entry_makes_its_author_responder(daemon):
    a, b, c = await agents(daemon.url, "alice", "bob", "carol")
    t = await new_thread(a, (b, "speaker"), (c, "speaker"))
    await a.act("thread.post", {"thread": t, "content": {"n": 1}})  # broadcast
    r = await b.act("thread.post", {"thread": t, "content": {"n": 2}, "reply_to": 1})
    assert r["responders"] == [a.id]
    assert (await entry(c, t, 2))["reply_to"] == 1
    # author who can no longer speak: nobody (demoted to observer)
    await a.act("thread.set_role", {"thread": t, "agent": b.id, "role": "observer"})
    r = await c.act("thread.post", {"thread": t, "content": {"n": 3}, "reply_to": 2})
    assert r["responders"] == []
    # author who left: nobody
    await c.act("thread.post", {"thread": t, "content": {"n": 4}})
    await c.act("thread.leave", {"thread": t})
    r = await a.act("thread.post", {"thread": t, "content": {"n": 5}, "reply_to": 4})
    assert r["responders"] == []
    await close_all(a, b, c)


@pytest.mark.rules("R6.3-9", "R6.3-8")
async def test_R6_3_9_a_self_reply_falls_through_to_the_two_speaker_rule(daemon):
    a, b = await agents(daemon.url, "alice", "bob")
    t = await new_thread(a, (b, "speaker"))
    await a.act("thread.post", {"thread": t, "content": {"n": 1}, "ask": []})
    r = await a.act("thread.post", {"thread": t, "content": {"n": 2}, "reply_to": 1})
    assert r["responders"] == [b.id]  # DECISIONS.md B11
    await close_all(a, b)


@pytest.mark.rules("R6.3-4", "L2-3")
async def test_R6_3_4_ask_naming_a_non_member_an_observer_or_the_author_is_bad_request(daemon):
    a, b, c, d = await agents(daemon.url, "alice", "bob", "carol", "dave")
    t = await new_thread(a, (b, "speaker"), (c, "observer"))
    for bad in (d.id, c.id, a.id):  # non-member, observer, the author itself
        err = await fails(a, "thread.post", {"thread": t, "content": {"x": 1}, "ask": [b.id, bad]}, "bad_request")
        assert bad in err["reason"] and b.id not in err["reason"], err  # DECISIONS.md B10: names the offender
        assert err["next"] == "revise"
    # nothing was posted
    assert (await a.read("thread.get", {"thread": t}))["entries"] == 0
    assert await turn_items(b) == []
    await close_all(a, b, c, d)


@pytest.mark.rules("R6.3-13", "R6.3-14", "R6.3-15", "R8-24")
async def test_R6_3_13_replying_ends_the_repliers_pending_response(daemon):
    a, b = await agents(daemon.url, "alice", "bob")
    t = await new_thread(a, (b, "speaker"))
    await a.act("thread.post", {"thread": t, "content": {"q": "ready?"}})
    [ob] = await turn_items(b)
    assert ob["ref"] == {"thread": t, "entry": 1}
    r = await b.act("thread.post", {"thread": t, "content": {"a": "yes"}, "reply_to": 1})
    assert r["ended"] == [ob["obligation_id"]]
    assert r["responders"] == [a.id]  # R6.3-14: decided afresh
    assert response_of(await entry(a, t, 1), b.id)["state"] == "replied"
    assert _responds(await turn_items(b)) == []
    assert _responds(await turn_items(a)) == [(t, 2)]
    # R6.3-15: replying without a pending response is allowed, and ends nothing
    r = await b.act("thread.post", {"thread": t, "content": {"a": "also"}, "reply_to": 1, "ask": []})
    assert r["ended"] == [] and r["entry"] == 3
    await close_all(a, b)


@pytest.mark.rules("R6.3-3", "R6.5-13")
async def test_R6_3_3_reply_to_a_missing_entry_or_another_threads_entry_is_rejected(daemon):
    a, b = await agents(daemon.url, "alice", "bob")
    t = await new_thread(a, (b, "speaker"))
    t2 = await new_thread(a, (b, "speaker"))
    await a.act("thread.post", {"thread": t2, "content": {"n": 1}})
    # entry 1 exists only in t2: replies do not cross threads
    await fails(b, "thread.post", {"thread": t, "content": {"n": 1}, "reply_to": 1}, "not_found")
    assert (await b.read("thread.get", {"thread": t}))["entries"] == 0
    await close_all(a, b)


@pytest.mark.rules("R6.3-16", "R6.3-17", "R9-12", "R8-25")
async def test_R6_3_17_handle_note_is_readable_only_by_author_and_responder(daemon):
    a, b, c = await agents(daemon.url, "alice", "bob", "carol")
    t = await new_thread(a, (b, "speaker"), (c, "speaker"))
    await a.act("thread.post", {"thread": t, "content": {"q": "review?"}, "ask": [b.id, c.id]})
    [ob] = await turn_items(b)
    r = await b.act("thread.handle", {"thread": t, "entry": 1, "content": {"note": "covered in standup"}})
    assert r == {"thread": t, "entry": 1, "ended": [ob["obligation_id"]]}
    assert await turn_items(b) == []
    # handling posts nothing
    assert (await a.read("thread.get", {"thread": t}))["entries"] == 1
    for reader in (a, b):  # the entry's author and the responder
        resp = response_of(await entry(reader, t, 1), b.id)
        assert resp == {"agent": b.id, "state": "handled", "content": {"note": "covered in standup"}}, reader
    # a third member sees the state but no content
    seen = response_of(await entry(c, t, 1), b.id)
    assert seen == {"agent": b.id, "state": "handled"}
    full = response_of(await entry(c, t, 1, full=True), b.id)
    assert full == {"agent": b.id, "state": "handled"}
    ws = await c.read("thread.get", {"thread": t})
    assert "covered in standup" not in str(ws)
    # a handle without a note
    assert (await c.act("thread.handle", {"thread": t, "entry": 1}))["entry"] == 1
    assert response_of(await entry(a, t, 1), c.id) == {"agent": c.id, "state": "handled"}
    # nothing left to handle
    await fails(b, "thread.handle", {"thread": t, "entry": 1}, "conflict")
    await close_all(a, b, c)


@pytest.mark.rules("R6.3-16")
async def test_R6_3_16_handle_note_must_be_one_line(daemon):
    a, b = await agents(daemon.url, "alice", "bob")
    t = await new_thread(a, (b, "speaker"))
    await a.act("thread.post", {"thread": t, "content": {"q": 1}})
    await fails(b, "thread.handle", {"thread": t, "entry": 1, "content": {"note": "two\nlines"}}, "bad_request")
    assert response_of(await entry(a, t, 1), b.id)["state"] == "pending"
    # only a responder handles
    await fails(a, "thread.handle", {"thread": t, "entry": 1}, "conflict")
    await close_all(a, b)


@pytest.mark.rules("R6.3-18", "R6.3-19", "R8-26")
async def test_R6_3_18_retract_ends_all_pending_and_not_given_responses(daemon):
    a, b, c, d = await agents(daemon.url, "alice", "bob", "carol", "dave")
    t = await new_thread(a, (b, "speaker"), (c, "speaker"), (d, "speaker"))
    await a.act("thread.post", {"thread": t, "content": {"q": 1}, "ask": [b.id, c.id, d.id]})
    obs = {m.id: (await turn_items(m))[0]["obligation_id"] for m in (b, c, d)}
    await b.act("thread.post", {"thread": t, "content": {"a": 1}, "reply_to": 1})
    await c.act("thread.handle", {"thread": t, "entry": 1, "content": {"note": "n/a"}})
    # only the author retracts
    await fails(b, "thread.retract", {"thread": t, "entry": 1}, "forbidden")
    r = await a.act("thread.retract", {"thread": t, "entry": 1})
    assert r == {"thread": t, "entry": 1, "ended": [obs[d.id]]}
    e = await entry(a, t, 1)
    states = {x["agent"]: x["state"] for x in e["responses"]}
    assert states == {b.id: "replied", c.id: "handled", d.id: "retracted"}
    assert response_of(e, c.id)["content"] == {"note": "n/a"}  # R6.3-19: the handle stands
    assert _responds(await turn_items(d)) == []
    # nothing pending any more
    await fails(a, "thread.retract", {"thread": t, "entry": 1}, "conflict")
    await close_all(a, b, c, d)


@pytest.mark.rules("R6.3-1", "R6.2-24", "R6.2-23")
async def test_R6_3_1_observer_cannot_post(daemon):
    a, b, c, d = await agents(daemon.url, "alice", "bob", "carol", "dave")
    t = await new_thread(a, (b, "observer"), (c, "speaker"))
    err = await fails(b, "thread.post", {"thread": t, "content": {"x": 1}}, "forbidden")
    assert err["next"] == "stop"
    await fails(b, "thread.post", {"thread": t, "content": {"x": 1}, "assign": {"to": b.id, "content": {"criteria": "c"}}}, "forbidden")
    # a non-member cannot tell the thread exists
    await fails(d, "thread.post", {"thread": t, "content": {"x": 1}}, "not_found")
    assert (await a.read("thread.get", {"thread": t}))["entries"] == 0
    # the observer reads; the speaker posts
    assert (await c.act("thread.post", {"thread": t, "content": {"x": 2}}))["entry"] == 1
    assert len(await all_entries(b, t)) == 1
    await close_all(a, b, c, d)


@pytest.mark.rules("R8-12", "R8-13", "R8-9")
async def test_R8_12_entries_page_oldest_first_and_full_returns_pinned_content(daemon):
    a, b = await agents(daemon.url, "alice", "bob")
    t = await new_thread(a, (b, "speaker"))
    for i in range(1, 6):
        await a.act("thread.post", {"thread": t, "content": {"n": i}, "ask": []})
    seen, cursor, pages = [], None, 0
    while True:
        page = await b.read("thread.entries", {"thread": t, "cursor": cursor, "limit": 2})
        pages += 1
        assert len(page["items"]) <= 2
        seen += [e["entry"] for e in page["items"]]
        assert all("content" not in e for e in page["items"])
        cursor = page["cursor"]
        if cursor is None:
            break
    assert seen == [1, 2, 3, 4, 5] and pages == 3
    full = await all_entries(b, t, full=True)
    assert [e["content"] for e in full] == [{"n": i} for i in range(1, 6)]
    assert all(e["author"] == a.id for e in full)
    # a bad cursor is a bad request, not a silent restart
    await fails(b, "thread.entries", {"thread": t, "cursor": "zzz"}, "bad_request")
    await close_all(a, b)


@pytest.mark.rules("R9-10", "R5-15", "R5-13")
async def test_R5_15_a_pin_of_another_agents_memory_shows_only_while_valid_and_public(daemon):
    a, b, c = await agents(daemon.url, "alice", "bob", "carol")
    t = await new_thread(a, (b, "speaker"), (c, "speaker"))
    m = (await b.act("memory.create", {"content": {"doc": "bob's notes"}}))["memory"]
    # B12: another agent's private Memory cannot be pinned (unreadable: not_found)
    await fails(a, "thread.post", {"thread": t, "memory": {"memory": m}}, "not_found")
    await b.act("memory.publish", {"memory": m})
    r = await a.act("thread.post", {"thread": t, "memory": {"memory": m}})
    assert r["pin"] == {"memory": m, "version": 1}

    async def shown() -> list:
        return [(await entry(x, t, 1, full=True)).get("content") for x in (a, c)]

    assert await shown() == [{"doc": "bob's notes"}] * 2
    await b.act("memory.unpublish", {"memory": m})
    assert await shown() == [None, None]
    e = await entry(c, t, 1, full=True)
    assert e["pin"] == {"memory": m, "version": 1} and "bob's notes" not in str(e)  # the digest stays
    await b.act("memory.publish", {"memory": m})
    assert await shown() == [{"doc": "bob's notes"}] * 2
    # an update does not move the pin (R5-8)
    await b.act("memory.update", {"memory": m, "content": {"doc": "v2"}})
    assert await shown() == [{"doc": "bob's notes"}] * 2
    await b.act("memory.withdraw", {"memory": m})
    assert await shown() == [None, None]
    await close_all(a, b, c)


@pytest.mark.rules("R5-14", "R5-12", "R9-10")
async def test_R5_14_a_pin_of_ones_own_memory_stays_readable_after_withdrawal(daemon):
    a, b = await agents(daemon.url, "alice", "bob")
    t = await new_thread(a, (b, "speaker"))
    m = (await a.act("memory.create", {"content": {"doc": "alice's plan"}}))["memory"]
    await a.act("thread.post", {"thread": t, "memory": {"memory": m}})
    await a.act("memory.withdraw", {"memory": m})
    for reader in (a, b):
        assert (await entry(reader, t, 1, full=True))["content"] == {"doc": "alice's plan"}
    await fails(b, "memory.get", {"memory": m}, "not_found")
    await close_all(a, b)


@pytest.mark.rules("R5-11", "R6.3-2", "L2-3")
async def test_R5_11_a_withdrawn_memory_cannot_be_pinned(daemon):
    a, b = await agents(daemon.url, "alice", "bob")
    t = await new_thread(a, (b, "speaker"))
    m = (await a.act("memory.create", {"content": {"doc": 1}}))["memory"]
    await a.act("memory.withdraw", {"memory": m})
    await fails(a, "thread.post", {"thread": t, "memory": {"memory": m}}, "conflict")
    await fails(a, "thread.post", {"thread": t, "memory": {"memory": m, "version": 1}}, "conflict")
    assert (await a.read("thread.get", {"thread": t}))["entries"] == 0
    assert await turn_items(b) == []
    await close_all(a, b)


@pytest.mark.rules("L3-2", "L3-3")
async def test_L3_2_replayed_post_creates_one_entry(daemon):
    a, b = await agents(daemon.url, "alice", "bob")
    t = await new_thread(a, (b, "speaker"))
    key = new_key()
    args = {"thread": t, "content": {"n": 1}}
    first = await a.c.request("thread.post", args, key=key)
    again = await a.c.request("thread.post", args, key=key)
    assert again["replayed"] is True and again["result"] == first["result"]
    check_failure(await a.c.request("thread.post", {"thread": t, "content": {"n": 2}}, key=key), "idempotency_mismatch")
    assert (await a.read("thread.get", {"thread": t}))["entries"] == 1
    assert len(await turn_items(b)) == 1
    await close_all(a, b)
