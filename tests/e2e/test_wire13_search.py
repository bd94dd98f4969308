"""Outside conformance for WIRE.md 1.3 "Search", sentence by sentence: the
item shapes and exactly which ids each kind names; ``q`` (all words, a
"phrase", a prefix*, case- and accent-blind); ``in`` and ``thread``; §9 at the
moment of the read (withdrawn and old versions, non-members, restricted Tasks,
deliveries to parties only); R12-9 (what another may not read changes nothing
in results, scores or cursor); newest first among equal scores; the list
convention; bad input."""

from __future__ import annotations

import re
import secrets

import pytest

from kungfud.client import Client, new_key
from tests.e2e.helpers import Raw, agent_client, check_failure, fake_id

_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
_IDS = {"memory", "version", "thread", "entry", "task", "engagement", "assignment"}


@pytest.fixture
def daemon(shared_daemon):
    """One daemon for the module: each test uses words of its own (``_word``)."""
    return shared_daemon


def _word() -> str:
    """A word no other test writes (letters only: digits would split nothing, but stay plain)."""
    return "w" + "".join(secrets.choice("abcdefghijklmnopqrstuvxyz") for _ in range(10))


async def _search(c: Client, q: str, **args) -> dict:
    return await c.read("search", {"q": q, **args})


def _ids(page: dict) -> list[tuple]:
    return [(i["kind"], *sorted((k, v) for k, v in i.items() if k in _IDS)) for i in page["items"]]


def _check_item(item: dict, ids: set[str]) -> None:
    assert set(item) == {"kind", "at", "snippet", "score"} | ids, item
    assert _TIME.match(item["at"]) and isinstance(item["snippet"], str), item
    assert isinstance(item["score"], (int, float)) and not isinstance(item["score"], bool), item


async def _thread_with(url: str, gov: Client, name: str) -> tuple[str, Client]:
    th = (await gov.act("thread.create", {}))["thread"]
    other, _ = await agent_client(url, name)
    token = (await gov.act("thread.admit", {"thread": th, "role": "speaker"}))["token"]
    await other.act("thread.join", {"token": token})
    return th, other


@pytest.mark.rules("R9-7", "R9-9", "R9-16", "L6-1")
async def test_each_kind_names_exactly_the_ids_that_read_it(daemon):
    w = _word()
    alice, a = await agent_client(daemon.url, "alice")
    me = (await alice.act("memory.create", {"content": {"text": f"{w} memory"}}))["memory"]
    th, bob = await _thread_with(daemon.url, alice, "bob")
    posted = await alice.act("thread.post", {"thread": th, "content": {"text": f"{w} entry"},
                                              "assign": {"to": bob.agent, "content": {"criteria": f"{w} criteria"}}})
    asg = posted["assignment"]
    await bob.act("assignment.take", {"assignment": asg})
    await bob.act("assignment.deliver", {"assignment": asg, "content": {"text": f"{w} assignment delivery"}})
    task = (await alice.act("task.create", {"audience": {"agents": [bob.agent]},
                                            "contract": {"content": {"output": f"{w} output", "criteria": "c"}}}))["task"]
    eng = (await bob.act("task.take", {"task": task}))["engagement"]
    await bob.act("task.deliver", {"engagement": eng, "content": {"text": f"{w} task delivery"}})
    items = (await _search(alice, w))["items"]
    by = {}
    for item in items:
        by.setdefault(item["kind"], []).append(item)
    for m in by["memory"]:  # `content` in a post or delivery made a private Memory of its author's too
        _check_item(m, {"memory", "version"})
    assert (me, 1) in [(m["memory"], m["version"]) for m in by["memory"]]
    entries = by["entry"]
    for e in entries:
        _check_item(e, {"thread", "entry"})
        assert e["thread"] == th and isinstance(e["entry"], int)
    assert posted["entry"] in [e["entry"] for e in entries]
    (t,) = by["task"]
    _check_item(t, {"task"})
    assert t["task"] == task
    deliveries = {tuple(sorted(set(d) & _IDS)): d for d in by["delivery"]}
    assert set(deliveries) == {("assignment", "thread"), ("engagement", "task")}, by["delivery"]
    _check_item(deliveries[("assignment", "thread")], {"thread", "assignment"})
    assert (deliveries[("assignment", "thread")]["thread"], deliveries[("assignment", "thread")]["assignment"]) == (th, asg)
    _check_item(deliveries[("engagement", "task")], {"task", "engagement"})
    assert (deliveries[("engagement", "task")]["task"], deliveries[("engagement", "task")]["engagement"]) == (task, eng)
    # each names what reads it: the ids work in the read they belong to
    assert (await alice.read("memory.get", {"memory": me, "version": 1}))["memory"] == me
    for e in entries:
        assert (await alice.read("thread.entry", {"thread": th, "entry": e["entry"]}))["entry"] == e["entry"]
    assert (await alice.read("task.get", {"task": task}))["task"] == task
    assert (await alice.read("engagement.get", {"engagement": eng}))["engagement"] == eng
    assert (await alice.read("assignment.get", {"assignment": asg}))["assignment"] == asg
    # `in` keeps only the kinds named
    assert {i["kind"] for i in (await _search(alice, w, **{"in": ["task", "delivery"]}))["items"]} == {"task", "delivery"}
    assert {i["kind"] for i in (await _search(alice, w, **{"in": ["memory"]}))["items"]} == {"memory"}
    # `thread` keeps what belongs to that Thread: its entries and its assignments' deliveries
    in_thread = (await _search(alice, w, thread=th))["items"]
    assert in_thread and all(i.get("thread") == th for i in in_thread), in_thread
    assert {i["kind"] for i in in_thread} == {"entry", "delivery"}
    for c in (alice, bob):
        await c.close()


@pytest.mark.rules("R9-7", "R9-8")
async def test_q_all_words_phrase_prefix_case_and_accent_blind(daemon):
    w = _word()
    alice, _ = await agent_client(daemon.url, "alice")
    one = (await alice.act("memory.create", {"content": {"t": f"{w} Crème Brûlée recipe"}}))["memory"]
    two = (await alice.act("memory.create", {"content": {"deep": [{"t": f"{w} brulee creme"}]}}))["memory"]
    three = (await alice.act("memory.create", {"content": {"t": f"{w} recipes for soup"}}))["memory"]

    async def found(q: str) -> set[str]:
        return {i["memory"] for i in (await _search(alice, f"{w} {q}", **{"in": ["memory"]}))["items"]}

    assert await found("creme brulee") == {one, two}  # all words, any order, accents and case ignored
    assert await found("CRÈME") == {one, two}
    assert await found('"creme brulee"') == {one}  # a phrase: those words in that order
    assert await found('"brulee creme"') == {two}
    assert await found("recipe") == {one}  # a word is a word, not a prefix
    assert await found("recip*") == {one, three}  # a prefix
    assert await found("RÉCIP*") == {one, three}
    assert await found("recipe soup") == set()  # every word must match
    assert await found("nowhere") == set()
    await alice.close()


@pytest.mark.rules("R9-7", "R9-8", "R9-9", "R12-9", "L6-1")
async def test_memories_only_current_version_readable_now(daemon):
    w = _word()
    alice, _ = await agent_client(daemon.url, "alice")
    bob, _ = await agent_client(daemon.url, "bob")
    me = (await alice.act("memory.create", {"content": {"t": f"{w} oldword"}}))["memory"]

    async def found(c: Client, q: str) -> list:
        return _ids(await _search(c, f"{w} {q}", **{"in": ["memory"]}))

    assert await found(alice, "oldword") == [("memory", ("memory", me), ("version", 1))]
    assert await found(bob, "oldword") == []  # private: another agent finds nothing
    await alice.act("memory.update", {"memory": me, "content": {"t": f"{w} newword"}})
    assert await found(alice, "oldword") == []  # the current version only
    assert await found(alice, "newword") == [("memory", ("memory", me), ("version", 2))]
    await alice.act("memory.publish", {"memory": me})
    assert await found(bob, "newword") == [("memory", ("memory", me), ("version", 2))]
    assert await found(bob, "oldword") == []
    await alice.act("memory.unpublish", {"memory": me})
    assert await found(bob, "newword") == []
    await alice.act("memory.publish", {"memory": me})
    await alice.act("memory.withdraw", {"memory": me})
    assert await found(alice, "newword") == []  # withdrawn: never found, not even by its author
    assert await found(bob, "newword") == []
    for c in (alice, bob):
        await c.close()


@pytest.mark.rules("R9-9", "R9-11", "R12-9")
async def test_entries_and_assignment_deliveries_only_to_members_now(daemon):
    w = _word()
    alice, _ = await agent_client(daemon.url, "alice")
    th, bob = await _thread_with(daemon.url, alice, "bob")
    carol, _ = await agent_client(daemon.url, "carol")
    entry = (await alice.act("thread.post", {"thread": th, "content": {"t": f"{w} said here"}}))["entry"]
    assert _ids(await _search(bob, w)) == [("entry", ("entry", entry), ("thread", th))]
    assert (await _search(carol, w))["items"] == []  # not a member
    err = check_failure(await carol.request("search", {"q": w, "thread": th}), "not_found")
    never = fake_id("th_")
    err2 = check_failure(await carol.request("search", {"q": w, "thread": never}), "not_found")
    assert err["reason"].replace(th, "X") == err2["reason"].replace(never, "X") and err["next"] == err2["next"]  # R12-9
    await bob.act("thread.leave", {"thread": th})
    assert (await _search(bob, w))["items"] == []  # no longer a member
    for c in (alice, bob, carol):
        await c.close()


@pytest.mark.rules("R9-13", "R9-14", "R9-16", "R12-9")
async def test_tasks_where_9_allows_and_deliveries_to_their_parties(daemon):
    w = _word()
    alice, _ = await agent_client(daemon.url, "alice")
    bob, _ = await agent_client(daemon.url, "bob")
    carol, _ = await agent_client(daemon.url, "carol")
    open_task = (await alice.act("task.create", {"audience": "open",
                                                 "contract": {"content": {"output": f"{w} open", "criteria": "c"}}}))["task"]
    closed = (await alice.act("task.create", {"audience": {"agents": [bob.agent]},
                                              "contract": {"content": {"output": f"{w} restricted", "criteria": "c"}}}))["task"]

    async def tasks(c: Client) -> set[str]:
        return {i["task"] for i in (await _search(c, w, **{"in": ["task"]}))["items"]}

    assert await tasks(alice) == {open_task, closed}
    assert await tasks(bob) == {open_task, closed}
    assert await tasks(carol) == {open_task}
    await alice.act("task.revise", {"task": open_task, "contract": {"content": {"output": "other words", "criteria": "c"}}})
    assert await tasks(carol) == set()  # the current contract only
    e_bob = (await bob.act("task.take", {"task": closed}))["engagement"]
    await bob.act("task.deliver", {"engagement": e_bob, "content": {"t": f"{w} bob delivers"}})
    e_carol = (await carol.act("task.take", {"task": open_task}))["engagement"]
    await carol.act("task.deliver", {"engagement": e_carol, "content": {"t": f"{w} carol delivers"}})

    async def deliveries(c: Client) -> set[str]:
        return {i["engagement"] for i in (await _search(c, f"{w} delivers", **{"in": ["delivery"]}))["items"]}

    assert await deliveries(alice) == {e_bob, e_carol}  # the author
    assert await deliveries(bob) == {e_bob}  # each engaged agent its own only
    assert await deliveries(carol) == {e_carol}
    for c in (alice, bob, carol):
        await c.close()


@pytest.mark.rules("R9-10", "R12-9", "L6-1")
async def test_an_entry_pinning_another_agents_memory_is_found_while_that_pin_is_readable(daemon):
    """An entry is found only through text the caller may read: another
    agent's pinned Memory while it is valid and public (WIRE.md "What reads
    show"); the pinner's own Memory always."""
    w = _word()
    alice, _ = await agent_client(daemon.url, "alice")
    th, bob = await _thread_with(daemon.url, alice, "bob")
    carol_me = (await bob.act("memory.create", {"content": {"t": f"{w} bobs public note"}}))["memory"]
    await bob.act("memory.publish", {"memory": carol_me})
    entry = (await alice.act("thread.post", {"thread": th, "memory": {"memory": carol_me, "version": 1}}))["entry"]
    want = [("entry", ("entry", entry), ("thread", th))]
    assert _ids(await _search(alice, w, **{"in": ["entry"]})) == want
    assert (await alice.read("thread.entry", {"thread": th, "entry": entry})).get("content") is not None
    await bob.act("memory.unpublish", {"memory": carol_me})
    assert (await alice.read("thread.entry", {"thread": th, "entry": entry})).get("content") is None
    assert (await _search(alice, w, **{"in": ["entry"]}))["items"] == []  # no longer readable: not found
    # found exactly when thread.entry shows the caller the content (an item names the ids that read it)
    shown = "content" in await bob.read("thread.entry", {"thread": th, "entry": entry})
    assert _ids(await _search(bob, w, **{"in": ["entry"]})) == (want if shown else [])
    own = (await alice.act("memory.create", {"content": {"t": f"{w} alices own"}}))["memory"]
    entry2 = (await alice.act("thread.post", {"thread": th, "memory": {"memory": own, "version": 1}}))["entry"]
    await alice.act("memory.withdraw", {"memory": own})
    got = (await _search(bob, f"{w} alices", **{"in": ["entry"]}))["items"]  # the pinner's own: always
    assert [(i["thread"], i["entry"]) for i in got] == [(th, entry2)]
    for c in (alice, bob):
        await c.close()


@pytest.mark.rules("R9-14", "R9-16")
async def test_a_designated_judge_finds_the_contract_and_the_delivery_it_judges(daemon):
    w = _word()
    alice, _ = await agent_client(daemon.url, "alice")
    bob, _ = await agent_client(daemon.url, "bob")
    judge, _ = await agent_client(daemon.url, "judge")
    dave, _ = await agent_client(daemon.url, "dave")
    task = (await alice.act("task.create", {"audience": {"agents": [bob.agent]}, "contract": {
        "judge": judge.agent, "content": {"output": f"{w} judged", "criteria": "c"}}}))["task"]
    eng = (await bob.act("task.take", {"task": task}))["engagement"]
    await bob.act("task.deliver", {"engagement": eng, "content": {"t": f"{w} for the judge"}})
    assert sorted(_ids(await _search(judge, w, **{"in": ["task", "delivery"]}))) == [
        ("delivery", ("engagement", eng), ("task", task)), ("task", ("task", task))]
    assert (await _search(dave, w))["items"] == []
    for c in (alice, bob, judge, dave):
        await c.close()


@pytest.mark.rules("R9-9", "R12-9")
async def test_a_removed_member_finds_nothing_and_an_observer_finds_entries(daemon):
    w = _word()
    alice, _ = await agent_client(daemon.url, "alice")
    th, bob = await _thread_with(daemon.url, alice, "bob")
    obs, _ = await agent_client(daemon.url, "observer")
    token = (await alice.act("thread.admit", {"thread": th, "role": "observer"}))["token"]
    await obs.act("thread.join", {"token": token})
    entry = (await bob.act("thread.post", {"thread": th, "content": {"t": f"{w} from bob"}}))["entry"]
    want = [("entry", ("entry", entry), ("thread", th))]
    assert _ids(await _search(obs, w, **{"in": ["entry"]})) == want
    assert _ids(await _search(obs, w, thread=th)) == want
    await alice.act("thread.remove", {"thread": th, "agent": obs.agent})
    assert (await _search(obs, w))["items"] == []
    check_failure(await obs.request("search", {"q": w, "thread": th}), "not_found")
    await alice.act("thread.close", {"thread": th})  # closed: its members still read it
    assert _ids(await _search(bob, w, **{"in": ["entry"]})) == want
    for c in (alice, bob, obs):
        await c.close()


@pytest.mark.rules("R12-9")
async def test_what_another_may_not_read_changes_nothing_and_equal_scores_are_newest_first(daemon):
    w = _word()
    alice, _ = await agent_client(daemon.url, "alice")
    mallory, _ = await agent_client(daemon.url, "mallory")
    mine = [(await alice.act("memory.create", {"content": {"t": f"{w} same text"}}))["memory"] for _ in range(5)]
    longer = (await alice.act("memory.create", {"content": {"t": f"{w} same text " + "filler " * 40}}))["memory"]
    async with await Raw.connect(daemon.url, alice.key) as r:
        async def pages() -> list:
            out, cursor = [], None
            while True:
                resp = await r.req("search", {"q": f"{w} text", "limit": 2, **({"cursor": cursor} if cursor else {})})
                assert resp["ok"] is True and set(resp["result"]) == {"items", "cursor"}, resp
                out.append(resp["result"])
                cursor = resp["result"]["cursor"]
                if cursor is None:
                    return out

        before = await pages()
        items = [i for p in before for i in p["items"]]
        assert [i["memory"] for i in items] == [*reversed(mine), longer]  # equal scores: newest first; longer scores less
        assert items[0]["score"] == items[4]["score"] > items[5]["score"]
        assert [len(p["items"]) for p in before] == [2, 2, 2] and before[-1]["cursor"] is None
        for _ in range(7):  # unreadable to alice: her results, scores and cursors do not move
            await mallory.act("memory.create", {"content": {"t": f"{w} same text"}})
            await mallory.act("memory.create", {"content": {"t": f"{w} text"}})
        def shown(ps: list) -> list:  # a cursor is sealed afresh each time: what it leads to is compared
            return [(p["items"], p["cursor"] is None) for p in ps]

        assert shown(await pages()) == shown(before)
        # an acknowledged action is found by the next search
        new = (await alice.act("memory.create", {"content": {"t": f"{w} same text"}}))["memory"]
        first = (await r.req("search", {"q": f"{w} text", "limit": 1}))["result"]["items"]
        assert [i["memory"] for i in first] == [new]
        # a cursor is the caller's: another agent, or another query, may not page with it
        async with await Raw.connect(daemon.url, mallory.key) as m:
            check_failure(await m.req("search", {"q": f"{w} text", "cursor": before[0]["cursor"]}), "bad_request")
        check_failure(await r.req("search", {"q": f"{w} other", "cursor": before[0]["cursor"]}), "bad_request")
    for c in (alice, mallory):
        await c.close()


@pytest.mark.rules("L2-1")
async def test_bad_input_is_a_clear_bad_request(daemon):
    alice, _ = await agent_client(daemon.url, "alice")
    async with await Raw.connect(daemon.url, alice.key) as r:
        for args, field in (
            ({}, "q"),
            ({"q": ""}, "q"),
            ({"q": "   "}, "q"),
            ({"q": '""'}, "q"),
            ({"q": 5}, "q"),
            ({"q": "x", "in": []}, "in"),
            ({"q": "x", "in": ["bogus"]}, "in"),
            ({"q": "x", "in": "memory"}, "in"),
            ({"q": "x", "limit": 0}, "limit"),
            ({"q": "x", "limit": 101}, "limit"),
            ({"q": "x", "cursor": "not-a-cursor"}, "cursor"),
            ({"q": "x", "thread": "nope"}, "thread"),
            ({"q": "x", "colour": "red"}, "colour"),
        ):
            err = check_failure(await r.req("search", args), "bad_request")
            assert field in err["reason"] and err["next"] == "revise", (args, err)
        check_failure(await r.req("search", {"q": "x"}, key=new_key()), "bad_request")  # a read takes no key
        ok = await r.req("search", {"q": "x", "limit": 100})
        assert ok["ok"] is True and set(ok["result"]) == {"items", "cursor"}
    await alice.close()
