"""Storage format 3 -> 4 (docs/decisions.md D242): the ``usage`` table (each
agent's bytes of facts, what the capacity limits count, R12-11) is filled from
the whole log once, on start, so what an agent wrote before the upgrade counts
against its limit; every other row of format 3 is kept, and every read answers
as before (L1-1).

The fixture ``fixtures/v3_data.tar.gz`` was written by kungfud at cf142b2
(format 3) running ``fixtures/make_v1.py`` (which recorded its reads in
``fixtures/v3_expected.json``)."""

from __future__ import annotations

import asyncio
import json
import time

import lmdb
import psycopg
import pytest

from kungfud.client import Client, new_key
from kungfud.store.layout import DBS, FORMAT, decode_fact, from_u64
from kungfud.store.quota import payer
from tests.conftest import Daemon
from tests.pg import pg_server  # noqa: F401 — the session fixture
from tests.store.test_pg_kv import migrated_copy
from tests.store.fixtures.make_v1 import reads
from tests.store.test_migration import FIXTURES, _check, _format, _json, _same_events, _tables, _unpack


def _rows(data, name: str) -> dict[bytes, bytes]:
    env = lmdb.open(str(data / "lmdb"), readonly=True, max_dbs=64, lock=False)
    try:
        with env.begin() as txn:
            return dict(txn.cursor(db=env.open_db(name.encode(), txn=txn, create=False)))
    finally:
        env.close()


def _by_payer(log: dict[bytes, bytes]) -> dict[str, int]:
    out: dict[str, int] = {}
    for raw in log.values():
        who = payer(decode_fact(raw))
        if who is not None:
            out[who] = out.get(who, 0) + len(raw)
    return out


@pytest.mark.rules("L1-1", "R12-11")
def test_L1_1_a_format_3_directory_fills_its_usage_table_once_and_old_writes_count(tmp_path):
    expected = json.loads((FIXTURES / "v3_expected.json").read_text())
    data = _unpack(tmp_path, "v3")
    assert _format(data) == b"3" and "usage" not in _tables(data)
    log = _rows(data, "log")
    r = _check(data)  # read-only: names the older format, changes nothing
    assert r.returncode == 1 and "older than" in r.stdout, (r.stdout, r.stderr)
    assert _format(data) == b"3"

    d = Daemon(data).start()
    try:
        said = d.stderr_path.read_text()
        assert said.count("migrated") == 1 and f"from storage format 3 to {FORMAT.decode()}: " in said and "filled the usage table from the log" in said
        if time.time() * 1000 < expected["valid_until_ms"]:
            got = asyncio.run(reads(d.url, expected["made"]))
            for name, want in expected["reads"].items():
                for read, value in want.items():
                    if read == "events":  # renumbered by format 4 (D200)
                        _same_events(_json(got[name][read]), value)
                        continue
                    assert _json(got[name][read]) == value, (name, read)
    finally:
        d.stop()
    assert _format(data) == FORMAT
    usage = {k.decode(): from_u64(v) for k, v in _rows(data, "usage").items()}
    assert usage == _by_payer(log) and len(usage) >= 4, usage
    assert _rows(data, "log") == log
    r = _check(data)
    assert r.returncode == 0 and "OK" in r.stdout, (r.stdout, r.stderr)

    # What alice wrote under format 3 counts: a limit below it refuses her at once.
    alice, key = expected["made"]["keys"]["alice"]
    cfg = tmp_path / "tight.toml"
    cfg.write_text(f"[limits]\nmax_bytes_per_agent = {usage[alice]}\n")
    d = Daemon(data, cfg).start()
    try:
        async def act() -> dict:
            async with await Client.connect(d.url, key) as c:
                return await c.request("memory.create", {"content": {"a": 1}}, key=new_key())

        refused = asyncio.run(act())
        assert not refused["ok"] and refused["error"]["code"] == "rate_limited", refused
        assert d.stderr_path.read_text().count("migrated") == 1  # once, at the first start
    finally:
        d.stop()


@pytest.mark.rules("L1-1", "R12-11")
def test_L1_1_a_format_3_postgresql_store_gets_its_usage_table_once(pg_server, tmp_path, caplog):
    """The same step on PostgreSQL: a format-3 store (the fixture copied in,
    without ``kf_usage``, format 3) gets the table created and filled on open."""
    from kungfud.store.check_run import run_check
    from kungfud.store.postgres import PgStore

    data = _unpack(tmp_path, "v3")
    url, rows = migrated_copy(pg_server, data, tmp_path)
    assert rows["usage"]
    with psycopg.connect(url) as conn:
        conn.execute("DROP TABLE kf_usage")
        conn.execute("UPDATE kf_meta SET value = %s WHERE key = %s", (b"3", b"format"))
    assert run_check(str(tmp_path / "ro"), url=url) == 1  # read-only: the older format reported
    caplog.clear()
    with caplog.at_level("WARNING", logger="kungfud.store"):
        s = PgStore(url, str(tmp_path / "b"))
    try:
        said = [r.getMessage() for r in caplog.records if "migrated" in r.getMessage()]
        assert len(said) == 1 and f"from storage format 3 to {FORMAT.decode()}: " in said[0] and "filled the usage table from the log" in said[0], said
        with s.read() as v:
            assert {n: list(v.kv.scan(n)) for n in DBS if n != "meta"} == rows
    finally:
        s.close()
    assert run_check(str(tmp_path / "c"), url=url) == 0
    caplog.clear()
    with caplog.at_level("WARNING", logger="kungfud.store"):
        PgStore(url, str(tmp_path / "d")).close()
    assert not [r for r in caplog.records if "migrated" in r.getMessage()]
