"""Derived rows: the single definition used when facts are written and when
``kungfud check`` rebuilds the indexes from the log.

Two sources:
- :func:`fact_rows` — rows about history, one set per fact (where each Memory
  version's content lives);
- :func:`state_rows` — rows about the present, a function of one object's current
  state. The writer replaces an object's old rows by its new ones in the same
  transaction as the facts (so the obligations index can never disagree with the
  facts that create or end obligations).
"""

from __future__ import annotations

from typing import Any, Iterator

import msgspec

from ..core.agent import AgentState
from ..core.assignment import AssignmentState
from ..core.entry import EntryState
from ..core.facts import MemoryCreated, MemoryUpdated
from ..core.memory import MemoryState
from ..core.kinds import of_state
from ..core.engagement import EngagementState
from ..core.task import TaskState
from ..core.thread import AgentThreads, ThreadState
from .layout import u32, u64

__all__ = ["fact_rows", "state_rows", "obligation_key"]

Row = tuple[str, bytes, bytes]
_mp = msgspec.msgpack.Encoder()


def fact_rows(fact: Any, seq: int) -> Iterator[Row]:
    if isinstance(fact, MemoryCreated):
        yield "versions", fact.memory.encode() + b"\x00" + u32(1), u64(seq)
    elif isinstance(fact, MemoryUpdated):
        yield "versions", fact.memory.encode() + b"\x00" + u32(fact.version), u64(seq)


def obligation_key(holder: str, created_at: int, ob: str) -> bytes:
    # Per holder, ordered by when each arose (R8-7); the id breaks ties stably.
    return holder.encode() + b"\x00" + u64(created_at) + ob.encode()


def state_rows(obj: str, state: Any) -> Iterator[Row]:
    if state is None:
        return
    if isinstance(state, AgentState):
        if state.key_hash:
            yield "agent_keys", state.key_hash, state.agent.encode()
    elif isinstance(state, MemoryState):
        if state.valid:  # R5-11: withdrawal stops listing
            yield "memories", state.author.encode() + b"\x00" + state.memory.encode(), b""
    elif isinstance(state, AgentThreads):
        for thread, role in state.threads.items():
            yield "memberships", state.agent.encode() + b"\x00" + thread.encode(), role.encode()
    elif isinstance(state, ThreadState):
        if state.grant is not None:
            yield "tokens", state.grant.token_hash, state.thread.encode()
    elif isinstance(state, EntryState):
        for ob in of_state(obj, state):
            yield "obligations", obligation_key(ob.holder, ob.created_at, ob.obligation_id), _mp.encode(ob)
    elif isinstance(state, AssignmentState):
        for ob in of_state(obj, state):
            yield "obligations", obligation_key(ob.holder, ob.created_at, ob.obligation_id), _mp.encode(ob)
        if state.state == "open":
            yield "opportunities", state.to.encode() + b"\x00" + state.assignment.encode(), state.thread.encode()
        due = state.deliver_by if state.state == "taken" else state.judge_by if state.state == "delivered" else None
        if due is not None:
            yield "deadlines", u64(due) + state.assignment.encode(), state.thread.encode()
    elif isinstance(state, TaskState):
        tk = state.task.encode()
        yield "tasks", state.author.encode() + b"\x00" + tk, b"author"
        if state.audience is None:
            yield "tasks", b"*\x00" + tk, b"open"
        else:
            for agent in state.audience:
                # B24: a restricted Task naming an agent is its opportunity.
                yield "tasks", agent.encode() + b"\x00" + tk, b"named"
                yield "opportunities", agent.encode() + b"\x00" + tk, tk
    elif isinstance(state, EngagementState):
        for ob in of_state(obj, state):
            yield "obligations", obligation_key(ob.holder, ob.created_at, ob.obligation_id), _mp.encode(ob)
        due = state.deliver_by if state.state == "taken" else state.judge_by if state.state == "delivered" else None
        if due is not None:
            yield "deadlines", u64(due) + state.engagement.encode(), state.task.encode()
        en, tk = state.engagement.encode(), state.task.encode()
        yield "engagements", state.agent.encode() + b"\x00" + tk + b"\x00" + en, b""  # an agent's, per Task
        yield "engagements", tk + b"\x00" + en, b""  # every engagement of a Task
        if state.state == "adopted":
            yield "adopted", state.task.encode() + b"\x00" + state.engagement.encode(), b""
