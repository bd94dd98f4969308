"""``kungfud check``: derived rows are a pure function of the fact log (L1-1, L1-4).

A seeded random run of real actions goes through the real actor runtime and
writer into a real LMDB store; then the stored derived rows must equal what
:func:`kungfud.store.check.expected_indexes` rebuilds from the log, corruption
must be reported, and ``write`` / ``kungfud check --rebuild`` must repair it.
"""

from __future__ import annotations

import asyncio
import json
import random
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import psycopg
import pytest

from kungfud import wire
from kungfud.actors import Runtime
from kungfud.client import Client
from kungfud.daemon import bootstrap_admin
from kungfud.store import Committed, Failed, Outcome, Store
from kungfud.store.check import compare, expected_indexes, write
from kungfud.store.layout import DERIVED, decode_fact, from_u64, u32, u64
from tests.pg import pg_server  # noqa: F401 — the session fixture
from tests.store.helpers import dump

ROOT = Path(__file__).resolve().parents[2]
SEED = 7_2026


@dataclass
class Sent:
    op: str
    caller: str | None
    key: str
    args: dict


@dataclass
class Model:
    """What the acknowledged results say the store must hold."""

    agents: dict[str, str] = field(default_factory=dict)  # agent -> status
    memories: dict[str, dict[str, Any]] = field(default_factory=dict)  # memory -> author, latest, status, visibility
    outcomes: dict[str, int] = field(default_factory=dict)  # outcome kind -> count


class Driver:
    """Enters actions through :meth:`Runtime.act`, the one way in the server uses too."""

    def __init__(self, rt: Runtime):
        self.rt = rt

    def submit_all(self, batch: list[Sent]) -> list[Outcome]:
        done = [threading.Event() for _ in batch]
        box: list[Outcome | None] = [None] * len(batch)
        for i, s in enumerate(batch):
            args = msgspec.convert(s.args, wire.OPS[s.op].args)

            def reply(outcome: Outcome, i: int = i) -> None:
                box[i] = outcome
                done[i].set()

            self.rt.act(s.caller, s.op, s.key, args, reply)
        for evt in done:
            assert evt.wait(15), "an action never got its outcome"
        return box  # type: ignore[return-value]


def run_random_actions(store: Store, *, seed: int = SEED, waves: int = 40) -> Model:
    """Register agents, then waves of concurrent random Memory and account
    actions (successes, rejections, replays, key reuse), recording the model."""
    rng = random.Random(seed)
    rt = Runtime(store, idle_stop_s=0.05)  # actors stop between waves and are reactivated
    rt.start()
    model = Model()
    history: list[Sent] = []
    try:
        admin = bootstrap_admin(rt)
        assert admin is not None
        model.agents[admin] = "active"
        drv = Driver(rt)
        regs = [Sent("agent.register", None, f"reg{i}", {"content": {"name": f"agent{i}"}}) for i in range(4)]
        for out in drv.submit_all(regs):
            assert isinstance(out, Committed), out
            model.agents[json.loads(out.result)["agent"]] = "active"
        agents = [a for a in model.agents if a != admin]
        n = 0
        for _ in range(waves):
            batch: list[Sent] = []
            busy: set[str] = set()  # one action per object per wave keeps the model order-free
            for _ in range(rng.randint(4, 16)):
                n += 1
                who = rng.choice(agents)
                mine = [m for m, s in model.memories.items() if s["author"] == who and m not in busy]
                roll = rng.random()
                if roll < 0.35 or not mine:
                    body = {"title": f"t{n}", "body": "x" * rng.randint(0, 3000)}
                    batch.append(Sent("memory.create", who, f"k{n}", {"content": body}))
                    continue
                if roll < 0.85:
                    m = rng.choice(mine)
                    busy.add(m)
                    op = rng.choice(["memory.update", "memory.update", "memory.publish", "memory.unpublish", "memory.withdraw"])
                    args: dict = {"memory": m}
                    if op == "memory.update":
                        args["content"] = {"v": n}
                    batch.append(Sent(op, who, f"k{n}", args))
                elif roll < 0.9 and model.memories:
                    # Someone else's memory: not_found or forbidden, never an effect.
                    m = rng.choice(list(model.memories))
                    if m not in busy and model.memories[m]["author"] != who:
                        busy.add(m)
                        batch.append(Sent("memory.update", who, f"k{n}", {"memory": m, "content": {"v": n}}))
                elif roll < 0.95 and history:
                    old = rng.choice(history)  # same key, same request: replay (L3-2)
                    batch.append(old)
                elif keyed := [h for h in history if "content" in h.args and h.caller is not None]:
                    old = rng.choice(keyed)  # same key, other request: mismatch (L3-3)
                    batch.append(Sent(old.op, old.caller, old.key, {**old.args, "content": {"other": n}}))
            off = [a for a in agents if model.agents[a] == "deactivated"]
            if rng.random() < (0.5 if off else 0.15):
                # Deactivate one, or reactivate one: its queued actions meet the change.
                target = rng.choice(off or agents)
                status = "active" if off else "deactivated"
                n += 1
                batch.append(Sent("admin.agent.set_status", admin, f"k{n}", {"agent": target, "status": status}))
            for s, out in zip(batch, drv.submit_all(batch)):
                kind = type(out).__name__
                if isinstance(out, Failed):
                    kind = f"Failed:{out.rejection.code}"
                    assert out.rejection.code not in ("unavailable", "internal"), (s, out)
                model.outcomes[kind] = model.outcomes.get(kind, 0) + 1
                if isinstance(out, Committed):
                    history.append(s)
                    _record(model, s, json.loads(out.result))
    finally:
        rt.stop()
    return model


def _record(model: Model, s: Sent, result: dict) -> None:
    if s.op == "memory.create":
        model.memories[result["memory"]] = {"author": s.caller, "latest": 1, "status": "valid", "visibility": "private"}
    elif s.op == "memory.update":
        model.memories[result["memory"]]["latest"] = result["version"]
    elif s.op in ("memory.publish", "memory.unpublish"):
        model.memories[result["memory"]]["visibility"] = result["visibility"]
    elif s.op == "memory.withdraw":
        model.memories[result["memory"]]["status"] = "withdrawn"
    elif s.op == "admin.agent.set_status":
        model.agents[result["agent"]] = result["status"]


def _derived(store: Store) -> dict[str, dict[bytes, bytes]]:
    with store.env.begin() as txn:
        out = {name: dict(txn.cursor(db=store.dbs[name])) for name in DERIVED}
        meta = txn.get(b"events", db=store.dbs["meta"])  # the last event seq: the one derived meta row
        out["meta"] = {} if meta is None else {b"events": meta}
        return out


@pytest.fixture(scope="module")
def populated_dir(tmp_path_factory) -> tuple[Path, Model]:
    """A data directory after the seeded random run (built once, copied per test)."""
    d = tmp_path_factory.mktemp("check") / "data"
    store = Store(str(d))
    try:
        model = run_random_actions(store)
    finally:
        store.close()
    return d, model


@pytest.fixture
def populated(populated_dir, tmp_path) -> tuple[Path, Model]:
    src, model = populated_dir
    dst = tmp_path / "data"
    shutil.copytree(src, dst)
    (dst / "kungfud.lock").unlink(missing_ok=True)
    return dst, model


@pytest.mark.rules("L1-1", "L1-4", "L3-2", "L3-3", "L5-1")
def test_L1_1_derived_rows_equal_the_rebuild_from_the_log_after_random_actions(populated):
    data, model = populated
    # The run exercised what it claims: effects, rejections, replays, mismatches.
    assert model.outcomes.get("Committed", 0) >= 100, model.outcomes
    for kind in ("Replayed", "Failed:idempotency_mismatch", "Failed:conflict", "Failed:forbidden"):
        assert model.outcomes.get(kind, 0) > 0, (kind, model.outcomes)
    store = Store(str(data))
    try:
        expected = expected_indexes(store)
        assert _derived(store) == expected
        assert compare(store, expected) == []
        # And what the rows say agrees with what the acknowledged results said.
        listed = {k.split(b"\x00")[1].decode() for k in expected["memories"] if b"\x00" in k}
        assert listed == {m for m, s in model.memories.items() if s["status"] == "valid"}
        # D233: each author's public ones, listed apart (what others may list).
        public = {k.split(b"\x01")[1].decode() for k in expected["memories"] if b"\x01" in k}
        assert public == {m for m, s in model.memories.items() if s["status"] == "valid" and s["visibility"] == "public"}
        assert public, "the run published some Memories"
        with store.read() as view:
            for m, s in model.memories.items():
                st = view.state(m)
                got = {"author": st.author, "latest": st.latest, "status": st.status, "visibility": st.visibility}
                assert got == s, m
                assert view.memory_content(m, s["latest"]) is not None
                assert view.memory_content(m, s["latest"] + 1) is None
            for a, status in model.agents.items():
                assert view.state(a).status == status
    finally:
        store.close()


@pytest.mark.rules("L1-1", "L1-4")
def test_L1_1_compare_reports_corrupted_derived_rows_and_write_repairs_them(populated):
    data, model = populated
    store = Store(str(data))
    try:
        expected = expected_indexes(store)
        memory = sorted(m for m, s in model.memories.items() if s["latest"] >= 2)[0]
        versions_key = memory.encode() + b"\x00" + u32(2)
        key_hash = next(iter(expected["agent_keys"]))
        junk = b"ag_junk\x00me_junk"
        truth = {n: rows for n, rows in dump(store).items() if n not in DERIVED}
        with store.env.begin(write=True) as txn:
            assert txn.delete(memory.encode(), db=store.dbs["objects"])
            assert txn.put(junk, b"", db=store.dbs["memories"])
            assert txn.put(versions_key, u64(999_999), db=store.dbs["versions"])
            assert txn.delete(key_hash, db=store.dbs["agent_keys"])
        problems = compare(store, expected)
        assert sorted(problems) == sorted(
            [
                f"objects: missing {memory.encode()!r}",
                f"memories: unexpected {junk!r}",
                f"versions: differs at {versions_key!r}",
                f"agent_keys: missing {key_hash!r}",
            ]
        )
        # expected_indexes reads only the log: the corruption does not leak into it.
        assert expected_indexes(store) == expected

        write(store, expected)
        assert compare(store, expected) == []
        assert _derived(store) == expected
        assert {n: rows for n, rows in dump(store).items() if n not in DERIVED} == truth, "a rebuild touched the log or receipts"
        with store.read() as view:
            assert view.state(memory).latest == model.memories[memory]["latest"]
            assert view.fact(from_u64(expected["versions"][versions_key])).memory == memory
    finally:
        store.close()


def _check(data: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kungfud", "check", "--data-dir", str(data), *extra],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.rules("L1-1", "L1-4")
def test_L1_1_check_cli_exits_1_on_differences_and_0_after_rebuild(populated):
    data, model = populated
    r = _check(data)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "OK" in r.stdout

    store = Store(str(data))
    try:
        memory = next(iter(model.memories))
        with store.env.begin(write=True) as txn:
            txn.delete(memory.encode(), db=store.dbs["objects"])
            txn.put(b"ag_junk\x00me_junk", b"", db=store.dbs["memories"])
    finally:
        store.close()

    r = _check(data)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"objects: missing {memory.encode()!r}" in r.stdout
    assert "memories: unexpected b'ag_junk\\x00me_junk'" in r.stdout
    assert "2 differences" in r.stdout

    r = _check(data, "--rebuild")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2 differences fixed" in r.stdout

    r = _check(data)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "OK" in r.stdout


@pytest.mark.rules("L1-1")
async def test_L1_1_check_beside_a_live_daemon_reports_no_differences_on_a_consistent_store(make_daemon):
    """docs/storage.md "Checking": without ``--rebuild`` the check reads only,
    "so it can run beside a live daemon". Every committed action keeps the derived
    rows equal to the rebuild from the log, so a check taken while actions commit
    must still find no differences."""
    d = make_daemon("[limits]\nactions_per_minute = 1000000\n")
    clients = []
    for i in range(8):
        async with await Client.connect(d.url) as anon:
            r = await anon.act("agent.register", {"content": {"name": f"busy{i}"}})
        clients.append(await Client.connect(d.url, r["key"]))
    acks = 0
    stop = asyncio.Event()
    enough = asyncio.Event()  # set at 1,500 acks: enough facts that a check takes a few milliseconds

    async def load(c: Client, lane: int) -> None:
        nonlocal acks
        n = 0
        while not stop.is_set():
            n += 1
            await c.act("memory.create", {"content": {"n": n}}, key=f"l{lane}-{n}")
            acks += 1
            if acks >= 1500:
                enough.set()

    tasks = [asyncio.create_task(load(c, i)) for i, c in enumerate(clients)]
    try:
        # Until 1,500 acks — or a lane fails (the gather below raises its error).
        reached = asyncio.ensure_future(enough.wait())
        await asyncio.wait({reached, *tasks}, return_when=asyncio.FIRST_COMPLETED)
        reached.cancel()
        assert enough.is_set(), "a load lane stopped before 1,500 acks"
        results = []
        for _ in range(5):
            seen = acks
            p = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "kungfud", "check", "--data-dir", str(d.data_dir),
                cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            )
            out, err = await p.communicate()
            assert acks > seen, "the load stopped; the check did not run beside live writes"
            results.append((p.returncode, out.decode()[-600:] + err.decode()[-600:]))
    finally:
        stop.set()
        await asyncio.gather(*tasks)
        for c in clients:
            await c.close()
    assert d.terminate() == 0
    assert _check(d.data_dir).returncode == 0, "the store itself is consistent once the daemon stopped"
    assert [rc for rc, _ in results] == [0] * 5, "\n".join(text for _, text in results)


@pytest.mark.rules("L1-1", "R8-20")
def test_L1_1_check_knows_the_event_seqs_and_the_last_event_seq(tmp_path):
    """D200: the event seqs are a function of the log, so check derives them —
    every event row and ``meta/events`` — and reports and repairs a change."""
    from tests.store.test_migration import _unpack

    store = Store(str(_unpack(tmp_path, "v3")))  # migrated to the current format on open
    try:
        expected = expected_indexes(store)
        assert compare(store, expected) == []
        events = expected["events"]
        open_rows = [k for k in events if k.startswith(b"*\x00")]
        assert open_rows, "the fixture's open Task is in the open-Task stream"
        last = from_u64(expected["meta"][b"events"])
        assert last == max(from_u64(k[-8:]) for k in events)
        seqs = [from_u64(k[-8:]) for k in events]
        assert len(seqs) == len(set(seqs)), "no two events share a seq, across agents too"
        victim = sorted(k for k in events if not k.startswith(b"*"))[0]
        with store.env.begin(write=True) as txn:
            assert txn.put(b"events", u64(last + 5), db=store.dbs["meta"])
            assert txn.delete(victim, db=store.dbs["events"])
        assert sorted(compare(store, expected)) == sorted(
            ["meta: differs at b'events'", f"events: missing {victim!r}"]
        )
        write(store, expected)
        assert compare(store, expected) == []
        with store.read() as view:
            assert view.last_event_seq() == last and view.last_seq() < last
    finally:
        store.close()


@pytest.mark.rules("L1-1", "L1-4")
def test_L1_1_a_check_in_small_groups_reports_and_repairs_every_difference_in_every_table(populated, capsys, monkeypatch):
    """D365: the check spills its rebuilt rows to sorted runs and walks each
    table beside the stored one; with a group far smaller than the store (every
    table of more than a few rows spread over many runs, the objects' states
    spilled but for the last few written) and ``--rebuild``
    writing a few stored rows at a time, every corruption in several tables —
    the first, middle and last rows of the biggest, a row past its end, a
    missing and an unexpected row elsewhere, a table emptied, a derived
    ``meta`` row that the log does not make — is still reported, once, and repaired, and nothing else is
    written."""
    from kungfud.store import derived_runs
    from kungfud.store.check import run_check

    data, _ = populated
    store = Store(str(data))
    try:
        expected = expected_indexes(store)
        truth = {n: rows for n, rows in dump(store).items() if n not in DERIVED}
        versions = sorted(expected["versions"])
        assert len(versions) > 100, "the biggest table spans many groups of the size below (~20 rows each)"
        first, middle, last = versions[0], versions[len(versions) // 2], versions[-1]
        past = last + b"\x00"
        obj = sorted(expected["objects"])[1]
        key_hash = sorted(expected["agent_keys"])[0]
        junk = b"ag_junk\x00me_junk"
        with store.env.begin(write=True) as txn:
            for k in (first, middle):
                assert txn.delete(k, db=store.dbs["versions"])
            assert txn.put(last, u64(999_999), db=store.dbs["versions"])
            assert txn.put(past, u64(1), db=store.dbs["versions"])
            assert txn.delete(obj, db=store.dbs["objects"])
            assert txn.delete(key_hash, db=store.dbs["agent_keys"])
            assert txn.put(junk, b"", db=store.dbs["memories"])
            assert txn.put(b"events", u64(1), db=store.dbs["meta"])
            txn.drop(store.dbs["usage"], delete=False)  # a table emptied: every row missing
    finally:
        store.close()
    assert len(expected["usage"]) > 1
    want = sorted([
        f"versions: missing {first!r}", f"versions: missing {middle!r}", f"versions: differs at {last!r}",
        f"versions: unexpected {past!r}", f"objects: missing {obj!r}", f"agent_keys: missing {key_hash!r}",
        f"memories: unexpected {junk!r}", "meta: unexpected b'events'",
        *(f"usage: missing {k!r}" for k in expected["usage"]),
    ])
    group = 4096  # bytes: a few dozen rows a run
    monkeypatch.setattr(derived_runs, "STATES_CAP", 6)  # and the fold spills all but a few objects' states
    capsys.readouterr()
    assert run_check(str(data), group=group) == 1
    out = capsys.readouterr().out.splitlines()
    assert sorted(out[:-1]) == want
    assert out[-1] == f"checked {len(truth['log'])} facts: {len(want)} differences"

    monkeypatch.setattr(derived_runs, "RANGE", 7)  # --rebuild reads 7 stored rows at a time
    assert run_check(str(data), rebuild=True, group=group) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"rebuilt derived indexes from {len(truth['log'])} facts ({len(want)} differences fixed)"
    )
    store = Store(str(data))
    try:
        assert _derived(store) == expected
        assert {n: rows for n, rows in dump(store).items() if n not in DERIVED} == truth, "a rebuild touched the log or receipts"
    finally:
        store.close()
    assert run_check(str(data), group=group) == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith("OK")


@pytest.mark.rules("L1-1")
def test_L1_1_runs_merge_a_key_rebuilt_in_several_groups_to_its_last_row(tmp_path):
    """D365: a key the fold writes again after its first row was spilled reads
    back once, with the last row — as the dict it replaces would hold it."""
    from kungfud.store.derived_runs import Runs, differences

    with Runs(limit=1, where=str(tmp_path)) as runs:  # every put spills
        for i, (k, v) in enumerate([(b"b", b"1"), (b"a", b"1"), (b"b", b"2"), (b"c", b"1"), (b"a", b"3")]):
            runs.put("t", k, v)
        runs._group.setdefault("t", {})[b"d"] = b"mem"  # one row still in memory, merged last
        assert runs.spilled == 5
        assert list(runs.rows("t")) == [(b"a", b"3"), (b"b", b"2"), (b"c", b"1"), (b"d", b"mem")]
        assert list(runs.rows("other")) == []
        stored = iter([(b"a", b"3"), (b"b", b"x"), (b"bb", b""), (b"d", b"mem")])
        assert list(differences(runs.rows("t"), stored)) == [
            ("differs", b"b", b"2"), ("unexpected", b"bb", None), ("missing", b"c", b"1"),
        ]
    assert list(tmp_path.iterdir()) == [], "the runs are removed at the end"


@pytest.mark.rules("L1-1")
def test_L1_1_letting_go_of_the_mapped_pages_changes_nothing_read(populated):
    """D367: the check drops the LMDB map's resident pages as it scans; what a
    read returns after, in the same read transaction and in a new one, is
    what it returned before."""
    data, _ = populated
    store = Store(str(data))
    try:
        with store.read() as view:
            before = {t: list(view.kv.scan(t)) for t in ("log", "objects", "versions")}
            store.release_pages()
            assert {t: list(view.kv.scan(t)) for t in before} == before
        store.release_pages()
        with store.read() as view:
            assert {t: list(view.kv.scan(t)) for t in before} == before
        assert compare(store, expected_indexes(store)) == []
        # The check's reads go through Releasing: every few rows, the pages go.
        from kungfud.store.derived_runs import Releasing

        released = []
        with store.read() as view:
            kv = Releasing(view.kv, lambda: (released.append(1), store.release_pages()), every=5)
            assert {t: list(kv.scan(t)) for t in before} == before
            assert [kv.get("log", k) for k, _ in before["log"][:5]] == [v for _, v in before["log"][:5]]
            assert kv.count("log") == len(before["log"])
        assert len(released) == (sum(map(len, before.values())) + 5) // 5
    finally:
        store.close()


@pytest.mark.rules("L1-1")
def test_L1_1_progress_shows_on_a_terminal_past_its_delay_and_never_elsewhere(monkeypatch):
    """Issue 38 §2: a long check says how far it is on a terminal (stderr),
    rewriting one line, and cleans it up; on a pipe or file it says nothing."""
    import io

    from kungfud.store import derived_runs
    from kungfud.store.derived_runs import Progress

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    clock = [100.0]
    monkeypatch.setattr(derived_runs.time, "monotonic", lambda: clock[0])
    tty, pipe = Tty(), io.StringIO()
    for stream in (tty, pipe):
        clock[0] = 100.0
        p = Progress(after=2.0, every=0.5, stream=stream)
        p.say("rebuilding, fact 1 of 9")  # before the delay: nothing
        clock[0] += 3
        p.say("rebuilding, fact 5 of 9")
        p.say("rebuilding, fact 6 of 9")  # within `every` of the last: nothing
        p.say("comparing objects", force=True)  # a new phase: at once
        p.done()
    assert pipe.getvalue() == ""
    shown = tty.getvalue().split("\r")
    assert [s.replace("\x1b[K", "") for s in shown if s] == [
        "kungfud check: rebuilding, fact 5 of 9 (3 s)", "kungfud check: comparing objects (3 s)", "",
    ]
    assert shown[-1] == "\x1b[K", "the line is cleared at the end"


@pytest.mark.rules("L1-1", "L1-4")
def test_L1_1_on_postgresql_a_check_in_small_groups_reports_and_repairs_every_difference(populated, pg_server, capsys, monkeypatch):
    """D365 on PostgreSQL: the same walk over ``kf_<table>`` rows (bytea keys,
    byte order) finds and repairs every corruption, in groups and ranges far
    smaller than the store."""
    from kungfud.store import derived_runs
    from kungfud.store.check import run_check
    from kungfud.store.open import open_store

    data, _ = populated
    url = pg_server.new_database()
    r = subprocess.run([sys.executable, "-m", "kungfud", "migrate", "--data-dir", str(data), "--to", url],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    store = open_store(url, str(data))
    try:
        expected = expected_indexes(store)
    finally:
        store.close()
    versions = sorted(expected["versions"])
    first, middle, last = versions[0], versions[len(versions) // 2], versions[-1]
    past = last + b"\x00"
    obj = sorted(expected["objects"])[1]
    junk = b"ag_junk\x00me_junk"
    with psycopg.connect(url) as conn:
        conn.execute("DELETE FROM kf_versions WHERE key = ANY(%s)", ([first, middle],))
        conn.execute("UPDATE kf_versions SET value = %s WHERE key = %s", (u64(999_999), last))
        conn.execute("INSERT INTO kf_versions (key, value) VALUES (%s, %s)", (past, u64(1)))
        conn.execute("DELETE FROM kf_objects WHERE key = %s", (obj,))
        conn.execute("INSERT INTO kf_memories (key, value) VALUES (%s, '')", (junk,))
        conn.execute("DELETE FROM kf_usage")  # a table emptied: every row missing
    want = sorted([
        f"versions: missing {first!r}", f"versions: missing {middle!r}", f"versions: differs at {last!r}",
        f"versions: unexpected {past!r}", f"objects: missing {obj!r}", f"memories: unexpected {junk!r}",
        *(f"usage: missing {k!r}" for k in expected["usage"]),
    ])
    monkeypatch.setattr(derived_runs, "STATES_CAP", 6)
    monkeypatch.setattr(derived_runs, "RANGE", 7)
    capsys.readouterr()
    assert run_check(str(data), url=url, group=4096) == 1
    out = capsys.readouterr().out.splitlines()
    assert sorted(out[:-1]) == want
    assert out[-1].endswith(f"{len(want)} differences")
    assert run_check(str(data), url=url, group=4096, rebuild=True) == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith(f"({len(want)} differences fixed)")
    store = open_store(url, str(data))
    try:
        assert expected_indexes(store) == expected
        assert compare(store, expected) == []
    finally:
        store.close()
    assert run_check(str(data), url=url, group=4096) == 0
