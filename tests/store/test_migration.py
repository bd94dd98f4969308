"""D92, D186, D200, D282: a data directory written by an older storage format is
migrated once, on start (format 1: its derived rows rebuilt from the log, L1-1;
format 2: its retired ``stream`` table dropped; formats 2 and 3: its events
renumbered, one seq each; formats 2 to 4: its obligations keyed anew), and
answers every read as before (L1: the log is the truth; facts do not change) —
but for the events' seqs, which are new (WIRE.md 1.2): strictly increasing, and
never below the seq the event had before, so a client that kept an old seq
misses nothing.

The fixtures ``fixtures/vN_data.tar.gz`` were written by kungfud at 90022fd
(format 1), at 57bd251 (format 2), at cf142b2 (format 3) and at b89090d
(format 4) running
``fixtures/make_v1.py``, which also recorded every read it answered
(``fixtures/vN_expected.json``). The daemon under test starts on each as users
start it (a subprocess), and must answer the same, accept new actions, pass
``kungfud check``, record the new format, keep no retired table, and not
migrate a second time.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import lmdb
import pytest

from kungfud.client import Client
from kungfud.store.layout import FORMAT
from tests.conftest import ROOT, Daemon
from tests.store.fixtures.make_v1 import reads

FIXTURES = Path(__file__).parent / "fixtures"


def _format(data: Path) -> bytes:
    env = lmdb.open(str(data / "lmdb"), readonly=True, max_dbs=64, lock=False)
    try:
        with env.begin() as txn:
            return txn.get(b"format", db=env.open_db(b"meta", txn=txn, create=False))
    finally:
        env.close()


def _check(data: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kungfud", "check", "--data-dir", str(data)], cwd=ROOT, capture_output=True, text=True
    )


def _tables(data: Path) -> set[str]:
    env = lmdb.open(str(data / "lmdb"), readonly=True, max_dbs=64, lock=False)
    try:
        with env.begin() as txn:
            return {k.decode() for k, _ in txn.cursor()}  # the main database names the tables
    finally:
        env.close()


def _unpack(tmp_path: Path, name: str = "v1") -> Path:
    with tarfile.open(FIXTURES / f"{name}_data.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    return tmp_path / "data"


def _json(x):
    """A read's reply as JSON (the recorded one too: format 4 was written by
    a 1.2 daemon), less what 1.2 added to the reads an older
    daemon answered: the names beside member ids in ``thread.get`` (WIRE.md
    1.2 "Names beside ids"), so the rest is compared exactly."""
    out = json.loads(json.dumps(x))
    result = out.get("result") if isinstance(out, dict) else None
    if isinstance(result, dict) and isinstance(result.get("members"), list):
        for m in result["members"]:
            if isinstance(m, dict):
                m.pop("content", None)
    return out


def _same_events(got: list, want: list) -> None:
    """The events the older format served, renumbered (D200): the same
    events in the same order, each with its own seq, strictly increasing,
    none below its old seq (WIRE.md 1.2)."""
    assert [{k: v for k, v in e.items() if k != "seq"} for e in got] == [
        {k: v for k, v in e.items() if k != "seq"} for e in want
    ]
    seqs = [e["seq"] for e in got]
    assert seqs == sorted(set(seqs)), seqs
    assert all(new >= old["seq"] for new, old in zip(seqs, want)), (seqs, [e["seq"] for e in want])


@pytest.mark.rules("L1-1", "R8-20")
@pytest.mark.parametrize(
    "name, old, how",
    [
        ("v1", b"1", "rebuilt the derived rows from the log"),
        ("v2", b"2", "renumbered the events, one seq each"),
        ("v3", b"3", "renumbered the events, one seq each"),
        ("v4", b"4", "keyed the obligations in the order they arose"),
    ],
)
def test_L1_1_an_older_format_directory_migrates_once_on_start_and_reads_alike(tmp_path, name, old, how):
    expected = json.loads((FIXTURES / f"{name}_expected.json").read_text())
    # Before format 4 the turn and outcome of one fact shared a seq (an expiry):
    # the fixtures hold such pairs, which the migration must separate.
    assert (old < b"4") == any(
        len({e["seq"] for e in r["events"]}) < len(r["events"]) for r in expected["reads"].values()
    ), name
    data = _unpack(tmp_path, name)
    assert _format(data) == old
    assert ("stream" in _tables(data)) == (old < b"3")  # formats 1 and 2 kept per-object stream rows
    # Read-only, check names the older format and what to do; it changes nothing.
    r = _check(data)
    assert r.returncode == 1 and "older than" in r.stdout and "--rebuild" in r.stdout, (r.stdout, r.stderr)
    assert _format(data) == old

    d = Daemon(data).start()
    try:
        assert _format_after_start(d) == FORMAT
        log = d.stderr_path.read_text()
        assert log.count("migrated") == 1 and f"from storage format {old.decode()} to {FORMAT.decode()}: {how}" in log, log[-2000:]
        if time.time() * 1000 < expected["valid_until_ms"]:
            # Every read the format-1 daemon answered, answered alike.
            got = asyncio.run(reads(d.url, expected["made"]))
            for name, want in expected["reads"].items():
                for read, value in want.items():
                    if read == "events":
                        _same_events(_json(got[name][read]), value)
                        continue
                    assert _json(got[name][read]) == _json(value), (name, read)
        asyncio.run(_new_actions(d.url, expected["made"]))
    finally:
        d.stop()
    r = _check(data)
    assert r.returncode == 0 and "OK" in r.stdout, (r.stdout, r.stderr)
    assert _format(data) == FORMAT
    assert "stream" not in _tables(data)  # D186: the retired table is gone

    before = d.stderr_path.read_text().count("migrated")
    d = Daemon(data).start()  # a second start does not migrate again
    try:
        asyncio.run(_new_actions(d.url, expected["made"]))
    finally:
        d.stop()
    assert d.stderr_path.read_text().count("migrated") == before
    assert _check(data).returncode == 0


def _format_after_start(d: Daemon) -> bytes:
    # The daemon holds the store: read the format through LMDB's shared lock.
    env = lmdb.open(str(d.data_dir / "lmdb"), readonly=True, max_dbs=64)
    try:
        with env.begin() as txn:
            return txn.get(b"format", db=env.open_db(b"meta", txn=txn, create=False))
    finally:
        env.close()


async def _new_actions(url: str, made: dict) -> None:
    """Members, asks and assignments of the migrated Threads act as before."""
    keys = made["keys"]
    a = await Client.connect(url, keys["alice"][1])
    b = await Client.connect(url, keys["bob"][1])
    c = await Client.connect(url, keys["carol"][1])
    t1 = made["threads"][0]
    try:
        p = await a.act("thread.post", {"thread": t1, "content": {"text": "after"}, "ask": [keys["bob"][0]]})
        await b.act("thread.post", {"thread": t1, "content": {"text": "ok"}, "reply_to": p["entry"]})
        asg = (await a.act("thread.post", {"thread": t1, "content": {"text": "do"}, "assign": {
            "to": keys["carol"][0], "content": {"criteria": "x"}}}))["assignment"]
        await c.act("assignment.take", {"assignment": asg, "deliver": {"content": {"patch": "p"}}})
        await a.act("assignment.judge", {"assignment": asg, "verdict": "adopt"})
        g = await a.act("thread.admit", {"thread": t1, "role": "observer"})
        t = (await b.act("thread.create", {}))["thread"]
        g = await b.act("thread.admit", {"thread": t, "role": "speaker"})
        await c.act("thread.join", {"token": g["token"]})
        await c.act("thread.leave", {"thread": t})
        got = await a.read("thread.get", {"thread": t1})
        assert got["member_count"] == 4 and {m["agent"] for m in got["members"]} == {
            keys[n][0] for n in ("alice", "bob", "carol", "dave")
        }, got["members"]
    finally:
        for x in (a, b, c):
            await x.close()


@pytest.mark.rules("L1-1")
def test_L1_1_a_newer_storage_format_is_refused_with_a_clear_message(tmp_path):
    data = _unpack(tmp_path)
    env = lmdb.open(str(data / "lmdb"), max_dbs=64)
    with env.begin(write=True) as txn:
        txn.put(b"format", b"99", db=env.open_db(b"meta", txn=txn))
    env.close()
    r = subprocess.run(
        [sys.executable, "-m", "kungfud", "serve", "--data-dir", str(data), "--listen", "127.0.0.1:0"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )
    assert r.returncode == 2 and f"storage format 99, newer than format {FORMAT.decode()}" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and _format(data) == b"99"


@pytest.mark.rules("L1-1", "R12-9")
def test_L1_1_a_format_3_directory_gets_its_public_memory_rows_once_on_start(tmp_path):
    """D233 (format step 3→4): the fixture written by cf142b2 (format 3), where
    alice has a public Memory, a private one and one published then
    unpublished, is migrated once on start: only the public one gets its row,
    every recorded read is answered alike (each agent's listing of alice's
    Memories included), and it checks OK."""
    expected = json.loads((FIXTURES / "v3m_expected.json").read_text())
    data = _unpack(tmp_path, "v3m")
    assert _format(data) == b"3"
    r = _check(data)
    assert r.returncode == 1 and "older than" in r.stdout, (r.stdout, r.stderr)
    alice = expected["made"]["keys"]["alice"][0]
    d = Daemon(data).start()
    try:
        assert _format_after_start(d) == FORMAT
        log = d.stderr_path.read_text()
        assert log.count("migrated") == 1 and "from storage format 3 to" in log, log[-2000:]
        assert "added the rows of 1 public Memories" in log, log[-2000:]
        got = asyncio.run(reads(d.url, expected["made"]))
        for name, want in expected["reads"].items():
            for read, value in want.items():
                if read == "events":  # renumbered by format 4 (D200)
                    _same_events(_json(got[name][read]), value)
                elif read == "memory.list alice" or time.time() * 1000 < expected["valid_until_ms"]:
                    assert _json(got[name][read]) == _json(value), (name, read)
        m1 = expected["made"]["memories"][0]
        assert [i["memory"] for i in got["bob"]["memory.list alice"]] == [m1]
    finally:
        d.stop()
    env = lmdb.open(str(data / "lmdb"), readonly=True, max_dbs=64, lock=False)
    try:
        with env.begin() as txn:
            rows = [k for k, _ in txn.cursor(db=env.open_db(b"memories", txn=txn, create=False)) if b"\x01" in k]
    finally:
        env.close()
    assert rows == [alice.encode() + b"\x01" + m1.encode()]
    r = _check(data)
    assert r.returncode == 0 and "OK" in r.stdout, (r.stdout, r.stderr)
    before = d.stderr_path.read_text().count("migrated")
    d = Daemon(data).start()  # a second start does not migrate again
    d.stop()
    assert d.stderr_path.read_text().count("migrated") == before


@pytest.mark.rules("L1-1")
def test_L1_1_a_crash_in_the_format_4_migration_leaves_format_3_to_migrate_again(tmp_path, monkeypatch):
    """D203: the events are renumbered in the one transaction that records
    format 4; if it does not commit, the store is format 3 as it was, and the
    next start migrates it."""
    from kungfud.store import Store
    from kungfud.store.lmdb_kv import LmdbWriteTxn

    data = _unpack(tmp_path, "v3")
    with lmdb.open(str(data / "lmdb"), readonly=True, max_dbs=64, lock=False) as env, env.begin() as txn:
        before = list(txn.cursor(db=env.open_db(b"events", txn=txn, create=False)))
    real_commit = LmdbWriteTxn.commit

    def crash(self):
        raise RuntimeError("killed before the commit")

    monkeypatch.setattr(LmdbWriteTxn, "commit", crash)
    with pytest.raises(RuntimeError, match="killed before the commit"):
        Store(str(data))
    monkeypatch.setattr(LmdbWriteTxn, "commit", real_commit)
    assert _format(data) == b"3"
    with lmdb.open(str(data / "lmdb"), readonly=True, max_dbs=64, lock=False) as env, env.begin() as txn:
        assert list(txn.cursor(db=env.open_db(b"events", txn=txn, create=False))) == before
    Store(str(data)).close()
    assert _format(data) == FORMAT
    r = _check(data)
    assert r.returncode == 0 and "OK" in r.stdout, (r.stdout, r.stderr)
