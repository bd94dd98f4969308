"""Capacity limits in the writer (R12-11, L4-5, L4-6; docs/decisions.md D240–D242):
each agent's bytes of facts counted in the ``usage`` table in the same
transaction as the facts, an action over its agent's limit refused
``rate_limited`` with nothing written, the store's reserve refusing ordinary
agents' actions while admin actions and the daemon's own facts still commit.
Over a real daemon, across processes and for deadline facts:
tests/e2e/test_quotas.py."""

from __future__ import annotations

import json

import pytest

from kungfud.store import Committed, Failed, Replayed, Store, Writer
from kungfud.store.check import compare, expected_indexes
from kungfud.store.layout import from_u64
from kungfud.errors import Rejection
from kungfud.store.quota import Quota, Room, payer
from tests.pg import pg_server  # noqa: F401 — the session fixture
from tests.store.helpers import Ids, commit, create_item, dump, register_item, run_batch


def _agent(store: Store, ids: Ids, name: str, *, admin: bool = False) -> str:
    (out,) = commit(store, [register_item(ids, f"reg-{name}", name, admin=admin)])
    assert isinstance(out, Committed), out
    return json.loads(out.result)["agent"]


def _usage(store: Store, agent: str) -> int:
    with store.read() as view:
        raw = view.kv.get("usage", agent.encode())
    return from_u64(raw) if raw else 0


def _logged(store: Store, agent: str) -> int:
    """The bytes of the log's facts that ``agent`` pays for, counted afresh."""
    from kungfud.store.layout import decode_fact

    with store.read() as view:
        return sum(len(v) for _, v in view.kv.scan("log") if payer(decode_fact(v)) == agent)


def _body(kib: int) -> bytes:
    return json.dumps({"t": "x" * (kib * 1024)}).encode()


@pytest.fixture
def store(tmp_path):
    s = Store(str(tmp_path / "data"))
    yield s
    s.close()


@pytest.mark.rules("R12-11", "L4-5", "L4-6")
def test_R12_11_an_agent_over_its_bytes_is_refused_rate_limited_with_nothing_written(store):
    ids = Ids()
    admin = _agent(store, ids, "root", admin=True)
    alice, bob = _agent(store, ids, "alice"), _agent(store, ids, "bob")
    limit = 100 * 1024
    w = Writer(store, quota=Quota(agent_bytes=limit))
    w.start()
    try:
        n = 0
        while True:
            before = dump(store)
            (r,) = run_batch(w, [create_item(store, alice, ids, f"a{n}", _body(10))])
            if not isinstance(r.outcome, Committed):
                break
            n += 1
            assert n < 20, "the limit never refused alice"
        assert n == 9  # 9 × ~10 KiB fit under 100 KiB, the 10th does not
        assert isinstance(r.outcome, Failed)
        rej = r.outcome.rejection
        assert (rej.code, rej.next, rej.rule) == ("rate_limited", "wait", "R12-11")
        assert f"limit of {limit} bytes" in rej.reason and "max_bytes_per_agent" in rej.reason
        assert "operator" in rej.reason
        assert dump(store) == before  # L4-6: nothing of it written
        assert _usage(store, alice) == _logged(store, alice) <= limit
        # Its earlier actions are still answered from their receipts (L3).
        (again,) = run_batch(w, [create_item(store, alice, ids, "a0", _body(10))])
        assert isinstance(again.outcome, Replayed)
        # Others are not held to alice's count; the admin is held to none.
        (b,) = run_batch(w, [create_item(store, bob, ids, "b0", _body(10))])
        assert isinstance(b.outcome, Committed)
        for i in range(12):
            (ad,) = run_batch(w, [create_item(store, admin, ids, f"ad{i}", _body(10))])
            assert isinstance(ad.outcome, Committed), ad.outcome
        assert _usage(store, admin) > limit  # counted all the same
    finally:
        w.stop()
    assert w.quota_refusals == {"agent_bytes": 1, "reserve": 0}
    assert compare(store, expected_indexes(store)) == []


@pytest.mark.rules("R12-11", "L4-5")
def test_R12_11_one_batch_counts_each_action_against_what_the_batch_wrote_before_it(store):
    ids = Ids()
    alice = _agent(store, ids, "alice")
    w = Writer(store, quota=Quota(agent_bytes=50 * 1024))
    reports = run_batch(w, [create_item(store, alice, ids, f"a{i}", _body(10)) for i in range(8)], start=True)
    w.stop()
    done = [isinstance(r.outcome, Committed) for r in reports]
    assert done == [True] * 4 + [False] * 4, done
    assert _usage(store, alice) == _logged(store, alice) <= 50 * 1024
    assert compare(store, expected_indexes(store)) == []


@pytest.mark.rules("R12-11", "L4-5", "L4-6")
def test_R12_11_the_reserve_refuses_ordinary_agents_and_keeps_room_for_admins_and_the_daemon(tmp_path):
    store = Store(str(tmp_path / "data"), map_size_mb=2)
    try:
        ids = Ids()
        admin = _agent(store, ids, "root", admin=True)
        alice = _agent(store, ids, "alice")
        w = Writer(store, quota=Quota(reserve_percent=30))
        w.start()
        try:
            n = 0
            while True:
                before = dump(store)
                (r,) = run_batch(w, [create_item(store, alice, ids, f"a{n}", _body(60))])
                if not isinstance(r.outcome, Committed):
                    break
                n += 1
                assert n < 40
            rej = r.outcome.rejection
            assert (rej.code, rej.rule) == ("unavailable", "R12-11"), rej
            assert "nearly full" in rej.reason and "reserve_percent" in rej.reason and "map_size_mb" in rej.reason
            assert dump(store) == before
            used, size = store.usage()
            assert used < size * 0.9  # refused with room left: the reserve
            # The admin's actions, and the daemon's own facts, still commit.
            for i in range(3):
                (ad,) = run_batch(w, [create_item(store, admin, ids, f"ad{i}", _body(60))])
                assert isinstance(ad.outcome, Committed), ad.outcome
            (boot,) = run_batch(w, [register_item(ids, "another-admin", "root2", admin=True)])
            assert isinstance(boot.outcome, Committed), boot.outcome
            (still,) = run_batch(w, [create_item(store, alice, ids, "late", _body(1))])
            assert isinstance(still.outcome, Failed) and still.outcome.rejection.code == "unavailable"
        finally:
            w.stop()
        assert w.quota_refusals["reserve"] == 2
        assert compare(store, expected_indexes(store)) == []
    finally:
        store.close()


def test_the_limit_is_the_smaller_of_the_bytes_and_the_share_of_the_store():
    q = Quota(agent_bytes=1 << 30, agent_percent=10, reserve_percent=5)
    assert q.agent_limit(10 << 30) == 1 << 30
    assert q.agent_limit(24 << 20) == (24 << 20) // 10
    assert q.agent_limit(None) == 1 << 30  # PostgreSQL: no size of ours
    assert Quota().agent_limit(1 << 30) is None and Quota(agent_percent=10).agent_limit(None) is None
    assert q.reserve(None) == 0 and q.reserve(100) == 5


@pytest.mark.rules("R12-11", "L4-5")
def test_R12_11_on_postgresql_capacity_mb_gives_the_reserve_and_the_share_a_size(pg_server, tmp_path):
    """PostgreSQL has no map: ``[storage] capacity_mb`` is the size (the database's
    own size, pg_database_size, is the fill). A capacity the empty database
    already half fills, with a 50 % reserve: ordinary agents are refused at
    once, the admin and the daemon's own facts still commit."""
    from kungfud.store.postgres import PgStore

    s = PgStore(pg_server.new_database(), str(tmp_path / "n"), capacity_mb=8)
    try:
        used, size = s.fill()
        assert size == 8 * 1024 * 1024 and used > 4 * 1024 * 1024, (used, size)  # the catalogs alone
        assert s.usage() is None  # no LMDB map to report
        ids = Ids()
        admin = _agent(s, ids, "root", admin=True)
        w = Writer(s, quota=Quota(agent_percent=10, reserve_percent=50))
        w.start()
        try:
            (reg,) = run_batch(w, [register_item(ids, "reg-alice", "alice")])
            assert isinstance(reg.outcome, Failed) and reg.outcome.rejection.code == "unavailable"
            assert "nearly full" in reg.outcome.rejection.reason
            (ad,) = run_batch(w, [create_item(s, admin, ids, "ad", _body(1))])
            assert isinstance(ad.outcome, Committed), ad.outcome
            (boot,) = run_batch(w, [register_item(ids, "another-admin", "root2", admin=True)])
            assert isinstance(boot.outcome, Committed), boot.outcome
        finally:
            w.stop()
        assert w.quota_refusals == {"agent_bytes": 0, "reserve": 1}
        assert compare(s, expected_indexes(s)) == []
    finally:
        s.close()


@pytest.mark.rules("L1-1", "R12-11")
def test_L1_1_check_rebuilds_the_usage_table_from_the_log_and_reports_a_wrong_count(store):
    from kungfud.store.check import write
    from kungfud.store.layout import u64

    ids = Ids()
    alice = _agent(store, ids, "alice")
    commit(store, [create_item(store, alice, ids, "a", _body(3))])
    assert compare(store, expected_indexes(store)) == []
    w = store.begin_write()
    w.tx.put("usage", alice.encode(), u64(1))  # a count that is not the log's
    w.commit()
    assert compare(store, expected_indexes(store)) == [f"usage: differs at {alice.encode()!r}"]
    write(store, expected_indexes(store))  # what check --rebuild writes
    assert compare(store, expected_indexes(store)) == [] and _usage(store, alice) == _logged(store, alice)


def _write(w: Writer, items: list) -> list:
    outcomes: list = [None] * len(items)
    for i, item in enumerate(items):
        item.done = lambda outcome, i=i: outcomes.__setitem__(i, outcome)
    w.write_batch(items)
    return outcomes


@pytest.mark.rules("R12-11", "L4-5")
def test_R12_11_usage_stays_exact_when_writers_take_turns_on_one_store(store):
    """Two writers on one store (as two LMDB workers or PostgreSQL nodes are)
    take turns, then one writes several batches in a row: the ``usage`` row is
    the log's count each time (a guard for any carrying of totals between
    batches: a writer may trust what it counted only while no other committed;
    docs/performance-log.md, the ask+assign regression)."""
    ids = Ids()
    alice = _agent(store, ids, "alice")
    a, b = Writer(store), Writer(store)
    for n, w in enumerate([a, b, a, a, b, b, a]):
        (out,) = _write(w, [create_item(store, alice, ids, f"m{n}", _body(1))])
        assert isinstance(out, Committed), out
        assert _usage(store, alice) == _logged(store, alice)
    assert compare(store, expected_indexes(store)) == []


@pytest.mark.rules("R12-11", "L4-5")
def test_R12_11_a_failed_commit_leaves_no_usage_behind_for_the_next_batch(store):
    """A batch whose commit fails wrote nothing: the totals it counted are not
    where the next batch starts."""
    ids = Ids()
    alice = _agent(store, ids, "alice")
    failing = {"on": False}

    def fault(point: str) -> None:
        if failing["on"] and point == "commit":
            raise OSError("injected commit failure")

    w = Writer(store, fault=fault)
    (out,) = _write(w, [create_item(store, alice, ids, "m0", _body(1))])
    assert isinstance(out, Committed), out
    failing["on"] = True
    (out,) = _write(w, [create_item(store, alice, ids, "m1", _body(1))])
    assert isinstance(out, Failed), out
    failing["on"] = False
    (out,) = _write(w, [create_item(store, alice, ids, "m2", _body(1))])
    assert isinstance(out, Committed), out
    assert _usage(store, alice) == _logged(store, alice)
    assert compare(store, expected_indexes(store)) == []


# --- exits and the reserve (issue 35 item 5; D325) -----------------------------------


class _NoRows:
    """A transaction with no usage rows and no agents in it (no admin among the payers)."""

    def get(self, table: str, key: bytes) -> None:
        return None


def _handle(note: bytes | None) -> list:
    from kungfud.core.facts import ResponseHandled

    return [ResponseHandled(at=1, by="ag_h", thread="th_x", entry=1, agent="ag_h", note=note)]


_MAP = 24 * 1024 * 1024
_NOTE = json.dumps({"note": "N" * 1000}).encode()


@pytest.mark.rules("R12-11", "L4-1", "L4-5")
def test_R12_11_an_exit_with_a_note_counts_like_any_write_and_the_exit_without_it_passes():
    """reviews/security.md finding 5: a handle's 1,000-character note was an
    exit, so an agent with stocked-up requests wrote past its limit and into
    the reserve at will. The note is content: over the limit or in the
    reserve it is refused ``next: revise``; the handle without it still ends
    the obligation (L4-1)."""
    q = Quota(agent_bytes=10_000, reserve_percent=5)
    over_limit = Room(q, 0, _MAP)
    over_limit.known["ag_h"] = 10_000
    assert over_limit.spend(_NoRows(), _handle(None), [150]) == {"ag_h": 10_150}
    rej = over_limit.spend(_NoRows(), _handle(_NOTE), [1150])
    assert isinstance(rej, Rejection) and (rej.code, rej.next, rej.rule) == ("rate_limited", "revise", "R12-11")
    assert "without the note" in rej.reason
    in_reserve = Room(Quota(reserve_percent=5), _MAP - q.reserve(_MAP) + 1000, _MAP)  # just inside it
    assert isinstance(in_reserve.spend(_NoRows(), _handle(None), [150]), dict)
    rej = in_reserve.spend(_NoRows(), _handle(_NOTE), [1150])
    assert isinstance(rej, Rejection) and (rej.code, rej.next) == ("unavailable", "revise") and "note" in rej.reason


@pytest.mark.rules("R12-11", "L4-3", "L4-5")
def test_R12_11_exits_stop_at_the_floor_of_the_reserve_where_deadlines_and_admins_still_commit():
    """Obligations can be stocked up while the store has room, so even
    content-free exits could fill the reserve: they may use its first half,
    never the last, which only deadline facts and admins write (D325)."""
    from kungfud.core.facts import AgentRegistered

    q = Quota(reserve_percent=5)
    reserve = q.reserve(_MAP)
    floor = _MAP - reserve // 2
    assert isinstance(Room(q, floor - 200, _MAP).spend(_NoRows(), _handle(None), [150]), dict)
    rej = Room(q, floor - 100, _MAP).spend(_NoRows(), _handle(None), [150])
    assert isinstance(rej, Rejection) and rej.code == "unavailable" and "map_size_mb" in rej.reason
    at_floor = Room(q, floor + 1000, _MAP)
    assert at_floor.spend(_NoRows(), [_deadline()], [150]) == {}
    admin = AgentRegistered(at=1, by="ag_root", agent="ag_root", content=b"{}", key_hash=b"h", admin=True)
    assert at_floor.spend(_NoRows(), [admin], [150]) == {"ag_root": 150}


def _deadline():
    from kungfud.core.facts import AssignmentExpired

    return AssignmentExpired(at=1, by=None, assignment="as_x", thread="th_x", outcome="timed_out")


# --- the log says when the reserve refuses (issue 35 item 8; D326) --------------------


@pytest.mark.rules("R12-11", "L4-6")
def test_R12_11_the_reserve_refusing_is_one_warning_naming_map_size_mb(tmp_path, caplog):
    """reviews/security.md item 8: since the reserve, writes were refused
    before the map was full and the operator's log said nothing. One WARNING
    line when it begins refusing, not one per refused action."""
    store = Store(str(tmp_path / "data"), map_size_mb=2)
    try:
        ids = Ids()
        alice = _agent(store, ids, "alice")
        w = Writer(store, quota=Quota(reserve_percent=30))
        w.start()
        caplog.set_level("WARNING", logger="kungfud.store")
        try:
            refused = 0
            for n in range(40):
                (r,) = run_batch(w, [create_item(store, alice, ids, f"a{n}", _body(60))])
                refused += isinstance(r.outcome, Failed)
                if refused == 5:
                    break
            assert refused == 5
        finally:
            w.stop()
        lines = [r.getMessage() for r in caplog.records if r.name == "kungfud.store"]
        assert len(lines) == 1, lines
        assert "nearly full" in lines[0] and "map_size_mb" in lines[0] and "reserve_percent" in lines[0]
    finally:
        store.close()


def test_the_reserve_log_says_when_it_stops_and_changes_state_at_most_once_per_period(caplog):
    from kungfud.store.failures import ReserveLog

    now = [0.0]
    rl = ReserveLog(every_s=60, clock=lambda: now[0])
    caplog.set_level("WARNING", logger="kungfud.store")
    cap, reserve = 100 * 1024 * 1024, 5 * 1024 * 1024
    rl.batch(cap - reserve + 10, cap, reserve, refused=1)
    rl.batch(cap - reserve + 20, cap, reserve, refused=3)
    assert rl.refusing and len(caplog.records) == 1
    rl.batch(cap - reserve - 10, cap, reserve, refused=0)  # just below: a small write passed, not room again
    assert rl.refusing and len(caplog.records) == 1
    rl.batch(cap // 2, cap, reserve, refused=0)  # enlarged, but within the period
    assert rl.refusing and len(caplog.records) == 1
    now[0] = 61.0
    rl.batch(cap // 2, cap, reserve, refused=0)
    assert not rl.refusing and len(caplog.records) == 2
    assert "room again" in caplog.records[1].getMessage() and "4 refused" in caplog.records[1].getMessage()
    rl.batch(0, None, 0, refused=0)  # a store with no size: nothing to say
    assert len(caplog.records) == 2
