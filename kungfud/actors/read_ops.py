"""The op catalogue, read half: for each read op, the function that answers it
from one consistent view of the store. Keyed as :data:`kungfud.wire.OPS`
(``tests/test_catalogue.py`` checks every read op but ``hello`` and
``subscribe``, which the server answers itself, has exactly one row).

Reads run on the caller's thread (the event loop) without an actor hop: they
decide nothing and write nothing. The reads layer (``kungfud/reads/``) is
taking these functions over; this table is where it plugs in.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Callable, Mapping

from ..errors import Rejection
from ..store.store import View
from . import outcome_reads, reads, task_reads, thread_reads, turn_reads

__all__ = ["READS", "SERVER_READS", "run_read"]

READS: dict[str, Callable[[View, str, Any, int], "dict | Rejection"]] = {
    "agent.whoami": lambda v, c, a, now: reads.whoami(v, c),
    "memory.get": lambda v, c, a, now: reads.memory_get(v, c, a.memory, a.version),
    "memory.list": lambda v, c, a, now: reads.memory_list(v, c, a.author, a.cursor, a.limit),
    "thread.get": lambda v, c, a, now: thread_reads.thread_get(v, c, a.thread, now),
    "thread.entries": lambda v, c, a, now: thread_reads.thread_entries(
        v, c, a.thread, a.cursor, a.limit, a.full, a.newest_first
    ),
    "thread.entry": lambda v, c, a, now: thread_reads.thread_entry(v, c, a.thread, a.entry),
    "thread.list": lambda v, c, a, now: thread_reads.thread_list(v, c, a.cursor, a.limit),
    "assignment.get": lambda v, c, a, now: thread_reads.assignment_get(v, c, a.assignment, now),
    "task.get": lambda v, c, a, now: task_reads.task_get(v, c, a.task, a.contract_version, now, a.adopted_after),
    "task.list": lambda v, c, a, now: task_reads.task_list(v, c, a.cursor, a.limit, a.mine),
    "engagement.get": lambda v, c, a, now: task_reads.engagement_get(v, c, a.engagement, now, a.inputs_after),
    "turn": lambda v, c, a, now: turn_reads.turn(v, c, a.cursor, a.limit, now),
    "opportunities": lambda v, c, a, now: turn_reads.opportunities(v, c, a.cursor, a.limit),
    "outcomes": lambda v, c, a, now: outcome_reads.outcomes(v, c, a.cursor, a.limit),
}


# Reads that also need what only the running server knows: when it last saw
# each agent (kept in memory, not a fact; docs/decisions.md).
SERVER_READS: dict[str, Callable[[View, str, Any, int, Mapping[str, int]], "dict | Rejection"]] = {
    "admin.agent.list": lambda v, c, a, now, seen: reads.agent_list(v, c, a.status, a.cursor, a.limit, seen),
}


def run_read(
    view: View, op: str, caller: str, args: Any, now: int, seen: Mapping[str, int] = MappingProxyType({})
) -> "dict | Rejection":
    """``now`` decides which deadlines have passed: readers never show an
    obligation whose deadline passed (L4-3). ``seen``: agent -> when this
    daemon last saw it (ms)."""
    server_read = SERVER_READS.get(op)
    if server_read is not None:
        return server_read(view, caller, args, now, seen)
    return READS[op](view, caller, args, now)
