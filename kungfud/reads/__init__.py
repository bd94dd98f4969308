"""Reads (WIRE.md 1.1, §8 working sets, §9 visibility): the layer beside
``actors/``, over the named queries of :class:`~kungfud.store.view.View`.

A read is answered from one read view (R9-5, R12-10), with §9 deciding what the
caller sees. Reads do not need an active agent (R4-2) and write nothing. They run
without an actor hop: a read serializes with nothing. No module here opens a
transaction or knows a key layout (docs/storage.md "Reads").

:data:`READS` is the one table of read ops: op -> ``(view, caller, args, now,
seen) -> reply | Rejection``. ``now`` decides which deadlines have passed
(readers never show an obligation whose deadline passed, L4-3); ``seen`` is when
this daemon last saw each agent (in memory, not a fact; only
``admin.agent.list`` shows it).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from ..core.keys import key_list
from ..errors import Rejection
from ..store.view import View
from ..store.search_index import index_of
from . import a2a, agents, assignments, memory, outcomes, search, task, thread, turn, webhook

__all__ = ["READS", "Read"]

Read = Callable[[View, str, Any, int, Mapping[str, int]], "dict | Rejection"]

READS: dict[str, Read] = {
    "agent.whoami": lambda v, c, a, now, seen: agents.whoami(v, c),
    "admin.agent.list": lambda v, c, a, now, seen: agents.agent_list(v, c, a.status, a.cursor, a.limit, seen),
    "memory.get": lambda v, c, a, now, seen: memory.memory_get(v, c, a.memory, a.version),
    "memory.list": lambda v, c, a, now, seen: memory.memory_list(v, c, a.author, a.cursor, a.limit),
    "thread.get": lambda v, c, a, now, seen: thread.thread_get(v, c, a.thread, now),
    "thread.entries": lambda v, c, a, now, seen: thread.thread_entries(
        v, c, a.thread, a.cursor, a.limit, a.full, a.newest_first
    ),
    "thread.entry": lambda v, c, a, now, seen: thread.thread_entry(v, c, a.thread, a.entry),
    "thread.list": lambda v, c, a, now, seen: thread.thread_list(v, c, a.cursor, a.limit),
    "thread.assignments": lambda v, c, a, now, seen: assignments.thread_assignments(
        v, c, a.thread, a.state, a.cursor, a.limit, now
    ),
    "assignment.get": lambda v, c, a, now, seen: thread.assignment_get(v, c, a.assignment, now),
    "task.get": lambda v, c, a, now, seen: task.task_get(v, c, a.task, a.contract_version, now, a.adopted_after),
    "task.list": lambda v, c, a, now, seen: task.task_list(v, c, a.cursor, a.limit, a.mine),
    "engagement.get": lambda v, c, a, now, seen: task.engagement_get(v, c, a.engagement, now, a.inputs_after),
    "turn": lambda v, c, a, now, seen: turn.turn(v, c, a.cursor, a.limit, now),
    "opportunities": lambda v, c, a, now, seen: turn.opportunities(v, c, a.cursor, a.limit),
    "outcomes": lambda v, c, a, now, seen: outcomes.outcomes(v, c, a.cursor, a.limit),
    "webhook.get": lambda v, c, a, now, seen: webhook.webhook_get(v, c),
    "agent.key.list": lambda v, c, a, now, seen: key_list(v.state(c), now, seen),  # WIRE.md 1.3
    "search": lambda v, c, a, now, seen: search.search(index_of(v.recorder), v, c, a, now),
    # A2A (WIRE.md 1.3); the card's URL base is filled in by Runtime.read
    "a2a.card.get": lambda v, c, a, now, seen: a2a.card_get(v, c, a.agent, ""),
    "a2a.task": lambda v, c, a, now, seen: a2a.task_get(v, c, a.task, a.history_length, now, a.to),
    "a2a.tasks": lambda v, c, a, now, seen: a2a.task_list(v, c, a.to, a.context, a.state, a.cursor, a.limit, now),
    "a2a.push.list": lambda v, c, a, now, seen: a2a.push_list(v, c, a.task, a.to, now),
}
