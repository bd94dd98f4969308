"""The store contract (tests/store/contract.py) run against the LMDB backend:
``store.Store`` with ``store.writer.Writer`` over it."""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from kungfud.store import Backend, Committer, Recorder, Store, Writer
from kungfud.store.check import compare, expected_indexes
from tests.store.contract import StoreContract
from tests.store.helpers import dump


class LmdbBackend:
    def __init__(self, data_dir: str):
        self.data_dir = data_dir
        self.store = Store(data_dir)

    def writer(self, **hooks: Any) -> Writer:
        return Writer(self.store, **hooks)

    def reopen(self) -> None:
        self.store.close()
        self.store = Store(self.data_dir)

    def rows(self) -> dict[str, dict[bytes, bytes]]:
        return dump(self.store)

    def check(self) -> list[str]:
        return compare(self.store, expected_indexes(self.store))

    def close(self) -> None:
        self.store.close()


@pytest.fixture
def backend(tmp_path) -> Iterator[LmdbBackend]:
    b = LmdbBackend(str(tmp_path / "data"))
    yield b
    b.close()


class TestLmdbStore(StoreContract):
    pass


def test_the_lmdb_backend_provides_the_store_interface(tmp_path):
    b = LmdbBackend(str(tmp_path / "data"))
    try:
        assert isinstance(b.store, Recorder) and isinstance(b.store, Backend)
        used, size = b.store.usage()
        assert 0 < used <= size
        assert isinstance(b.writer(), Committer)
    finally:
        b.close()
