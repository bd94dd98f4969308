"""``thread.assignments`` over the real daemon (docs/wire.md "A Thread's
assignments"): a Thread's assignments, live and ended, newest first, each as
``assignment.get`` shows it without its instruction — so a judged assignment's
delivery, verdict and reason stay readable after it left thread.get's live
list; paged by entry number without skipping (R8-10), bounded (R8-13), and
readable by current members only (§9 R9-9, R9-2, R9-4)."""

from __future__ import annotations

import pytest

from tests.e2e.thread_kit import admit_join, agents, close_all, fails, new_thread


async def walk(who, thread: str, limit: int, state: str | None = None) -> list[list[str]]:
    out, cursor = [], None
    for _ in range(100):
        args = {"thread": thread, "limit": limit} | ({"cursor": cursor} if cursor else {}) | ({"state": state} if state else {})
        page = await who.read("thread.assignments", args)
        out.append([a["assignment"] for a in page["items"]])
        cursor = page["cursor"]
        if cursor is None:
            return out
    raise AssertionError("paging did not end")


async def _assign(gov, thread: str, to: str, output: str) -> str:
    got = await gov.act("thread.post", {"thread": thread, "content": {"text": output}, "ask": [],
                                        "assign": {"to": to, "content": {"output": output, "criteria": "done well"}}})
    return got["assignment"]


@pytest.mark.rules("R9-9", "R9-11", "R6.4-26", "R8-10", "R8-13")
async def test_thread_assignments_pages_live_and_ended_with_delivery_verdict_and_reason(daemon):
    a, b, c = await agents(daemon.url, "alice", "bob", "olga")
    t = await new_thread(a, (b, "speaker"), (c, "observer"))
    rejected = await _assign(a, t, b.id, "release notes")
    await a.act("thread.post", {"thread": t, "content": {"text": "a plain entry"}, "ask": []})
    adopted = await _assign(a, t, b.id, "changelog")
    voided = await _assign(a, t, b.id, "logo")
    live = await _assign(a, t, b.id, "upgrade guide")
    await b.act("assignment.take", {"assignment": rejected, "deliver": {"content": {"text": "14 changes"}}})
    await a.act("assignment.judge", {"assignment": rejected, "verdict": "reject", "content": {"reason": "misses two"}})
    await b.act("assignment.take", {"assignment": adopted, "deliver": {"content": {"text": "- fsync"}}})
    await a.act("assignment.judge", {"assignment": adopted, "verdict": "adopt"})
    await a.act("assignment.void", {"assignment": voided})
    # thread.get lists only the live one; thread.assignments every one, newest first.
    assert [x["assignment"] for x in (await a.read("thread.get", {"thread": t}))["assignments"]] == [live]
    newest_first = [live, voided, adopted, rejected]
    for who in (a, b, c):  # every current member, an observer too
        assert await walk(who, t, 100) == [newest_first]
    assert await walk(a, t, 2) == [[live, voided], [adopted, rejected]]
    assert await walk(a, t, 3) == [[live, voided, adopted], [rejected]]
    assert await walk(a, t, 1, "ended") == [[voided], [adopted], [rejected]]
    assert await walk(a, t, 100, "live") == [[live]]
    # Each item is assignment.get's answer without the instruction.
    items = (await c.read("thread.assignments", {"thread": t}))["items"]
    for item in items:
        got = await c.read("assignment.get", {"assignment": item["assignment"]})
        assert "instruction" in got and "instruction" not in item
        assert item == {k: v for k, v in got.items() if k != "instruction"}
    by_id = {x["assignment"]: x for x in items}
    assert by_id[rejected]["state"] == "rejected"
    assert by_id[rejected]["delivery"]["content"] == {"text": "14 changes"}
    assert by_id[rejected]["judgment"]["verdict"] == "reject"
    assert by_id[rejected]["judgment"]["content"] == {"reason": "misses two"}
    assert by_id[adopted]["judgment"]["verdict"] == "adopt" and by_id[voided]["state"] == "voided"
    assert by_id[live]["state"] == "open" and "delivery" not in by_id[live]
    # A new assignment while paging back is newer than the walk: nothing skipped or repeated.
    first = await a.read("thread.assignments", {"thread": t, "limit": 2})
    await _assign(a, t, b.id, "late")
    seen, cursor = [x["assignment"] for x in first["items"]], first["cursor"]
    while cursor is not None:
        page = await a.read("thread.assignments", {"thread": t, "cursor": cursor, "limit": 2})
        seen += [x["assignment"] for x in page["items"]]
        cursor = page["cursor"]
    assert seen == newest_first
    await close_all(a, b, c)


@pytest.mark.rules("R9-9", "R9-2", "R9-4", "R12-9")
async def test_thread_assignments_is_not_found_for_a_non_member_and_a_former_member(daemon):
    a, b, outsider = await agents(daemon.url, "alice", "bob", "olga")
    t = await new_thread(a, (b, "speaker"))
    await _assign(a, t, b.id, "release notes")
    missing = await fails(outsider, "thread.assignments", {"thread": t}, "not_found")
    # Worded as for a Thread that does not exist: nothing tells the Thread is there.
    assert missing == await fails(outsider, "thread.get", {"thread": t}, "not_found")
    await b.act("thread.leave", {"thread": t})
    await fails(b, "thread.assignments", {"thread": t}, "not_found")
    await admit_join(a, t, b, "observer")
    assert len((await b.read("thread.assignments", {"thread": t}))["items"]) == 1
    # Bad arguments are bad_request.
    await fails(a, "thread.assignments", {"thread": t, "state": "open"}, "bad_request")
    await fails(a, "thread.assignments", {"thread": t, "cursor": "x"}, "bad_request")
    await fails(a, "thread.assignments", {"thread": t, "limit": 0}, "bad_request")
    await fails(a, "thread.assignments", {}, "bad_request")
    await close_all(a, b, outsider)
