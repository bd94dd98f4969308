"""Reading the work itself over the real daemon (WIRE.md 1.1 "Reading the work
itself"): ``thread.entry`` reads one entry in the shape ``thread.entries`` gives,
with the content the caller may read (R9-10); ``thread.entries`` pages newest
first as well, skipping nothing in either direction (R8-10); ``assignment.get``
carries its ``instruction`` and ``engagement.get`` the bound ``contract``, so a
recovering agent reads what it was asked in one read (R8-17, R8-18)."""

from __future__ import annotations

import pytest

from tests.e2e.thread_kit import agents, all_entries, close_all, fails, new_thread


@pytest.fixture
def daemon(shared_daemon):
    """One daemon for the module (tests/conftest.py ``shared_daemon``): each test
    registers agents of its own and reads only what they wrote."""
    return shared_daemon


async def pages(who, thread: str, limit: int, newest_first: bool, full: bool = False) -> list[list[int]]:
    out, cursor = [], None
    for _ in range(100):
        args = {"thread": thread, "cursor": cursor, "limit": limit, "newest_first": newest_first, "full": full}
        page = await who.read("thread.entries", args)
        out.append([e["entry"] for e in page["items"]])
        cursor = page["cursor"]
        if cursor is None:
            return out
    raise AssertionError("paging did not end")


@pytest.mark.rules("R8-12", "R9-9", "R9-10", "R9-4")
async def test_R9_10_thread_entry_is_the_entries_shape_with_the_content_the_caller_may_read(daemon):
    a, b, outsider = await agents(daemon.url, "alice", "bob", "olga")
    t = await new_thread(a, (b, "speaker"))
    await a.act("thread.post", {"thread": t, "content": {"text": "first"}, "ask": [b.id]})
    mem = (await b.act("memory.create", {"content": {"text": "public note"}}))["memory"]
    await b.act("memory.publish", {"memory": mem})
    await a.act("thread.post", {"thread": t, "memory": {"memory": mem, "version": 1}, "reply_to": 1, "ask": []})
    await b.act("thread.handle", {"thread": t, "entry": 1, "content": {"note": "seen"}})
    for who in (a, b):
        full = await all_entries(who, t, full=True)
        for e in full:
            assert await who.read("thread.entry", {"thread": t, "entry": e["entry"]}) == e
    one = await a.read("thread.entry", {"thread": t, "entry": 1})
    assert one["content"] == {"text": "first"} and one["responses"][0]["content"] == {"note": "seen"}
    assert (await a.read("thread.entry", {"thread": t, "entry": 2}))["content"] == {"text": "public note"}
    # R9-10: a pin of another agent's Memory is readable only while it is public.
    await b.act("memory.unpublish", {"memory": mem})
    hidden = await a.read("thread.entry", {"thread": t, "entry": 2})
    assert "content" not in hidden and hidden["pin"] == {"memory": mem, "version": 1}
    # A missing entry, and a Thread the caller is not in: not_found (R9-4).
    err = await fails(a, "thread.entry", {"thread": t, "entry": 3}, "not_found")
    assert "3" in err["reason"] and err["next"] == "stop"
    missing = await fails(outsider, "thread.entry", {"thread": t, "entry": 1}, "not_found")
    assert missing == await fails(outsider, "thread.get", {"thread": t}, "not_found")
    await fails(a, "thread.entry", {"thread": t, "entry": 0}, "bad_request")
    await fails(a, "thread.entry", {"thread": t}, "bad_request")
    await close_all(a, b, outsider)


@pytest.mark.rules("R8-9", "R8-10", "R8-13")
async def test_R8_10_entries_page_newest_first_and_oldest_first_without_skipping(daemon):
    a, b = await agents(daemon.url, "alice", "bob")
    t = await new_thread(a, (b, "speaker"))
    for n in range(7):
        await a.act("thread.post", {"thread": t, "content": {"n": n}, "ask": []})
    assert await pages(a, t, 3, newest_first=True) == [[7, 6, 5], [4, 3, 2], [1]]
    assert await pages(a, t, 3, newest_first=False) == [[1, 2, 3], [4, 5, 6], [7]]
    assert await pages(a, t, 7, newest_first=True) == [[7, 6, 5, 4, 3, 2, 1]]
    assert await pages(a, t, 100, newest_first=False, full=True) == [[1, 2, 3, 4, 5, 6, 7]]
    # Entries posted while paging back are newer than the walk: none that
    # existed when it began is skipped or repeated.
    first = await a.read("thread.entries", {"thread": t, "limit": 2, "newest_first": True})
    await b.act("thread.post", {"thread": t, "content": {"late": 1}, "ask": []})
    seen, cursor = [e["entry"] for e in first["items"]], first["cursor"]
    while cursor is not None:
        page = await a.read("thread.entries", {"thread": t, "cursor": cursor, "limit": 2, "newest_first": True})
        seen += [e["entry"] for e in page["items"]]
        cursor = page["cursor"]
    assert seen == [7, 6, 5, 4, 3, 2, 1]
    # The default stays oldest first; a bad flag or cursor is bad_request.
    assert [e["entry"] for e in (await a.read("thread.entries", {"thread": t, "limit": 2}))["items"]] == [1, 2]
    await fails(a, "thread.entries", {"thread": t, "newest_first": "yes"}, "bad_request")
    await fails(a, "thread.entries", {"thread": t, "newest_first": True, "cursor": "x"}, "bad_request")
    await close_all(a, b)


@pytest.mark.rules("R8-11", "R8-17", "R8-18", "R6.4-15")
async def test_R8_17_assignment_get_carries_its_instruction_as_thread_entry_shows_it(daemon):
    lead, w = await agents(daemon.url, "lead", "w")
    t = await new_thread(lead, (w, "speaker"))
    await lead.act("thread.post", {"thread": t, "content": {"text": "context"}, "ask": []})
    r = await lead.act("thread.post", {
        "thread": t, "content": {"text": "Write the migration; keep downgrade working"},
        "assign": {"to": w.id, "content": {"criteria": "both directions work"}},
    })
    for who in (w, lead):
        got = await who.read("assignment.get", {"assignment": r["assignment"]})
        assert got["instruction"] == await who.read("thread.entry", {"thread": t, "entry": r["entry"]})
        assert got["instruction"]["content"] == {"text": "Write the migration; keep downgrade working"}
        assert got["instruction"]["assignment"] == r["assignment"] and got["entry"] == r["entry"]
    # After taking, the instruction still shows the entry as it is now (the response ended).
    await w.act("assignment.take", {"assignment": r["assignment"]})
    got = await w.read("assignment.get", {"assignment": r["assignment"]})
    assert got["instruction"] == await w.read("thread.entry", {"thread": t, "entry": r["entry"]})
    assert [x["state"] for x in got["instruction"]["responses"]] != ["pending"]  # R6.4-20
    await close_all(lead, w)


@pytest.mark.rules("R8-11", "R8-17", "R9-13", "R9-16", "R7.1-9")
async def test_R9_13_engagement_get_carries_the_bound_contract_to_its_parties(daemon):
    author, judge, w, other = await agents(daemon.url, "author", "judge", "w", "other")
    v1 = {"output": "a haiku", "criteria": "5-7-5"}
    tk = (await author.act("task.create", {
        "audience": {"agents": [w.id, other.id]},
        "contract": {"judge": judge.id, "deliver_within_s": 600, "judge_within_s": 300, "content": v1},
    }))["task"]
    en = (await w.act("task.take", {"task": tk}))["engagement"]
    await author.act("task.revise", {"task": tk, "contract": {"content": {"output": "a sonnet", "criteria": "14 lines"}}})
    want = {"version": 1, "content": v1, "deliver_within_s": 600, "judge_within_s": 300}
    for who in (w, author, judge):
        assert (await who.read("engagement.get", {"engagement": en}))["contract"] == want
    # Not a party: not_found, as before (R9-16).
    await fails(other, "engagement.get", {"engagement": en}, "not_found")
    await close_all(author, judge, w, other)
