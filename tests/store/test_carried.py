"""What a writer carries from one batch to the next (D281): the objects and
usage totals it committed or read stand in for a read of the store only while
nothing else moved the store's fact seq. Two writers on one store (as two LMDB
workers or two PostgreSQL nodes are) take turns; a version check (L5) must
still be a check against the store, and a batch that did not commit must not
leave what it read or wrote behind."""

from __future__ import annotations

import json

import pytest

from kungfud.store import Committed, Failed, Stale, Store, Writer
from kungfud.store import carried as carried_mod
from kungfud.store.check import compare, expected_indexes
from tests.store.helpers import Ids, commit, create_item, register_item, update_item
from tests.store.test_quota import _write


@pytest.fixture
def store(tmp_path):
    s = Store(str(tmp_path / "data"))
    yield s
    s.close()


def _setup(store: Store) -> tuple[Ids, str, str]:
    ids = Ids()
    (out,) = commit(store, [register_item(ids, "reg", "alice")])
    alice = json.loads(out.result)["agent"]
    (out,) = commit(store, [create_item(store, alice, ids, "m", b'{"v":0}')])
    return ids, alice, json.loads(out.result)["memory"]


@pytest.mark.rules("L5-1", "L5-2")
def test_L5_an_object_another_writer_changed_is_read_again_not_taken_from_what_was_carried(store):
    ids, alice, memory = _setup(store)
    a, b = Writer(store), Writer(store)
    # a commits version 2 and carries it; b then commits version 3.
    (out,) = _write(a, [update_item(store, alice, memory, ids, "u1", b'{"v":1}')])
    assert isinstance(out, Committed), out
    stale_for_a = update_item(store, alice, memory, ids, "u-stale", b'{"v":"old"}')  # decided on version 2
    (out,) = _write(b, [update_item(store, alice, memory, ids, "u2", b'{"v":2}')])
    assert isinstance(out, Committed), out
    # Decided on version 2, which a carried: the store has 3, so it is Stale.
    (out,) = _write(a, [stale_for_a])
    assert isinstance(out, Stale), out
    # Decided on version 3 (b's), which a never saw: it is written.
    (out,) = _write(a, [update_item(store, alice, memory, ids, "u3", b'{"v":3}')])
    assert isinstance(out, Committed), out
    with store.read() as view:
        version, state = view.obj(memory)
    assert version == 4
    assert compare(store, expected_indexes(store)) == []


@pytest.mark.rules("L5-1", "L2-1")
def test_L5_a_batch_that_did_not_commit_leaves_nothing_carried(store):
    ids, alice, memory = _setup(store)
    failing = {"on": False}

    def fault(point: str) -> None:
        if failing["on"] and point == "commit":
            raise OSError("injected commit failure")

    w = Writer(store, fault=fault)
    (out,) = _write(w, [update_item(store, alice, memory, ids, "u1", b'{"v":1}')])
    assert isinstance(out, Committed), out
    failing["on"] = True
    lost = update_item(store, alice, memory, ids, "u2", b'{"v":2}')  # on version 2
    (out,) = _write(w, [lost])
    assert isinstance(out, Failed), out
    failing["on"] = False
    # The failed batch's version 3 is not taken for the store's: an item
    # decided on it is Stale, one decided on the store's version 2 is written.
    assert update_item(store, alice, memory, ids, "u3", b'{"v":3}').expect[memory] == 2
    (out,) = _write(w, [update_item(store, alice, memory, ids, "u3", b'{"v":3}')])
    assert isinstance(out, Committed), out
    assert compare(store, expected_indexes(store)) == []


@pytest.mark.rules("L5-1")
def test_L5_what_is_carried_is_bounded_and_still_checked_past_the_bound(store, monkeypatch):
    monkeypatch.setattr(carried_mod, "LIMIT", 3)
    ids = Ids()
    agents = []
    for n in range(6):
        (out,) = commit(store, [register_item(ids, f"reg{n}", f"a{n}")])
        agents.append(json.loads(out.result)["agent"])
    w = Writer(store)
    for rounds in range(2):
        outs = _write(w, [create_item(store, a, ids, f"c{rounds}-{a}", b'{"n":1}') for a in agents])
        assert all(isinstance(o, Committed) for o in outs), outs
        assert len(w._carried.objects) <= 3 and len(w._carried.totals) <= 6
    assert compare(store, expected_indexes(store)) == []


@pytest.mark.rules("L5-1", "L5-2")
def test_L5_past_the_bound_the_least_recently_carried_are_forgotten_not_all(store, monkeypatch):
    """Issue 38 §4: a writer serving more busy objects than the bound used to
    forget everything at the bound and read each again; now the least recently
    carried go, and what was carried last stays — still checked as the store's."""
    monkeypatch.setattr(carried_mod, "LIMIT", 8)
    ids = Ids()
    agents = []
    for n in range(12):
        (out,) = commit(store, [register_item(ids, f"reg{n}", f"a{n}")])
        agents.append(json.loads(out.result)["agent"])
    w = Writer(store)
    for a in agents:
        (out,) = _write(w, [create_item(store, a, ids, f"c-{a}", b'{"n":1}')])
        assert isinstance(out, Committed), out
        assert 1 <= len(w._carried.objects) <= 8
    carried = w._carried.objects
    assert agents[-1] in carried  # the last written stays
    assert agents[0] not in carried  # the first went
    assert w._carried.size == sum(len(raw) for raw, _, _ in carried.values())
    (out,) = _write(w, [create_item(store, agents[-1], ids, "again", b'{"n":2}')])
    assert isinstance(out, Committed), out
    assert compare(store, expected_indexes(store)) == []


@pytest.mark.rules("L5-1", "L5-2")
def test_L5_an_object_grown_past_what_is_carried_is_forgotten_not_kept_at_its_old_version(store, monkeypatch):
    """An object carried small and then written past MAX_BYTES must not stay
    carried at its older version: the next write to it would be checked
    against that version and be Stale, again and again."""
    ids, alice, memory = _setup(store)
    w = Writer(store)
    (out,) = _write(w, [update_item(store, alice, memory, ids, "u1", b'{"v":1}')])
    assert isinstance(out, Committed), out
    assert memory in w._carried.objects
    # its next stored form (a version and an entry more: no shorter) is past the bound
    monkeypatch.setattr(carried_mod, "MAX_BYTES", len(w._carried.objects[memory][0]) - 1)
    (out,) = _write(w, [update_item(store, alice, memory, ids, "u2", b'{"v":2}')])
    assert isinstance(out, Committed), out
    assert memory not in w._carried.objects
    (out,) = _write(w, [update_item(store, alice, memory, ids, "u3", b'{"v":3}')])
    assert isinstance(out, Committed), out
    assert compare(store, expected_indexes(store)) == []
