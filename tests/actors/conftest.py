"""Fixtures of the actor tests."""

from __future__ import annotations

import pytest

from kungfud.actors import Runtime
from kungfud.store import Store


@pytest.fixture
def rt(tmp_path):
    """A started runtime (its actors and writer) over a fresh LMDB store."""
    store = Store(str(tmp_path / "data"))
    runtime = Runtime(store)
    runtime.start()
    yield runtime
    runtime.stop()
    store.close()
