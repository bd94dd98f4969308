"""Tables added without a storage-format step (``layout.ADDED_EMPTY``: the
webhook runner's ``hooks`` and ``hook_cursors``, D212): a store an older
kungfud wrote lacks them; ``kungfud check`` reads them as empty, and opening
the store for writing creates them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import lmdb

from kungfud.store.layout import ADDED_EMPTY
from kungfud.store import Store
from tests.pg import pg_server  # noqa: F401 — the session fixture

ROOT = Path(__file__).resolve().parents[2]


def _check(data: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kungfud", "check", "--data-dir", str(data)],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_a_store_without_the_added_tables_checks_ok_and_gets_them_when_opened(tmp_path):
    data = tmp_path / "data"
    Store(str(data)).close()
    env = lmdb.open(str(data / "lmdb"), max_dbs=64)  # as an older kungfud left it
    with env.begin(write=True) as txn:
        for name in ADDED_EMPTY:
            txn.drop(env.open_db(name.encode(), txn=txn), delete=True)
    env.close()
    r = _check(data)
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout + r.stderr
    s = Store(str(data))
    with s.read() as view:
        assert list(view.hooked_agents()) == [] and view.hook_cursor("ag_x") is None
    s.close()
    env = lmdb.open(str(data / "lmdb"), max_dbs=64, readonly=True)
    with env.begin() as txn:
        assert all(env.open_db(name.encode(), txn=txn, create=False) is not None for name in ADDED_EMPTY)
    env.close()


def test_a_postgresql_store_without_the_added_tables_gets_them_also_when_opened_to_read(pg_server, tmp_path):
    import psycopg

    from kungfud.store.postgres import PgStore

    url = pg_server.new_database()
    PgStore(url, str(tmp_path / "node")).close()
    with psycopg.connect(url, autocommit=True) as conn:  # as an older kungfud left it
        for name in ADDED_EMPTY:
            conn.execute(f"DROP TABLE kf_{name}")
    s = PgStore(url, str(tmp_path / "node"), readonly=True)
    with s.read() as view:
        assert list(view.hooked_agents()) == [] and view.hook_cursor("ag_x") is None
    s.close()


def test_a_postgresql_store_fills_an_added_derived_table_on_the_first_open_for_writing(pg_server, tmp_path):
    """D419: a table derived from the log added without a format step
    (``ADDED_DERIVED``) is created with a FILL row in ``kf_meta`` in the same
    transaction, also by a read-only open (kungfud check); the first open for
    writing fills it from the log and drops the row."""
    import psycopg

    from kungfud.store.layout import ADDED_DERIVED, FILL
    from kungfud.store.postgres import PgStore

    url = pg_server.new_database()
    PgStore(url, str(tmp_path / "node")).close()
    with psycopg.connect(url, autocommit=True) as conn:  # as an earlier build left it
        for name in ADDED_DERIVED:
            conn.execute(f"DROP TABLE kf_{name}")

    def fills() -> set[bytes]:
        with psycopg.connect(url, autocommit=True) as conn:
            return {bytes(k) for (k,) in conn.execute("SELECT key FROM kf_meta WHERE key LIKE %s", (FILL + b"%",))}

    PgStore(url, str(tmp_path / "node"), readonly=True).close()
    assert fills() == {FILL + n.encode() for n in ADDED_DERIVED}
    PgStore(url, str(tmp_path / "node")).close()
    assert fills() == set()


def test_a_fill_whose_row_is_gone_writes_nothing(tmp_path):
    """D419: of two PostgreSQL nodes filling together, the second finds the
    FILL row gone in its write transaction and writes nothing (its rows were
    read before the first node's fill, and before any action it took since)."""
    from kungfud.store.check import write
    from kungfud.store.layout import FILL

    s = Store(str(tmp_path / "data"))
    try:
        write(s, {"a2a_changed": {b"ag_x\x00stale": b""}}, done=(FILL + b"a2a_changed",))
        with s.read() as view:
            assert list(view.kv.scan("a2a_changed")) == []
    finally:
        s.close()
