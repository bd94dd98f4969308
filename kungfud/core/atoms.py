"""Which state type and ``apply`` belong to each kind of object.

Object ids are wire ids (``ag_``, ``me_``, ``th_``, ``as_``, ``tk_``, ``en_``) plus
sub-objects: ``th_….N`` (entry N of a Thread), ``th_…/ag_…`` (one membership,
D90), ``ag_….threads`` (an agent's membership count) and ``tk_….vN`` (version N of a Task's contract). The store decodes snapshots with :func:`state_type`; ``kungfud
check`` rebuilds every state by folding its facts (L1-1) with :func:`apply_to`.
"""

from __future__ import annotations

from typing import Any, Callable

from . import agent, assignment, engagement, entry, memory, task, thread

__all__ = ["kind", "state_type", "apply_to", "fold"]

_TYPES: dict[str, tuple[type, Callable[[Any, Any], Any]]] = {
    "agent": (agent.AgentState, agent.apply),
    "agent_threads": (thread.AgentThreads, thread.apply_agent_threads),
    "member": (thread.MemberState, thread.apply_member),
    "memory": (memory.MemoryState, memory.apply),
    "thread": (thread.ThreadState, thread.apply),
    "entry": (entry.EntryState, entry.apply),
    "assignment": (assignment.AssignmentState, assignment.apply),
    "task": (task.TaskState, task.apply),
    "contract": (task.ContractState, task.apply_contract),
    "engagement": (engagement.EngagementState, engagement.apply),
}


def kind(obj: str) -> str:
    prefix = obj[:3]
    if prefix == "ag_":
        return "agent_threads" if obj.endswith(".threads") else "agent"
    if prefix == "th_":
        return "member" if "/" in obj else "entry" if "." in obj else "thread"
    if prefix == "me_":
        return "memory"
    if prefix == "as_":
        return "assignment"
    if prefix == "tk_":
        return "contract" if "." in obj else "task"
    if prefix == "en_":
        return "engagement"
    raise KeyError(f"no object kind for id {obj!r}")


def state_type(obj: str) -> type:
    return _TYPES[kind(obj)][0]


def apply_to(obj: str, state: Any, fact: Any) -> Any:
    return _TYPES[kind(obj)][1](state, fact)


def fold(obj: str, facts) -> Any:
    """State = fold(apply, facts) (DESIGN.md "Facts first")."""
    state = None
    for fact in facts:
        state = apply_to(obj, state, fact)
    return state
