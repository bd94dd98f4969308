"""§9 Visibility: who may read what. Pure predicates over states.

A caller that may not read an object gets ``not_found`` worded exactly as for an
id that never existed (R9-4, R12-9); these predicates are the single place that
decides it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .memory import MemoryState

__all__ = ["may_read_memory", "may_list_memory"]


def may_read_memory(state: "MemoryState", reader: str, version: int | None) -> bool:
    """R9-8: the author reads every version, withdrawn or private included.
    R9-7, R5-10: anyone reads the current version of a valid public Memory.
    ``version=None`` asks about the Memory as a whole (its current version)."""
    if state.author == reader:
        return version is None or 1 <= version <= state.latest
    return state.valid and state.visibility == "public" and (version is None or version == state.latest)


def may_list_memory(state: "MemoryState", reader: str) -> bool:
    """R5-11: withdrawn Memories are never listed; others see only public ones."""
    return state.valid and (state.author == reader or state.visibility == "public")
