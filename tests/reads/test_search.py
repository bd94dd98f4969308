"""``search`` over a real runtime and LMDB store (WIRE.md 1.3 "Search"): only
what the caller may read at the moment of the read is found (§9), and nothing
in a page — its items, their count, order and scores, its cursor — depends on
what the caller may not read (R12-9)."""

from __future__ import annotations

import itertools
import json
import threading

import msgspec
import pytest

from kungfud.actors import Runtime
from kungfud.errors import Rejection
from kungfud.store import Committed, Store
from kungfud.wire import OPS

_keys = itertools.count()


class World:
    """Agents acting through the runtime, as the server would submit them."""

    def __init__(self, rt: Runtime):
        self.rt = rt

    def act(self, who: str | None, op: str, **args) -> dict:
        done = threading.Event()
        box: list = []

        def reply(outcome):
            box.append(outcome)
            done.set()

        self.rt.act(who, op, f"k{next(_keys)}", msgspec.convert(args, OPS[op].args), reply)
        assert done.wait(10), "no reply"
        assert isinstance(box[0], Committed), (op, box[0])
        return json.loads(box[0].result)

    def agent(self, name: str) -> str:
        return self.act(None, "agent.register", content={"name": name})["agent"]

    def search(self, agent: str, q: str, **args):
        return self.rt.read("search", agent, msgspec.convert({"q": q, **args}, OPS["search"].args))

    def found(self, agent: str, q: str, **args) -> list[dict]:
        page = self.search(agent, q, **args)
        assert not isinstance(page, Rejection), page
        return page["items"]

    def thread(self, governor: str, *members: str) -> str:
        th = self.act(governor, "thread.create")["thread"]
        for m in members:
            token = self.act(governor, "thread.admit", thread=th)["token"]
            self.act(m, "thread.join", token=token)
        return th


@pytest.fixture
def world(tmp_path):
    store = Store(str(tmp_path / "data"), map_size_mb=256)
    rt = Runtime(store)
    rt.start()
    yield World(rt)
    rt.stop()
    store.close()


def _ids(items: list[dict]) -> list[tuple]:
    return [tuple(sorted((k, v) for k, v in i.items() if k not in ("snippet",))) for i in items]


@pytest.mark.rules("R5-10", "R9-7", "R9-8", "R12-9")
def test_memories_found_only_while_memory_get_reads_their_current_version(world):
    alice, bob = world.agent("alice"), world.agent("bob")
    m = world.act(alice, "memory.create", content={"text": "Résumé of the zebra plan"})["memory"]
    assert [i["memory"] for i in world.found(alice, "resume ZEBRA")] == [m]
    assert world.found(bob, "zebra") == []  # private
    world.act(alice, "memory.publish", memory=m)
    (item,) = world.found(bob, "zebra")
    assert item["kind"] == "memory" and item["version"] == 1 and "zebra" in item["snippet"]
    world.act(alice, "memory.update", memory=m, content={"text": "the giraffe plan"})
    assert world.found(bob, "zebra") == [] and world.found(alice, "zebra") == []  # current version only
    assert [i["version"] for i in world.found(bob, "giraffe")] == [2]
    world.act(alice, "memory.withdraw", memory=m)
    assert world.found(bob, "giraffe") == [] and world.found(alice, "giraffe") == []  # withdrawn: never


@pytest.mark.rules("R9-9", "R9-2", "R12-9")
def test_entries_found_by_current_members_only(world):
    alice, bob, carol = world.agent("alice"), world.agent("bob"), world.agent("carol")
    th = world.thread(alice, bob)
    world.act(alice, "thread.post", thread=th, content={"text": "we decided on the okapi route"})
    (item,) = world.found(bob, "okapi")
    assert (item["kind"], item["thread"], item["entry"]) == ("entry", th, 1)
    assert world.found(carol, "okapi") == []
    assert world.found(bob, "okapi", thread=th) == [item]
    assert isinstance(world.search(carol, "okapi", thread=th), Rejection)  # as thread.entries: not_found
    world.act(bob, "thread.leave", thread=th)
    assert world.found(bob, "okapi") == []


@pytest.mark.rules("R9-13", "R9-14", "R9-16", "R9-11")
def test_task_contracts_where_section_9_allows_and_deliveries_to_their_parties(world):
    alice, bob, carol = world.agent("alice"), world.agent("bob"), world.agent("carol")
    contract = {"content": {"output": "a report", "criteria": "mentions the narwhal"}}
    open_task = world.act(alice, "task.create", audience="open", contract=contract)["task"]
    closed = world.act(alice, "task.create", audience={"agents": [bob]}, contract=contract)["task"]
    assert {i["task"] for i in world.found(carol, "narwhal")} == {open_task}
    assert {i["task"] for i in world.found(bob, "narwhal")} == {open_task, closed}
    assert all(set(i) == {"kind", "task", "at", "snippet", "score"} for i in world.found(bob, "narwhal"))
    en = world.act(bob, "task.take", task=open_task)["engagement"]
    world.act(bob, "task.deliver", engagement=en, content={"text": "the narwhal delivery"})
    got = [i for i in world.found(bob, "narwhal delivery") if i["kind"] == "delivery"]
    assert got and got[0]["engagement"] == en and got[0]["task"] == open_task
    assert [i for i in world.found(alice, "narwhal delivery", **{"in": ["delivery"]})][0]["engagement"] == en
    assert world.found(carol, "narwhal delivery", **{"in": ["delivery"]}) == []


@pytest.mark.rules("R12-9")
def test_what_the_caller_cannot_read_changes_no_count_order_score_or_cursor(world, monkeypatch):
    alice, bob, eve = world.agent("alice"), world.agent("bob"), world.agent("eve")
    th = world.thread(alice, bob)
    for n in range(5):
        world.act(alice, "thread.post", thread=th, content={"text": f"quokka note {n} " + "quokka " * (n % 3)})

    # Every page of bob's, with the same cursors (sealing is random: fix its nonce).
    monkeypatch.setattr("kungfud.reads.cursors.os.urandom", lambda n: b"\x00" * n)

    def pages() -> list[tuple]:
        out, cursor = [], None
        while True:
            args = {"limit": 2} if cursor is None else {"limit": 2, "cursor": cursor}
            page = world.search(bob, "quokka", **args)
            out.append((_ids(page["items"]), [i["snippet"] for i in page["items"]], page["cursor"]))
            if page["cursor"] is None:
                return out
            cursor = page["cursor"]

    before = pages()
    assert sum(len(p[0]) for p in before) == 5
    # Documents bob may not read, matching better and worse, older and newer.
    other = world.thread(eve)
    for n in range(20):
        world.act(eve, "thread.post", thread=other, content={"text": "quokka " * n})
        world.act(eve, "memory.create", content={"text": "quokka quokka"})
    world.act(eve, "task.create", audience={"agents": [alice]}, contract={"content": {"output": "quokka", "criteria": "quokka"}})
    assert pages() == before


@pytest.mark.rules("R12-9")
def test_order_is_score_then_newest_and_paging_skips_nothing(world):
    alice = world.agent("alice")
    made = [world.act(alice, "memory.create", content={"text": "kiwi"})["memory"] for _ in range(4)]
    strong = world.act(alice, "memory.create", content={"text": "kiwi kiwi kiwi"})["memory"]
    items, cursor = [], None
    while True:
        page = world.search(alice, "kiwi", limit=2, **({"cursor": cursor} if cursor else {}))
        items += page["items"]
        cursor = page["cursor"]
        if cursor is None:
            break
    assert [i["memory"] for i in items] == [strong, *reversed(made)]
    assert items[0]["score"] > items[1]["score"] and len({i["score"] for i in items[1:]}) == 1


@pytest.mark.rules("R12-9")
def test_a_cursor_of_another_caller_or_query_is_refused(world):
    alice, bob = world.agent("alice"), world.agent("bob")
    for _ in range(3):
        world.act(alice, "memory.create", content={"text": "lemur"})
    page = world.search(alice, "lemur", limit=1)
    assert page["cursor"].startswith("~")
    for who, q in ((bob, "lemur"), (alice, "lemurs")):
        r = world.search(who, q, limit=1, cursor=page["cursor"])
        assert isinstance(r, Rejection) and r.code == "bad_request"


@pytest.mark.rules("R9-10", "R5-14", "R5-15")
def test_an_entry_is_found_only_while_its_pinned_content_is_readable(world):
    alice, bob, carol = world.agent("alice"), world.agent("bob"), world.agent("carol")
    m = world.act(bob, "memory.create", content={"text": "the tapir memo"})["memory"]
    world.act(bob, "memory.publish", memory=m)
    th = world.thread(alice, carol)
    world.act(alice, "thread.post", thread=th, memory={"memory": m, "version": 1})
    assert [i["entry"] for i in world.found(carol, "tapir", **{"in": ["entry"]})] == [1]
    world.act(bob, "memory.unpublish", memory=m)  # another's pin is readable only while valid and public
    assert world.found(carol, "tapir") == [] and world.found(alice, "tapir") == []
    world.act(bob, "memory.publish", memory=m)
    assert len(world.found(carol, "tapir", **{"in": ["entry"]})) == 1
    world.act(bob, "memory.unpublish", memory=m)
    assert [i["kind"] for i in world.found(bob, "tapir")] == ["memory"]  # bob reads his own, not alice's Thread


@pytest.mark.rules("R9-11", "R9-14", "R9-9")
def test_assignment_deliveries_to_members_and_restricted_contracts_to_their_readers(world):
    alice, bob, carol, judge, eve = (world.agent(n) for n in ("alice", "bob", "carol", "judge", "eve"))
    th = world.thread(alice, bob, carol)
    asg = world.act(alice, "thread.post", thread=th, content={"text": "please"},
                    assign={"to": bob, "content": {"criteria": "a capybara census"}})["assignment"]
    world.act(bob, "assignment.take", assignment=asg, deliver={"content": {"text": "capybara census done"}})
    for who in (alice, bob, carol):
        got = [i for i in world.found(who, "capybara census", **{"in": ["delivery"]})]
        assert [(i["thread"], i["assignment"]) for i in got] == [(th, asg)], who
    assert world.found(eve, "capybara") == []
    world.act(alice, "thread.remove", thread=th, agent=carol)
    assert world.found(carol, "capybara", **{"in": ["delivery", "entry"]}) == []

    contract = {"content": {"output": "x", "criteria": "the ibex rule"}, "judge": judge}
    task = world.act(alice, "task.create", audience={"agents": [bob]}, contract=contract)["task"]
    for who, sees in ((alice, True), (bob, True), (judge, True), (eve, False)):
        assert [i["task"] for i in world.found(who, "ibex")] == ([task] if sees else []), who
    world.act(alice, "task.revise", task=task, contract={"content": {"output": "x", "criteria": "the oryx rule"}})
    assert world.found(bob, "ibex") == [] and [i["task"] for i in world.found(bob, "oryx")] == [task]
    assert world.found(eve, "oryx") == []


@pytest.mark.rules("R12-9")
def test_a_bad_kind_list_or_thread_filter_is_refused_saying_why(world):
    alice = world.agent("alice")
    r = world.search(alice, "x", **{"in": []})
    assert isinstance(r, Rejection) and r.code == "bad_request" and "`in`" in r.reason
    th = world.thread(alice)
    world.act(alice, "memory.create", content={"text": "gnu"})
    assert world.found(alice, "gnu", thread=th) == []  # a Thread's filter leaves out Memories and Tasks


@pytest.mark.rules("R12-9")
def test_the_window_is_the_newest_matches_the_caller_may_read_whatever_else_matches(world, monkeypatch):
    monkeypatch.setattr("kungfud.reads.search.WINDOW", 3)
    monkeypatch.setattr("kungfud.reads.search._BATCH", 2)  # batches end on documents bob may not read
    alice, bob, carol = world.agent("alice"), world.agent("bob"), world.agent("carol")
    th = world.thread(alice, bob)
    shared = world.act(carol, "memory.create", content={"text": "axolotl axolotl"})["memory"]
    world.act(carol, "memory.publish", memory=shared)
    mine = []
    for n in range(5):
        mine.append(world.act(bob, "memory.create", content={"text": f"axolotl {n}"})["memory"])
        world.act(alice, "thread.post", thread=th, memory={"memory": shared})  # carol's Memory, pinned
    world.act(carol, "memory.unpublish", memory=shared)  # the entries are in bob's Thread, their content not his to read
    got = world.found(bob, "axolotl")
    assert [i["memory"] for i in got] == mine[:1:-1]  # the newest three he may read; equal scores: newest first
