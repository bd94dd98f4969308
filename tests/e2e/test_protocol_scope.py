"""§1, §2, §8, §9, §10.2: rules about the whole protocol, checked over the real
daemon — what the atoms may and may not become, the closed catalogues, who reads
receipts, consistent reads, and that every fact traces to an action, a deadline
or an account change."""

from __future__ import annotations

import asyncio

import pytest

from kungfud.store import Store
from kungfud.store.layout import decode_fact
from kungfud.wire import OPS
from tests.e2e.helpers import agent_client


@pytest.fixture
def daemon(shared_daemon):
    """One daemon for the module (tests/conftest.py ``shared_daemon``): each test
    registers agents of its own and reads only what they wrote; the one that
    stops it and reads its store starts its own."""
    return shared_daemon


CONTRACT = {"content": {"output": "a summary", "criteria": "accurate"}}


async def _thread_of_three(url: str):
    a, ida = await agent_client(url, "a")
    b, idb = await agent_client(url, "b")
    c, idc = await agent_client(url, "c")
    t = (await a.act("thread.create", {}))["thread"]
    token = (await a.act("thread.admit", {"thread": t}))["token"]
    await b.act("thread.join", {"token": token})
    await c.act("thread.join", {"token": token})
    return (a, ida), (b, idb), (c, idc), t


@pytest.mark.rules("R2-1", "R2-3", "R7.5-1", "R7.5-3", "R7.5-4")
async def test_R2_1_R2_3_an_entry_references_a_task_and_a_memory_and_the_task_enters_no_obligations(daemon):
    (a, ida), (b, idb), (c, idc), t = await _thread_of_three(daemon.url)
    m = await a.act("memory.create", {"content": {"brief": "x"}})
    tk = (await a.act("task.create", {"audience": "open", "contract": CONTRACT}))["task"]
    before = await a.read("task.get", {"task": tk})
    r = await a.act("thread.post", {"thread": t, "memory": {"memory": m["memory"]}, "task": tk})
    assert r["pin"] == {"memory": m["memory"], "version": 1} and r["responders"] == []  # broadcast: 3 speakers
    for cl in (a, b, c):
        assert (await cl.read("turn", {}))["items"] == []  # R2-3, R7.5-4: no obligation from the reference
    after = await a.read("task.get", {"task": tk})
    assert {k: after[k] for k in ("contract_version", "accepting", "audience", "adoptions")} == {
        k: before[k] for k in ("contract_version", "accepting", "audience", "adoptions")
    }  # R7.5-3
    for x in (a, b, c):
        await x.close()


@pytest.mark.rules("R2-2", "R2-4", "R7.5-6", "R10.2-7")
async def test_R2_4_moving_work_out_of_a_thread_is_a_new_task_and_the_assignment_stays_in_its_thread(daemon):
    (a, ida), (b, idb), (c, idc), t = await _thread_of_three(daemon.url)
    outsider, _ = await agent_client(daemon.url, "outsider")
    p = await a.act("thread.post", {"thread": t, "content": {"x": 1},
                                    "assign": {"to": idb, "content": {"criteria": "do it"}}})
    asg = p["assignment"]
    before = await a.read("assignment.get", {"assignment": asg})
    tk = (await a.act("task.create", {"audience": "open", "contract": {"content": {"output": before["content"], "criteria": "same"}}}))["task"]
    assert tk.startswith("tk_") and tk != asg  # a new object with its own kind (R2-2, R2-4)
    after = await a.read("assignment.get", {"assignment": asg})
    assert after == before  # the assignment is unchanged
    r = await outsider.request("assignment.get", {"assignment": asg})
    assert r["error"]["code"] == "not_found"  # R7.5-6, R10.2-7: nothing became visible outside the thread
    assert (await outsider.read("task.get", {"task": tk}))["task"] == tk
    for x in (a, b, c, outsider):
        await x.close()


@pytest.mark.rules("R1-6")
async def test_R1_6_actions_the_spec_does_not_define_are_rejected(daemon):
    a, _ = await agent_client(daemon.url, "a")
    for op in ("thread.reopen", "entry.edit", "thread.edit_entry", "task.set_audience", "engagement.cancel",
               "task.cancel", "memory.delete", "obligation.create", "turn.write"):
        assert op not in OPS
        r = await a.request(op, {}, key="k-" + op)
        assert r["ok"] is False and r["error"]["code"] == "bad_request", op
    await a.close()


@pytest.mark.rules("L1-3", "L1-2", "R5-7")
@pytest.mark.lmdb_only("reads the LMDB files of the data directory directly")
async def test_L1_3_a_correction_is_a_new_fact_and_the_original_stays(make_daemon):
    daemon = make_daemon()  # a daemon of its own: it is stopped and its store read
    a, _ = await agent_client(daemon.url, "a")
    m = (await a.act("memory.create", {"content": {"text": "teh plan"}}))["memory"]
    await a.act("memory.update", {"memory": m, "content": {"text": "the plan"}})
    v1 = await a.read("memory.get", {"memory": m, "version": 1})
    v2 = await a.read("memory.get", {"memory": m, "version": 2})
    assert v1["content"] == {"text": "teh plan"} and v2["content"] == {"text": "the plan"}
    await a.close()
    daemon.terminate()
    store = Store(str(daemon.data_dir), lock=False, readonly=True)
    try:
        with store.env.begin() as txn:
            kinds = [type(decode_fact(v)).__name__ for _, v in txn.cursor(db=store.dbs["log"])]
    finally:
        store.close()
    assert kinds.count("MemoryCreated") == 1 and kinds.count("MemoryUpdated") == 1


@pytest.mark.rules("R8-14", "R8-15", "R8-2", "R10.2-2", "R1-5", "R7.6-4", "L2-4")
async def test_R8_14_next_steps_and_the_obligation_catalogue_are_closed(daemon):
    (a, ida), (b, idb), (c, idc), t = await _thread_of_three(daemon.url)
    await a.act("thread.post", {"thread": t, "content": {"q": 1}, "ask": [idb]})
    p = await a.act("thread.post", {"thread": t, "content": {"q": 2}, "assign": {"to": idb, "content": {"criteria": "c"}}})
    await b.act("assignment.take", {"assignment": p["assignment"]})
    p2 = await b.act("thread.post", {"thread": t, "content": {"q": 3}, "assign": {"to": idb, "content": {"criteria": "c"}}})
    await b.act("assignment.take", {"assignment": p2["assignment"], "deliver": {"content": {"r": 1}}})
    tk = (await b.act("task.create", {"audience": "open", "contract": CONTRACT}))["task"]
    e = await c.act("task.take", {"task": tk})
    items = []
    for cl in (a, b, c):
        items += (await cl.read("turn", {}))["items"]
    kinds = {i["obligation"] for i in items}
    assert kinds == {"respond", "deliver", "judge"}  # the catalogue, nothing else (R8-2, R1-5)
    assert {i["next"] for i in items} <= {"respond", "deliver", "judge", "revise", "retry", "wait", "done", "stop"}
    for i in items:
        assert i["next"] == i["obligation"]  # R8-15: each carries its next step
    # R10.2-2: each has an exit its holder takes alone.
    assert (await b.act("thread.handle", {"thread": t, "entry": 1}))["ended"]
    assert (await b.act("assignment.drop", {"assignment": p["assignment"]}))["state"] == "dropped"
    assert (await b.act("assignment.judge", {"assignment": p2["assignment"], "verdict": "adopt"}))["state"] == "adopted"
    assert (await c.act("task.drop", {"engagement": e["engagement"]}))["state"] == "dropped"
    for cl in (a, b, c):
        assert (await cl.read("turn", {}))["items"] == []
    # Every rejection's next step is one of the closed set's retry/wait/revise/stop (B7).
    for r in (
        await c.request("thread.handle", {"thread": t, "entry": 1}, key="x1"),
        await c.request("memory.get", {"memory": "me_0000000000000000000000000z"}),
        await c.request("thread.post", {"thread": t}, key="x2"),
    ):
        assert r["error"]["next"] in {"retry", "wait", "revise", "stop"}
    for x in (a, b, c):
        await x.close()


@pytest.mark.rules("R8-16", "R10.2-9")
async def test_R8_16_a_hint_is_only_a_suggestion_and_the_rejected_action_changed_nothing(daemon):
    a, ida = await agent_client(daemon.url, "a")
    t = (await a.act("thread.create", {}))["thread"]
    r = await a.request("thread.leave", {"thread": t}, key="leave-1")
    assert r["error"]["code"] == "conflict" and r["error"]["hint"]["op"] == "thread.close"
    assert r["error"]["hint"]["op"] in OPS and r["error"]["hint"]["args"] == {"thread": t}
    got = await a.read("thread.get", {"thread": t})
    assert got["status"] == "open" and got["role"] == "governor"  # nothing happened on its own
    # Following the hint is an ordinary action of its own, with its own key.
    assert (await a.act("thread.close", r["error"]["hint"]["args"]))["status"] == "closed"
    await a.close()


@pytest.mark.rules("R9-18", "L3-1")
async def test_R9_18_receipts_belong_to_their_own_agent(daemon):
    a, _ = await agent_client(daemon.url, "a")
    b, _ = await agent_client(daemon.url, "b")
    ra = await a.request("memory.create", {"content": {"secret": "alice's"}}, key="shared-key")
    rb = await b.request("memory.create", {"content": {"secret": "alice's"}}, key="shared-key")
    assert ra["ok"] and rb["ok"] and rb["replayed"] is False
    assert rb["result"]["memory"] != ra["result"]["memory"]  # b never sees a's receipt
    r = await b.request("memory.get", {"memory": ra["result"]["memory"]})
    assert r["error"]["code"] == "not_found"
    await a.close()
    await b.close()


@pytest.mark.rules("R9-5", "R9-6", "R12-10", "R5-15")
async def test_R9_5_reads_never_combine_a_revoked_right_with_newer_content(daemon):
    a, _ = await agent_client(daemon.url, "a")
    b, _ = await agent_client(daemon.url, "b")
    m = (await a.act("memory.create", {"content": {"v": 1}}))["memory"]
    await a.act("memory.publish", {"memory": m})
    stop = asyncio.Event()
    progress = asyncio.Event()
    seen: list[int] = []

    async def reader() -> None:
        while not stop.is_set():
            r = await b.request("memory.get", {"memory": m})
            if r["ok"]:
                assert r["result"]["content"] == {"v": r["result"]["version"]}  # content matches its version
                seen.append(r["result"]["version"])
            else:
                assert r["error"]["code"] == "not_found"
                seen.append(-1)
            progress.set()

    task = asyncio.create_task(reader())
    for v in range(2, 12):
        await a.act("memory.update", {"memory": m, "content": {"v": v}})
    await a.act("memory.unpublish", {"memory": m})
    await a.act("memory.update", {"memory": m, "content": {"v": 12}})  # newer content after the revocation
    after = len(seen)
    while len(seen) < after + 2:  # two whole reads sent after v12 was written (one may have been on its way)
        progress.clear()
        await progress.wait()
    stop.set()
    await task
    assert 12 not in seen  # never the content written after the right was revoked
    r = await b.request("memory.get", {"memory": m})
    assert r["error"]["code"] == "not_found"
    await a.close()
    await b.close()


@pytest.mark.rules("R10.2-1", "R1-3", "R7.6-3", "R8-1", "L1-1")
@pytest.mark.lmdb_only("reads the LMDB files of the data directory directly")
async def test_R10_2_1_every_fact_traces_to_an_action_a_deadline_or_an_account_change(clocked_daemon):
    daemon = clocked_daemon
    (a, ida), (b, idb), (c, idc), t = await _thread_of_three(daemon.url)
    await b.read("subscribe", {})
    p = await a.act("thread.post", {"thread": t, "content": {"x": 1}, "ask": [idb],
                                    "assign": {"to": idb, "content": {"criteria": "c"}, "deliver_within_s": 60}})
    await b.act("assignment.take", {"assignment": p["assignment"]})
    daemon.advance_clock(60.5)  # the delivery deadline passes: a deadline fact
    for _ in range(30):  # reads, metrics-like traffic and turn never write facts (R1-3)
        await b.read("turn", {})
        await b.read("thread.get", {"thread": t})

    async def timed_out() -> None:  # the deadline fact is committed once its event is out
        async for ev in b.events():
            if ev["event"] == "outcome" and ev["data"]["state"] == "timed_out":
                return

    await asyncio.wait_for(timed_out(), 10)
    for x in (a, b, c):
        await x.close()
    daemon.terminate()
    store = Store(str(daemon.data_dir), lock=False, readonly=True)
    try:
        with store.env.begin() as txn:
            facts = [decode_fact(v) for _, v in txn.cursor(db=store.dbs["log"])]
            obligations = txn.stat(store.dbs["obligations"])["entries"]
    finally:
        store.close()
    kinds = [type(f).__name__ for f in facts]
    assert "AssignmentExpired" in kinds
    for f in facts:
        if f.by is None:  # no acting agent: only registration, account changes by the daemon, or a deadline
            assert type(f).__name__ in {"AgentRegistered", "AssignmentExpired", "EngagementExpired"}, f
        else:
            assert f.by.startswith("ag_")
    # R8-1: obligations are derived from facts: a fresh fold reproduces the index exactly.
    from kungfud.store.check import compare, expected_indexes

    store = Store(str(daemon.data_dir), lock=False, readonly=True)
    try:
        with store.read() as view:
            assert compare(store, expected_indexes(store, view.kv), view.kv) == []
    finally:
        store.close()
    # Taking ended b's response to the carrying entry (R6.4-20) and the deadline
    # ended the delivery: nothing is owed.
    assert obligations == 0


@pytest.mark.rules("R0-3", "R8-12", "R8-13", "R8-11")
async def test_R0_3_working_sets_are_bounded_however_long_the_history(daemon):
    (a, ida), (b, idb), (c, idc), t = await _thread_of_three(daemon.url)
    for start in range(0, 300, 50):
        await asyncio.gather(*(a.act("thread.post", {"thread": t, "content": {"n": i, "pad": "x" * 200}})
                               for i in range(start, start + 50)))
    ws = await b.read("thread.get", {"thread": t})
    assert ws["entries"] == 300 and len(ws["recent"]) == 10  # a digest, not the history
    assert all("content" not in e for e in ws["recent"])  # digests first (R8-12)
    page = await b.read("thread.entries", {"thread": t, "limit": 100, "full": True})
    assert len(page["items"]) == 100 and page["cursor"] is not None  # bounded pages, content on demand
    for x in (a, b, c):
        await x.close()
