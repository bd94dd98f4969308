"""The store contract (tests/store/contract.py) run unchanged against the
PostgreSQL backend: ``PgStore`` with the one ``Writer`` over it, each test on a
new database of the session's throwaway cluster (tests/pg.py)."""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from kungfud.store import Committer, Recorder, Writer
from kungfud.store.check import compare, expected_indexes
from kungfud.store.interface import Backend
from kungfud.store.layout import DBS
from kungfud.store.postgres import PgStore
from tests.pg import pg_server  # noqa: F401 — the session fixture
from tests.store.contract import StoreContract


class PgBackend:
    def __init__(self, url: str, data_dir: str):
        self.url = url
        self.data_dir = data_dir
        self.store = PgStore(url, data_dir)

    def writer(self, **hooks: Any) -> Writer:
        return Writer(self.store, **hooks)

    def reopen(self) -> None:
        self.store.close()
        self.store = PgStore(self.url, self.data_dir)

    def rows(self) -> dict[str, dict[bytes, bytes]]:
        with self.store.read() as view:
            return {name: dict(view.kv.scan(name)) for name in DBS}

    def check(self) -> list[str]:
        return compare(self.store, expected_indexes(self.store))

    def close(self) -> None:
        self.store.close()


@pytest.fixture
def backend(pg_server, tmp_path) -> Iterator[PgBackend]:
    b = PgBackend(pg_server.new_database(), str(tmp_path / "node"))
    yield b
    b.close()


class TestPgStore(StoreContract):
    pass


def test_the_postgresql_backend_provides_the_store_interface(pg_server, tmp_path):
    b = PgBackend(pg_server.new_database(), str(tmp_path / "node"))
    try:
        assert isinstance(b.store, Recorder)
        assert isinstance(b.store, Backend)
        assert isinstance(b.writer(), Committer)
    finally:
        b.close()
