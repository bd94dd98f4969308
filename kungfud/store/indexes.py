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

from typing import Any, Callable, Iterator

from ..core.agent import AgentState
from ..core.assignment import LIFECYCLE as ASSIGNMENT
from ..core.assignment import AssignmentState
from ..core.entry import EntryState
from ..core.facts import MemoryCreated, MemoryUpdated
from ..core.memory import MemoryState
from ..core.obligations import Obligation
from ..core.kinds import of_state
from ..core.engagement import LIFECYCLE as ENGAGEMENT
from ..core.engagement import EngagementState
from ..core.task import TaskState
from ..core.members import SPEAKING, MemberState
from ..core.thread import ThreadState
from ..core.webhook import WebhookState
from ..core.a2a import A2ATaskState
from ..core.a2a_push import PushState
from ..core.facts import entry_obj, member_obj
from ..core.queries import live_engagement, live_of
from .codec import decode_live, encode_agent_key, encode_live, encode_obligation
from .kv import Snapshot, prefix_stop
from .layout import PUBLIC, from_u64, u32, u64


def from_u32(b: bytes) -> int:
    return int.from_bytes(b, "big")

__all__ = ["fact_rows", "state_rows", "obligation_key", "query_rows", "members_listed"]

Row = tuple[str, bytes, bytes]


def fact_rows(fact: Any, seq: int) -> list[Row]:
    """The history rows of one fact (fact ``seq``); most facts have none."""
    t = type(fact)
    if t is MemoryCreated:
        return [("versions", fact.memory.encode() + b"\x00" + u32(1), u64(seq))]
    if t is MemoryUpdated:
        return [("versions", fact.memory.encode() + b"\x00" + u32(fact.version), u64(seq))]
    return []


def obligation_key(ob: Obligation) -> bytes:
    """Per holder, ordered by when each arose (R8-7): its millisecond, then,
    within one millisecond, the order the facts recorded where they record one
    (D282): a Thread's entries by number, work by its id (time-ordered, and
    increasing within a millisecond). The obligation id keeps keys unique."""
    ref = ob.ref
    entry = ref.get("entry")
    if entry is not None:
        order = ref["thread"].encode() + u64(entry)
    else:
        order = (ref.get("assignment") or ref["engagement"]).encode()
    return ob.holder.encode() + b"\x00" + u64(ob.created_at) + order + ob.obligation_id.encode()


Obligations = Callable[[str, Any], list]  # (object id, state) -> the obligations it implies


def state_rows(obj: str, state: Any, obligations: Obligations = of_state) -> Iterator[Row]:
    """The index rows of one object's current ``state``. ``obligations`` is
    :func:`~kungfud.core.kinds.of_state` or a caller's memo of it (the
    planner derives each state's obligations once for the feed and the rows)."""
    if state is None:
        return iter(())
    rows = _STATE_ROWS.get(type(state))
    return iter(()) if rows is None else rows(obj, state, obligations)


def _agent_rows(obj: str, state: AgentState, obligations: Obligations) -> Iterator[Row]:
    if state.key_hash:
        yield "agent_keys", state.key_hash, encode_agent_key(state.agent)
    for k in state.scoped:  # WIRE.md 1.3: the agent, then what the key may do
        yield "agent_keys", k.key_hash, encode_agent_key(state.agent, (k.scope, k.expires_at, k.key_id))


def _webhook_rows(obj: str, state: WebhookState, obligations: Obligations) -> Iterator[Row]:
    if state.url is not None:  # the agents the delivery runner serves (WIRE.md 1.2)
        yield "hooks", state.agent.encode(), b""


def _push_rows(obj: str, state: PushState, obligations: Obligations) -> Iterator[Row]:
    if state.configs:  # the A2A Tasks the push runner serves (WIRE.md 1.3)
        yield "a2a_push", state.author.encode() + b"\x00" + state.task.encode(), b""


def a2a_changed_key(author: str, changed: int, task: str) -> bytes:
    """An ``a2a_changed`` key: the author's A2A Tasks by their last change (D410)."""
    return author.encode() + b"\x00" + u64(changed) + task.encode()


def _a2a_task_rows(obj: str, state: A2ATaskState, obligations: Obligations) -> Iterator[Row]:
    # a2a.tasks lists the author's Tasks newest change first (WIRE.md 1.3, D410)
    yield "a2a_changed", a2a_changed_key(state.author, state.changed, state.task), b""


def _memory_rows(obj: str, state: MemoryState, obligations: Obligations) -> Iterator[Row]:
    if state.valid:  # R5-11: withdrawal stops listing
        yield "memories", state.author.encode() + b"\x00" + state.memory.encode(), b""
        if state.visibility == "public":  # what others may list (D233)
            yield "memories", state.author.encode() + PUBLIC + state.memory.encode(), b""


def _member_rows(obj: str, state: MemberState, obligations: Obligations) -> Iterator[Row]:
    if state.current:
        th, ag, role = state.thread.encode(), state.agent.encode(), state.role.encode()
        yield "memberships", ag + b"\x00" + th, role
        yield "members", th + b"\x00j" + u64(state.joined_at) + ag, role
        if state.role == "governor":
            yield "members", th + b"\x00g" + ag, b""
        if state.role in SPEAKING:
            yield "members", th + b"\x00s" + ag, b""


def _thread_rows(obj: str, state: ThreadState, obligations: Obligations) -> Iterator[Row]:
    if state.grant is not None:
        yield "tokens", state.grant.token_hash, state.thread.encode()


def _obligation_rows(obj: str, state: Any, obligations: Obligations) -> Iterator[Row]:
    for ob in obligations(obj, state):
        yield "obligations", obligation_key(ob), encode_obligation(ob)


def _entry_rows(obj: str, state: EntryState, obligations: Obligations) -> Iterator[Row]:
    yield from _obligation_rows(obj, state, obligations)
    th = state.thread.encode()
    for agent, r in state.responses.items():
        if r.state == "pending":  # the "pending" query (D93)
            yield "pending", th + b"\x00" + agent.encode() + b"\x00" + u32(state.entry), b""


def _assignment_rows(obj: str, state: AssignmentState, obligations: Obligations) -> Iterator[Row]:
    yield from _obligation_rows(obj, state, obligations)
    if state.state == "open":
        yield "opportunities", state.to.encode() + b"\x00" + state.assignment.encode(), state.thread.encode()
    due = ASSIGNMENT.due(state)  # the deadline of its running state
    if due is not None:
        yield "deadlines", u64(due) + state.assignment.encode(), state.thread.encode()
    if (lv := live_of(state)) is not None:  # the "live" and "due" queries (D93)
        th, asg = state.thread.encode() + b"\x00", state.assignment.encode()
        yield "live", th + b"a" + asg, encode_live(lv)
        for party in {lv.creator, lv.taker} - {None}:
            yield "live", th + b"p" + party.encode() + b"\x00" + asg, b""  # type: ignore[union-attr]
        if lv.due is not None:
            yield "live", th + b"d" + u64(lv.due) + asg, b""


def _task_rows(obj: str, state: TaskState, obligations: Obligations) -> Iterator[Row]:
    tk = state.task.encode()
    yield "tasks", state.author.encode() + b"\x00" + tk, b"author"
    if state.audience is None:
        yield "tasks", b"*\x00" + tk, b"open"
    else:
        for agent in state.audience:
            # B24: a restricted Task naming an agent is its opportunity.
            yield "tasks", agent.encode() + b"\x00" + tk, b"named"
            yield "opportunities", agent.encode() + b"\x00" + tk, tk


def _engagement_rows(obj: str, state: EngagementState, obligations: Obligations) -> Iterator[Row]:
    yield from _obligation_rows(obj, state, obligations)
    due = ENGAGEMENT.due(state)
    if due is not None:
        yield "deadlines", u64(due) + state.engagement.encode(), state.task.encode()
    en, tk = state.engagement.encode(), state.task.encode()
    if (le := live_engagement(state)) is not None:  # the Task's "live" and "due" queries (D271)
        yield "live", tk + b"\x00a" + en, encode_live(le)
        yield "live", tk + b"\x00p" + state.agent.encode() + b"\x00" + en, b""
        yield "live", tk + b"\x00d" + u64(le.due) + en, b""
    yield "engagements", state.agent.encode() + b"\x00" + tk + b"\x00" + en, b""  # an agent's, per Task
    yield "engagements", tk + b"\x00" + en, b""  # every engagement of a Task
    if state.state == "adopted":
        yield "adopted", state.task.encode() + b"\x00" + state.engagement.encode(), b""


# One row function per state type (a state of any other type has no rows).
_STATE_ROWS: dict[type, Callable[[str, Any, Obligations], Iterator[Row]]] = {
    AgentState: _agent_rows,
    WebhookState: _webhook_rows,
    PushState: _push_rows,
    A2ATaskState: _a2a_task_rows,
    MemoryState: _memory_rows,
    MemberState: _member_rows,
    ThreadState: _thread_rows,
    EntryState: _entry_rows,
    AssignmentState: _assignment_rows,
    TaskState: _task_rows,
    EngagementState: _engagement_rows,
}


# --- the named queries (core/queries.py defines them; D90, D93) -------------------

_CLASS = {"governors": b"g", "speakers": b"s"}


def query_rows(kv: Snapshot, name: str, key: str, limit: int | None = None, party: str | None = None, skip: Any = ()) -> list[tuple[Any, str]]:
    """Query ``name`` of ``key`` answered from the index rows of ``kv``, in the
    query's order: (answer, id of the object whose state gave it). Rows of an
    object in ``skip`` are left out and do not count toward ``limit`` (the
    caller answers for those objects itself)."""
    k = key.encode()
    value = False
    if name == "memberships":
        db, prefix = "memberships", k + b"\x00"
        parse = lambda rest, v: (rest.decode(), member_obj(rest.decode(), key))  # noqa: E731
    elif name in _CLASS:
        db, prefix = "members", k + b"\x00" + _CLASS[name]
        parse = lambda rest, v: (rest.decode(), member_obj(key, rest.decode()))  # noqa: E731
    elif name == "pending":
        db, prefix = "pending", k + b"\x00" + (party.encode() + b"\x00" if party is not None else b"")

        def parse(rest: bytes, v: bytes) -> tuple[Any, str]:
            agent, n = (party.encode(), rest) if party is not None else rest.split(b"\x00", 1)
            entry = from_u32(n)
            return (entry, agent.decode()), entry_obj(key, entry)
    elif name == "due":
        db, prefix = "live", k + b"\x00d"
        parse = lambda rest, v: ((from_u64(rest[:8]), rest[8:].decode()), rest[8:].decode())  # noqa: E731
    elif name == "live" and party is None:
        db, prefix, value = "live", k + b"\x00a", True
        task = key.startswith("tk_")  # a Task's rows, or a Thread's
        parse = lambda rest, v: ((rest.decode(), decode_live(v, task)), rest.decode())  # noqa: E731
    elif name == "live":
        db, prefix = "live", k + b"\x00p" + party.encode() + b"\x00"  # type: ignore[union-attr]
        task = key.startswith("tk_")

        def parse(rest: bytes, v: bytes) -> tuple[Any, str]:
            lv = kv.get("live", k + b"\x00a" + rest)
            return (rest.decode(), decode_live(lv, task)), rest.decode()
    else:
        raise KeyError(f"no query {name!r}")
    out: list[tuple[Any, str]] = []
    n = len(prefix)
    for row, v in kv.scan(db, prefix, prefix_stop(prefix), values=value):
        answer, source = parse(row[n:], v)
        if source in skip:
            continue
        out.append((answer, source))
        if limit is not None and len(out) >= limit:
            break
    if name == "pending" and party is None:
        out.sort()  # rows run by agent, the query by entry (core/queries.py)
    return out


def members_listed(kv: Snapshot, thread: str, limit: int) -> list[str]:
    """The first ``limit`` current members of ``thread`` in the order they
    joined (ties: by agent id)."""
    prefix = thread.encode() + b"\x00j"
    out: list[str] = []
    if limit <= 0:
        return out
    for k, _ in kv.scan("members", prefix, prefix_stop(prefix), values=False):
        out.append(k[len(prefix) + 8:].decode())
        if len(out) >= limit:
            break
    return out
