"""The PostgreSQL backend's key-value layer and schema (docs/storage.md
"PostgreSQL"): key order is unsigned byte order, scans page lazily and both
ways, the log is never replaced (the first fact stays), savepoints nest, one writer at a time across
stores, the schema is created once and a newer one refused."""

from __future__ import annotations

import contextlib
import tarfile
import threading
import time
from pathlib import Path

import lmdb

import psycopg
import pytest

from kungfud.store.integrity import StoreDamaged
from kungfud.store.check import FORMAT_4_TABLES, FORMAT_5_TABLES
from kungfud.store.layout import DBS, FORMAT
from kungfud.store.postgres import PgStore
from kungfud.store.postgres.schema import SCHEMA_VERSION
from tests.pg import pg_server  # noqa: F401 — the session fixture

# The tables formats 4 and 5 rewrite: four rebuilt from the log, and the Tasks'
# snapshots and their live engagements' rows (D200, D233, D242, D271, D282).
CHANGED = (*FORMAT_4_TABLES, *FORMAT_5_TABLES, "objects", "live")

KEYS = [b"", b"\x00", b"\x00\x00", b"\x01", b"a", b"a\x00", b"a\x00b", b"a\x01", b"ab", b"b", b"\x7f", b"\x80", b"\xff", b"\xff\xff"]


@pytest.fixture
def store(pg_server, tmp_path):
    s = PgStore(pg_server.new_database(), str(tmp_path / "node"))
    yield s
    s.close()


def _write(store: PgStore, fn) -> None:
    w = store.begin_write()
    try:
        fn(w.tx)
    except BaseException:
        w.abort()
        raise
    w.commit()


@contextlib.contextmanager
def _looking(store: PgStore):
    """A write transaction's ``tx`` to look into, aborted on leaving: nothing done in it stays."""
    w = store.begin_write()
    try:
        yield w.tx
    finally:
        w.abort()


def test_keys_are_ordered_as_unsigned_bytes_and_scans_take_a_half_open_range(store):
    def fill(tx):
        for k in reversed(KEYS):
            tx.put("memories", k, b"v" + k)

    _write(store, fill)
    with _looking(store) as tx:
        assert [k for k, _ in tx.scan("memories")] == sorted(KEYS)
        assert [k for k, _ in tx.scan("memories", reverse=True)] == sorted(KEYS, reverse=True)
        assert list(tx.scan("memories", b"a", b"b")) == [(k, b"v" + k) for k in sorted(KEYS) if b"a" <= k < b"b"]
        assert [k for k, _ in tx.scan("memories", b"a", b"b", reverse=True)] == sorted(
            (k for k in KEYS if b"a" <= k < b"b"), reverse=True
        )
        assert all(v == b"" for _, v in tx.scan("memories", values=False))
        assert tx.count("memories") == len(KEYS)
        assert tx.get("memories", b"a\x00") == b"va\x00"
        assert tx.get("memories", b"zz") is None


def test_a_scan_pages_lazily_and_continues_after_the_last_key(store):
    n = 2500  # more than several pages

    def fill(tx):
        for i in range(n):
            tx.put("objects", i.to_bytes(4, "big"), b"x")

    _write(store, fill)
    with _looking(store) as tx:
        got = [int.from_bytes(k, "big") for k, _ in tx.scan("objects")]
        assert got == list(range(n))
        back = [int.from_bytes(k, "big") for k, _ in tx.scan("objects", (100).to_bytes(4, "big"), reverse=True)]
        assert back == list(range(n - 1, 99, -1))
        # A caller that stops early leaves the rest unread (the first page only).
        it = tx.scan("objects")
        assert next(it)[0] == (0).to_bytes(4, "big")
        it.close()


def test_put_replaces_delete_and_clear_remove_and_a_log_row_is_never_replaced(store):
    _write(store, lambda tx: (tx.put("objects", b"k", b"1"), tx.put("objects", b"k", b"2"), tx.put("log", b"1", b"f")))
    w = store.begin_write()
    assert w.tx.get("objects", b"k") == b"2"
    w.tx.put("log", b"1", b"other")  # the first fact stays (the kv contract, as LMDB)
    assert w.tx.get("log", b"1") == b"f"
    w.commit()
    with _looking(store) as tx:
        assert tx.get("log", b"1") == b"f"
    _write(store, lambda tx: tx.delete("objects", b"k"))
    _write(store, lambda tx: tx.clear("log"))
    with _looking(store) as tx:
        assert tx.get("objects", b"k") is None and tx.count("log") == 0


def test_a_nested_transaction_is_a_savepoint(store):
    w = store.begin_write()
    w.tx.put("objects", b"outer", b"1")
    a = w.nested()
    a.tx.put("objects", b"aborted", b"1")
    assert a.tx.get("objects", b"aborted") == b"1"
    a.abort()
    assert w.tx.get("objects", b"aborted") is None  # read again after the savepoint's abort
    b = w.nested()
    b.tx.put("objects", b"kept", b"1")
    b.commit()
    w.commit()
    with _looking(store) as tx:
        assert [k for k, _ in tx.scan("objects")] == [b"kept", b"outer"]


def test_a_failed_write_inside_a_savepoint_is_undone_by_its_abort(store):
    w = store.begin_write()
    w.tx.put("objects", b"before", b"1")
    a = w.nested()
    a.tx.put("objects", b"inside", b"1")
    a.tx.put("objects", b"bad", None)  # type: ignore[arg-type] — a statement that fails when sent
    with pytest.raises(psycopg.errors.NotNullViolation):
        a.commit()
    a.abort()
    w.tx.put("objects", b"after", b"1")
    w.commit()
    with _looking(store) as tx:
        assert [k for k, _ in tx.scan("objects")] == [b"after", b"before"]


def test_writes_are_read_back_inside_their_transaction(store):
    w = store.begin_write()
    try:
        w.tx.put("objects", b"a", b"1")
        assert w.tx.get("objects", b"a") == b"1"
        w.tx.delete("objects", b"a")
        assert list(w.tx.scan("objects")) == []
        w.tx.put("objects", b"b", b"2")
        assert w.tx.count("objects") == 1
        w.tx.clear("objects")
        assert w.tx.get("objects", b"b") is None
    finally:
        w.abort()


def test_an_aborted_write_leaves_nothing(store):
    w = store.begin_write()
    w.tx.put("objects", b"k", b"1")
    w.abort()
    with _looking(store) as tx:
        assert tx.get("objects", b"k") is None


def test_one_writer_at_a_time_across_stores_on_one_database(pg_server, tmp_path):
    url = pg_server.new_database()
    a = PgStore(url, str(tmp_path / "a"))
    b = PgStore(url, str(tmp_path / "b"))
    try:
        wa = a.begin_write()
        wa.tx.put("meta", b"seq", b"1")
        got: list[bytes | None] = []

        def second():
            wb = b.begin_write()  # waits for a's commit: then sees it (READ COMMITTED)
            got.append(wb.tx.get("meta", b"seq"))
            wb.abort()

        t = threading.Thread(target=second)
        t.start()
        time.sleep(0.3)
        assert got == [] and t.is_alive()  # still waiting for the writer lock
        wa.commit()
        t.join(10)
        assert got == [b"1"]
    finally:
        a.close()
        b.close()


def test_nodes_starting_together_create_the_schema_once(pg_server, tmp_path):
    url = pg_server.new_database()
    stores: list[PgStore] = []
    errors: list[BaseException] = []

    def start(i):
        try:
            stores.append(PgStore(url, str(tmp_path / f"n{i}")))
        except BaseException as e:  # noqa: BLE001 — reported below
            errors.append(e)

    threads = [threading.Thread(target=start, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    try:
        assert errors == [] and len(stores) == 4
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT version FROM kf_schema").fetchall() == [(SCHEMA_VERSION,)]
            assert conn.execute("SELECT value FROM kf_meta WHERE key = 'format'::bytea").fetchall() == [(FORMAT,)]
            tables = {r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE tablename LIKE 'kf_%'")}
            assert tables == {f"kf_{n}" for n in DBS} | {"kf_schema"}
    finally:
        for s in stores:
            s.close()


def test_a_newer_schema_or_format_is_refused_with_a_message(pg_server, tmp_path):
    url = pg_server.new_database()
    PgStore(url, str(tmp_path / "a")).close()
    with psycopg.connect(url) as conn:
        conn.execute("UPDATE kf_schema SET version = %s", (SCHEMA_VERSION + 1,))
    with pytest.raises(StoreDamaged, match=f"schema version {SCHEMA_VERSION + 1}, newer"):
        PgStore(url, str(tmp_path / "b"))
    with psycopg.connect(url) as conn:
        conn.execute("UPDATE kf_schema SET version = %s", (SCHEMA_VERSION,))
        conn.execute("UPDATE kf_meta SET value = %s WHERE key = %s", (b"99", b"format"))
    with pytest.raises(StoreDamaged, match="storage format 99, newer"):
        PgStore(url, str(tmp_path / "c"))


def test_an_unreachable_server_is_a_clear_error_at_start(tmp_path):
    with pytest.raises(StoreDamaged, match="cannot connect to PostgreSQL at postgresql://u:\\*\\*\\*@127.0.0.1:1/x"):
        PgStore("postgresql://u:secret@127.0.0.1:1/x", str(tmp_path / "n"))


def test_a_write_transaction_with_a_failed_statement_never_reports_a_commit(store):
    """PostgreSQL answers COMMIT of a failed transaction by rolling back without
    an error; the backend must raise instead, so nothing is acknowledged (L1-4)."""
    w = store.begin_write()
    w.tx.put("objects", b"k", b"1")
    w.tx.put("objects", b"bad", None)  # type: ignore[arg-type] — a statement that fails when sent
    with pytest.raises(psycopg.errors.NotNullViolation):
        w.tx.count("log")
    with pytest.raises(RuntimeError, match="nothing was written"):
        w.commit()
    with _looking(store) as tx:  # the store writes on afterwards
        assert tx.get("objects", b"k") is None



def migrated_copy(pg_server, data: Path, tmp_path: Path) -> tuple[str, dict[str, list]]:
    """A new PostgreSQL database holding the LMDB data directory ``data`` as
    today's code leaves it (opening it migrates it to the current format),
    and every table's rows but ``meta``: the start of each format-step test,
    which then puts back what the older format stored."""
    from kungfud.store import Store
    from kungfud.store.postgres.migrate import copy_store

    url = pg_server.new_database()
    lm = Store(str(data))
    pg = PgStore(url, str(tmp_path / "a"))
    try:
        copy_store(lm, pg)
        with lm.read() as v:
            rows = {n: list(v.kv.scan(n)) for n in DBS if n != "meta"}
    finally:
        lm.close()
        pg.close()
    return url, rows


@pytest.mark.rules("L1-1")
def test_L1_1_a_format_2_store_is_migrated_once_by_dropping_its_stream_table(pg_server, tmp_path, caplog):
    """D186: format 3 keeps every table of format 2 but ``stream`` (per-object
    fact lists no query read). A format-2 store — the fixture written by
    57bd251, copied in, given back the ``kf_stream`` table and rows and the
    format that 57bd251 wrote — is migrated once on open: the table dropped,
    the format recorded, every other row as it was, and it checks OK."""
    from kungfud.store.check_run import run_check
    from tests.store.test_migration import _unpack

    data = _unpack(tmp_path, "v2")
    with tarfile.open(Path(__file__).parent / "fixtures" / "v2_data.tar.gz") as tar:
        tar.extractall(tmp_path / "old", filter="data")
    old = lmdb.open(str(tmp_path / "old" / "data" / "lmdb"), readonly=True, max_dbs=64, lock=False)
    with old.begin() as txn:
        stream = list(txn.cursor(db=old.open_db(b"stream", txn=txn, create=False)))
    old.close()
    assert stream
    url, rows = migrated_copy(pg_server, data, tmp_path)
    with psycopg.connect(url) as conn:
        conn.execute("CREATE TABLE kf_stream (key bytea PRIMARY KEY, value bytea NOT NULL)")
        with conn.cursor().copy("COPY kf_stream (key, value) FROM STDIN") as copy:
            for row in stream:
                copy.write_row(row)
        conn.execute("UPDATE kf_meta SET value = %s WHERE key = %s", (b"2", b"format"))
    caplog.clear()  # the LMDB copy's own migration is not this test's
    with caplog.at_level("WARNING", logger="kungfud.store"):
        s = PgStore(url, str(tmp_path / "b"))
    try:
        said = [r.getMessage() for r in caplog.records if "migrated" in r.getMessage()]
        assert len(said) == 1 and f"from storage format 2 to {FORMAT.decode()}: renumbered the events, one seq each" in said[0]
        # It names the database it migrated, not the node's own directory.
        assert f"migrated the store at {s.where} " in said[0] and str(tmp_path / "b") not in said[0], said[0]
        with s.read() as v:
            assert {n: list(v.kv.scan(n)) for n in DBS if n != "meta"} == rows
    finally:
        s.close()
    with psycopg.connect(url) as conn:
        tables = {r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE tablename LIKE 'kf_%'")}
        assert tables == {f"kf_{n}" for n in DBS} | {"kf_schema"}
        assert conn.execute("SELECT value FROM kf_meta WHERE key = 'format'::bytea").fetchall() == [(FORMAT,)]
    assert run_check(str(tmp_path / "c"), url=url) == 0
    caplog.clear()
    with caplog.at_level("WARNING", logger="kungfud.store"):
        PgStore(url, str(tmp_path / "d")).close()  # once: a second open migrates nothing
    assert not [r for r in caplog.records if "migrated" in r.getMessage()]


@pytest.mark.rules("L1-1", "R12-9")
def test_L1_1_a_format_3_store_gets_its_public_memory_rows_once(pg_server, tmp_path, caplog):
    """D233 (format step 3→4) on PostgreSQL: the v3m fixture (cf142b2, format 3)
    copied in as format 3 wrote it — no public-Memory rows — is migrated once
    on open: the rows added, the format recorded, every row as the LMDB
    migration made it, and it checks OK."""
    from kungfud.store.check_run import run_check
    from tests.store.test_migration import _unpack

    data = _unpack(tmp_path, "v3m")
    url, rows = migrated_copy(pg_server, data, tmp_path)
    public = [k for k, _ in rows["memories"] if b"\x01" in k]
    assert len(public) == 1
    with psycopg.connect(url) as conn:  # back to what format 3 stored
        for key in public:
            conn.execute("DELETE FROM kf_memories WHERE key = %s", (key,))
        assert not [k for (k,) in conn.execute("SELECT key FROM kf_memories").fetchall() if b"\x01" in bytes(k)]
        conn.execute("UPDATE kf_meta SET value = %s WHERE key = %s", (b"3", b"format"))
    caplog.clear()
    with caplog.at_level("WARNING", logger="kungfud.store"):
        s = PgStore(url, str(tmp_path / "b"))
    try:
        said = [r.getMessage() for r in caplog.records if "migrated" in r.getMessage()]
        assert len(said) == 1 and f"from storage format 3 to {FORMAT.decode()}: " in said[0], said
        assert "added the rows of 1 public Memories" in said[0], said
        with s.read() as v:
            assert {n: list(v.kv.scan(n)) for n in DBS if n != "meta"} == rows
    finally:
        s.close()
    assert run_check(str(tmp_path / "c"), url=url) == 0
    caplog.clear()
    with caplog.at_level("WARNING", logger="kungfud.store"):
        PgStore(url, str(tmp_path / "d")).close()  # once: a second open migrates nothing
    assert not [r for r in caplog.records if "migrated" in r.getMessage()]


def _older_format_in_pg(pg_server, tmp_path: Path, name: str, fmt: bytes) -> tuple[str, dict, dict, int]:
    """A new PostgreSQL database holding fixture ``name``'s rows as its older
    format ``fmt`` wrote them (``meta`` too, so the format is ``fmt``); every
    table's rows but ``meta`` of that store as it is, and of the same store
    after the LMDB migration, with that migration's last event seq."""
    from kungfud.store import Store
    from kungfud.store.postgres.migrate import copy_store
    from tests.store.test_migration import _unpack

    url = pg_server.new_database()
    raw = Store(str(_unpack(tmp_path / "old", name)), readonly=True, lock=False)  # read as it is: not migrated
    pg = PgStore(url, str(tmp_path / "a"))
    try:
        assert raw.migrate_from == fmt
        copy_store(raw, pg)
        with raw.read() as v:
            old = {n: list(v.kv.scan(n)) for n in DBS if n != "meta"}
    finally:
        raw.close()
        pg.close()
    lm = Store(str(_unpack(tmp_path / "new", name)))  # the LMDB migration of the same store
    try:
        with lm.read() as v:
            migrated = {n: list(v.kv.scan(n)) for n in DBS if n != "meta"}
            last = v.last_event_seq()
    finally:
        lm.close()
    return url, old, migrated, last


def _opened(url: str, tmp_path: Path, caplog) -> tuple[list[str], dict, int]:
    """Open the PostgreSQL store at ``url`` (which migrates an older format):
    what it logged of a migration, every table's rows but ``meta``, its last
    event seq."""
    caplog.clear()
    with caplog.at_level("WARNING", logger="kungfud.store"):
        s = PgStore(url, str(tmp_path / "b"))
    try:
        said = [r.getMessage() for r in caplog.records if "migrated" in r.getMessage()]
        with s.read() as v:
            return said, {n: list(v.kv.scan(n)) for n in DBS if n != "meta"}, v.last_event_seq()
    finally:
        s.close()


def _checks_ok_and_migrates_once(url: str, tmp_path: Path, caplog) -> None:
    from kungfud.store.check_run import run_check

    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT value FROM kf_meta WHERE key = 'format'::bytea").fetchall() == [(FORMAT,)]
    assert run_check(str(tmp_path / "c"), url=url) == 0
    caplog.clear()
    with caplog.at_level("WARNING", logger="kungfud.store"):
        PgStore(url, str(tmp_path / "d")).close()  # once: a second open migrates nothing
    assert not [r for r in caplog.records if "migrated" in r.getMessage()]


@pytest.mark.rules("L1-1", "R8-20")
def test_L1_1_a_format_3_store_is_migrated_once_by_renumbering_its_events(pg_server, tmp_path, caplog):
    """D200: format 4 gives every event its own seq. A format-3 store — the
    fixture written by cf142b2, its rows copied in as they are, format 3
    included — is migrated once on open: its events renumbered exactly as
    the LMDB migration renumbers them (one seq each, from the log), every
    other row as it was, the format recorded; and it checks OK."""
    url, old, lmdb, lmdb_last = _older_format_in_pg(pg_server, tmp_path, "v3", b"3")
    said, rows, last = _opened(url, tmp_path, caplog)
    assert len(said) == 1 and f"from storage format 3 to {FORMAT.decode()}: renumbered the events" in said[0], said
    assert {n: r for n, r in rows.items() if n not in CHANGED} == {n: r for n, r in old.items() if n not in CHANGED}
    assert {n: rows[n] for n in CHANGED} == {n: lmdb[n] for n in CHANGED}
    assert rows["events"] == lmdb["events"] and last == lmdb_last > 0
    # More rows than before: one per event, not one per (agent, fact).
    assert len(rows["events"]) > len(old["events"])
    _checks_ok_and_migrates_once(url, tmp_path, caplog)


@pytest.mark.rules("L1-1", "R8-7")
def test_L1_1_a_format_4_store_is_migrated_once_by_keying_its_obligations_anew(pg_server, tmp_path, caplog):
    """D282: format 5 keys each holder's obligations by when they arose and,
    within one millisecond, by the order the facts record. A format-4 store —
    the fixture written by b89090d, its rows copied in as they are, format 4
    included — is migrated once on open: its ``obligations`` rows rebuilt
    exactly as the LMDB migration rebuilds them, every other row as it was,
    the format recorded; and it checks OK."""
    url, old, lmdb, _ = _older_format_in_pg(pg_server, tmp_path, "v4", b"4")
    assert old["obligations"] and lmdb["obligations"] and old["obligations"] != lmdb["obligations"]  # keyed anew
    said, rows, _ = _opened(url, tmp_path, caplog)
    assert len(said) == 1 and f"from storage format 4 to {FORMAT.decode()}: keyed the obligations in the order they arose" in said[0], said
    assert {n: r for n, r in rows.items() if n not in FORMAT_5_TABLES} == {n: r for n, r in old.items() if n not in FORMAT_5_TABLES}
    assert rows["obligations"] == lmdb["obligations"]
    _checks_ok_and_migrates_once(url, tmp_path, caplog)
