"""``kungfud check`` on a store many times larger than what it holds in memory
(issue 38 §2, D365, D395, D396): a derived row corrupted deep inside is
found, reported once and repaired, and a consistent store is found OK.

The store is a few thousand real actions through the real runtime and writer
(tests/store/test_check.py's seeded driver); the check runs with the objects'
states capped at a few dozen, so that almost every state the fold needs is
read back from its spill, and with small groups of rebuilt rows.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kungfud.store import Store
from kungfud.store.check import expected_indexes
from kungfud.store.check_run import run_check
from kungfud.store.layout import decode_object, encode_object, u64
from kungfud.core.kinds import state_type
from tests.store.test_check import run_random_actions


@pytest.fixture(scope="module")
def large_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("check-large") / "data"
    store = Store(str(d))
    try:
        run_random_actions(store, seed=38_2, waves=400)
    finally:
        store.close()
    return d


@pytest.fixture
def large(large_dir, tmp_path) -> Path:
    dst = tmp_path / "data"
    shutil.copytree(large_dir, dst)
    (dst / "kungfud.lock").unlink(missing_ok=True)
    return dst


@pytest.mark.rules("L1-1", "L1-4")
def test_L1_1_a_derived_row_corrupted_deep_in_a_large_store_is_reported_and_repaired(large, capsys, monkeypatch):
    """One object snapshot in the middle of the objects table carries a
    version one too high (a valid row, a few bytes changed), one ``versions``
    row deep inside says another seq: both are reported, nothing else is,
    whatever the fold had to spill; ``--rebuild`` writes those two rows and
    the check is then OK."""
    from kungfud.store import derived_runs

    store = Store(str(large))
    try:
        expected = expected_indexes(store)
        with store.read() as view:
            facts = view.kv.count("log")
        objects = sorted(expected["objects"])
        versions = sorted(expected["versions"])
        assert facts > 2000 and len(objects) > 500 and len(versions) > 1000, (facts, len(objects), len(versions))
        obj = objects[len(objects) // 2 + 7]
        ver = versions[len(versions) * 2 // 3]
        version, state = decode_object(expected["objects"][obj], state_type(obj.decode()))
        with store.env.begin(write=True) as txn:
            assert txn.put(obj, encode_object(version + 1, state), db=store.dbs["objects"])
            assert txn.put(ver, u64(int.from_bytes(expected["versions"][ver], "big") + 1), db=store.dbs["versions"])
    finally:
        store.close()

    monkeypatch.setattr(derived_runs, "STATES_CAP", 40)  # the fold spills all but the last few dozen states
    capsys.readouterr()
    assert run_check(str(large), group=8192) == 1
    out = capsys.readouterr().out.splitlines()
    assert out == [f"objects: differs at {obj!r}", f"versions: differs at {ver!r}", f"checked {facts} facts: 2 differences"]

    assert run_check(str(large), rebuild=True, group=8192) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"rebuilt derived indexes from {facts} facts (2 differences fixed)"
    assert run_check(str(large)) == 0
    assert capsys.readouterr().out.splitlines() == [f"checked {facts} facts: OK"]
    store = Store(str(large))
    try:
        assert expected_indexes(store) == expected
        with store.read() as view:
            assert view.kv.get("objects", obj) == expected["objects"][obj]
            assert view.kv.get("versions", ver) == expected["versions"][ver]
    finally:
        store.close()


@pytest.mark.rules("L1-1")
def test_L1_1_a_table_whose_sum_agrees_is_not_walked_and_one_that_disagrees_is(large, capsys, monkeypatch):
    """D395: the first pass keeps a sum per table; only a table whose stored
    sum differs is rebuilt again and walked row by row (here ``memories``, one
    row removed), and every other table is left after its sum."""
    from kungfud.store import check as check_module
    from kungfud.store.derived_runs import Runs, Sums, summed

    store = Store(str(large))
    try:
        expected = expected_indexes(store)
        gone = sorted(expected["memories"])[len(expected["memories"]) // 2]
        sums = Sums()
        for name, rows in expected.items():
            for key, value in rows.items():
                sums.put(name, key, value)
        with store.read() as view:
            for name in expected:  # the stored sum of a consistent table is the rebuilt one
                assert summed(check_module.stored_rows(view.kv, name), every=7) == sums.of(name), name
        with store.env.begin(write=True) as txn:
            assert txn.delete(gone, db=store.dbs["memories"])
    finally:
        store.close()
    walked: set[str] = set()
    put = Runs.put
    monkeypatch.setattr(Runs, "put", lambda self, table, key, value: (walked.add(table), put(self, table, key, value))[1])
    capsys.readouterr()
    assert run_check(str(large)) == 1
    assert capsys.readouterr().out.splitlines()[0] == f"memories: missing {gone!r}"
    assert "memories" in walked and not walked & {"objects", "versions", "agent_keys"}, walked
