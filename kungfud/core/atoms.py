"""Which state type and ``apply`` belong to each kind of object, by id prefix.

The store uses this to decode snapshots; ``kungfud check`` uses it to rebuild
every object's state by folding its facts (L1-1) and compare.
"""

from __future__ import annotations

from typing import Any, Callable

from . import agent, memory

__all__ = ["STATE_TYPES", "APPLY", "state_type", "fold"]

STATE_TYPES: dict[str, type] = {"ag_": agent.AgentState, "me_": memory.MemoryState}
APPLY: dict[str, Callable[[Any, Any], Any]] = {"ag_": agent.apply, "me_": memory.apply}


def state_type(obj: str) -> type:
    return STATE_TYPES[obj[:3]]


def fold(obj: str, facts) -> Any:
    """State = fold(apply, facts) (DESIGN.md "Facts first")."""
    step = APPLY[obj[:3]]
    state = None
    for fact in facts:
        state = step(state, fact)
    return state
