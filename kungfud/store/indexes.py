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
from ..core.obligations import of_state
from ..core.engagement import EngagementState
from ..core.task import TaskState
from ..core.members import SPEAKING, MemberState
from ..core.thread import ThreadState
from .layout import u32, u64

__all__ = ["fact_rows", "state_rows", "obligation_key", "member_query", "members_listed"]

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
    elif isinstance(state, MemberState):
        if state.current:
            th, ag, role = state.thread.encode(), state.agent.encode(), state.role.encode()
            yield "memberships", ag + b"\x00" + th, role
            yield "members", th + b"\x00j" + u64(state.joined_at) + ag, role
            if state.role == "governor":
                yield "members", th + b"\x00g" + ag, b""
            if state.role in SPEAKING:
                yield "members", th + b"\x00s" + ag, b""
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


# --- the named member queries (core.members.members_query defines them) -----------

_CLASS = {"governors": b"g", "speakers": b"s"}


def member_query(view: Any, name: str, key: str, limit: int | None = None, skip: Any = ()) -> list[str]:
    """``governors``/``speakers`` of a Thread or ``memberships`` of an agent from
    the index rows of ``view``, by id; ids in ``skip`` are left out and do not
    count toward ``limit`` (the caller answers for them, D90)."""
    if name == "memberships":
        db, prefix = "memberships", key.encode() + b"\x00"
    else:
        db, prefix = "members", key.encode() + b"\x00" + _CLASS[name]
    out: list[str] = []
    with view.txn.cursor(db=view.dbs[db]) as cur:
        if not cur.set_range(prefix):
            return out
        for k in cur.iternext(values=False):
            if not k.startswith(prefix):
                break
            ident = bytes(k[len(prefix):]).decode()
            if ident in skip:
                continue
            out.append(ident)
            if limit is not None and len(out) >= limit:
                break
    return out


def members_listed(view: Any, thread: str, limit: int) -> list[str]:
    """The first ``limit`` current members of ``thread`` in the order they
    joined (ties: by agent id)."""
    prefix = thread.encode() + b"\x00j"
    out: list[str] = []
    with view.txn.cursor(db=view.dbs["members"]) as cur:
        if not cur.set_range(prefix):
            return out
        for k in cur.iternext(values=False):
            if not k.startswith(prefix) or len(out) >= limit:
                break
            out.append(bytes(k[len(prefix) + 8:]).decode())
    return out
