"""Two nodes writing one PostgreSQL store at once, a third reading (issue 16
items 1 and 4, at the store's level; docs/storage.md "PostgreSQL", D111):
seqs are allocated in commit order, so a reader never finds a fact committed
below one it has already read past; a decision on a state another node moved
is refused as Stale and decided again (L5), so no update is lost; the derived
rows equal their rebuild from the log."""

from __future__ import annotations

import threading

import msgspec
import pytest

from kungfud.store import Committed, Stale, Writer
from kungfud.store.check import compare, expected_indexes
from kungfud.store.layout import from_u64
from kungfud.store.postgres import PgStore
from tests.pg import pg_server  # noqa: F401 — the session fixture
from tests.store.helpers import Ids, create_item, register_item, update_item

ROUNDS = 40


def _write(writer: Writer, item) -> object:
    return writer.write_now(item)


@pytest.mark.rules("L5-1", "L1-4")
def test_two_nodes_commit_concurrently_and_a_reader_on_a_third_never_sees_a_seq_filled_in_behind_it(pg_server, tmp_path):
    url = pg_server.new_database()
    nodes = [PgStore(url, str(tmp_path / f"n{i}")) for i in range(3)]
    a, b, reader = nodes
    writers = [Writer(a), Writer(b)]
    for w in writers:
        w.start()
    try:
        ids = [Ids(), Ids()]
        ids[1]._n = iter(range(10**9, 2 * 10**9))  # the two nodes' ids never collide
        agents = []
        for i, w in enumerate(writers):
            out = w.write_now(register_item(ids[i], f"reg{i}", f"node{i}"))
            assert isinstance(out, Committed)
            agents.append(msgspec.json.decode(out.result)["agent"])
        shared = msgspec.json.decode(writers[0].write_now(create_item(a, agents[0], ids[0], "shared", b'{"n":0}')).result)["memory"]

        problems: list[str] = []
        done = threading.Event()
        seen: list[int] = []

        def read() -> None:
            # Poll the log from new snapshots: every snapshot must hold a gap-free
            # prefix 1..last (nothing commits below a seq already visible).
            last = 0
            while not done.is_set() or last < reader.last_seq():
                with reader.read() as view:
                    top = view.last_seq()
                    keys = [from_u64(k) for k, _ in view.kv.scan("log", values=False)]
                if keys != list(range(1, len(keys) + 1)) or (keys and keys[-1] != top):
                    problems.append(f"a snapshot held seqs {keys[:3]}…{keys[-3:]} with last seq {top}")
                    return
                if top < last:
                    problems.append(f"last seq went back from {last} to {top}")
                    return
                seen.extend(range(last + 1, top + 1))
                last = top

        updates = [0, 0]
        stale = [0, 0]

        def write(i: int) -> None:
            store, w, me = nodes[i], writers[i], agents[i]  # ``me`` creates; updates are agent 0's
            for r in range(ROUNDS):
                out = w.write_now(create_item(store, me, ids[i], f"c{i}-{r}", b'{"r":%d}' % r))
                if not isinstance(out, Committed):
                    problems.append(f"node {i} create: {out}")
                # Both nodes update the same memory for its author (any node
                # takes any op for any object): a decision on a state the other
                # node moved is refused as Stale and decided again on fresh state.
                while True:
                    out = w.write_now(update_item(store, agents[0], shared, ids[i], f"u{i}-{r}", b'{"r":%d}' % r))
                    if not isinstance(out, Stale):
                        break
                    stale[i] += 1
                if isinstance(out, Committed):
                    updates[i] += 1
                else:
                    problems.append(f"update: {out}")

        t_read = threading.Thread(target=read)
        t_read.start()
        ts = [threading.Thread(target=write, args=(i,)) for i in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(120)
        done.set()
        t_read.join(60)
        assert problems == []
        top = reader.last_seq()
        assert seen == list(range(1, top + 1))
        with reader.read() as view:
            assert updates == [ROUNDS, ROUNDS]
            assert view.obj(shared)[0] == 1 + 2 * ROUNDS  # no update lost
            assert view.memory_content(shared, 1 + 2 * ROUNDS) is not None
            assert sum(1 for _ in view.memories_of(agents[0], None)) == ROUNDS + 1
            assert sum(1 for _ in view.memories_of(agents[1], None)) == ROUNDS
        assert compare(reader, expected_indexes(reader)) == []
    finally:
        for w in writers:
            w.stop()
        for s in nodes:
            s.close()


@pytest.mark.rules("L1-4", "L2-1")
def test_postgresql_going_down_in_the_middle_of_a_batch_fails_it_unavailable_never_internal(pg_server, tmp_path):
    """A crash of the server while the writer plans a batch: every action of it
    is answered ``unavailable`` (nothing acknowledged, nothing half-written),
    none ``internal``; once the server is back the next batch commits."""
    from kungfud.store import Failed

    store = PgStore(pg_server.new_database(), str(tmp_path / "n"))
    try:
        ids = Ids()
        reg = register_item(ids, "reg")
        box: list = []
        reg.done = box.append
        Writer(store).write_batch([reg])  # on this thread (no writer thread runs)
        agent = msgspec.json.decode(box[0].result)["agent"]
        items = [create_item(store, agent, ids, f"c{i}", b'{"i":%d}' % i) for i in range(6)]
        outcomes: list = [None] * len(items)
        for i, item in enumerate(items):
            item.done = lambda o, i=i: outcomes.__setitem__(i, o)
        seen = []

        def on_item(item, tx):
            seen.append(item)
            if len(seen) == 3:
                pg_server.stop()  # a crash (-m immediate) with two actions of the batch written

        try:
            Writer(store, on_item=on_item).write_batch(items)
        finally:
            if not pg_server.running():
                pg_server.start()
        assert all(isinstance(o, Failed) and o.rejection.code == "unavailable" for o in outcomes), outcomes
        with store.read() as view:
            assert view.last_seq() == 1 and sum(1 for _ in view.memories_of(agent, None)) == 0
        again = [create_item(store, agent, ids, f"d{i}", b'{"i":%d}' % i) for i in range(3)]
        got: list = [None] * 3
        for i, item in enumerate(again):
            item.done = lambda o, i=i: got.__setitem__(i, o)
        Writer(store).write_batch(again)
        assert all(isinstance(o, Committed) for o in got), got
        assert compare(store, expected_indexes(store)) == []
    finally:
        store.close()
