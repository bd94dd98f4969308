"""Derived index rows of each fact: the single definition used both when a fact is
written and when ``kungfud check`` rebuilds the indexes from the log."""

from __future__ import annotations

from typing import Any, Iterator

from ..core.facts import AgentRegistered, MemoryCreated, MemoryUpdated, MemoryWithdrawn
from .layout import u32, u64

__all__ = ["index_ops"]


def index_ops(fact: Any, seq: int) -> Iterator[tuple[str, bytes, bytes | None]]:
    """Yield (db, key, value) puts, value None meaning delete."""
    if isinstance(fact, AgentRegistered):
        yield "agent_keys", fact.key_hash, fact.agent.encode()
    elif isinstance(fact, MemoryCreated):
        yield "memories", fact.author.encode() + b"\x00" + fact.memory.encode(), b""
        yield "versions", fact.memory.encode() + b"\x00" + u32(1), u64(seq)
    elif isinstance(fact, MemoryUpdated):
        yield "versions", fact.memory.encode() + b"\x00" + u32(fact.version), u64(seq)
    elif isinstance(fact, MemoryWithdrawn):
        # R5-11: withdrawal stops listing. `by` is the author (only it withdraws).
        assert fact.by is not None
        yield "memories", fact.by.encode() + b"\x00" + fact.memory.encode(), None
