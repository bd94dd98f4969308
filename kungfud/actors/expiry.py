"""Expiries of the objects that own deadlines (Threads and Tasks, L4-3): which
command and op record them, whether one is due, and recording another
object's due expiries from any actor (rare: a decision that read many objects)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..core.kinds import kind_of
from ..errors import Rejection
from ..store import Item, Stale
from .ops import ACTIONS, DEADLINE, DEADLINE_TASK
from .overlay import Reads

if TYPE_CHECKING:
    from .runtime import Runtime

__all__ = ["expiry_of", "is_due", "expire_other"]

# The op that records the expiries of each kind of object that owns deadlines (core.kinds).
DEADLINE_OPS = {"thread": DEADLINE, "task": DEADLINE_TASK}


def expiry_of(obj: str) -> tuple[Any, str]:
    """Of an object that owns deadlines: its expiry command and its op."""
    k = kind_of(obj)
    assert k is not None and k.deadlines is not None, obj
    return k.deadlines.expire, DEADLINE_OPS[k.name]


def is_due(reads: Reads, obj: str, state: Any, now: int) -> bool:
    """Whether a deadline of ``obj`` (a Thread or a Task) is due at ``now``."""
    due = reads.next_due(obj, state)
    return due is not None and due <= now


def expire_other(runtime: "Runtime", owner: str, now: int, attempts: int) -> None:
    """Record the expiries of another Thread or Task due at ``now`` and wait
    for the commit (rare: a decision that reads many objects). Safe from any
    actor, since the write is version-checked."""
    command, op = expiry_of(owner)
    for _ in range(attempts):
        with runtime.store.read() as view:
            reads = Reads(view)
            state = reads.get(owner)
            if state is None or not is_due(reads, owner, state, now):
                return
            decision = ACTIONS[op].decide(command(owner), runtime.ctx(None, now, reads.get, reads.query))
        if isinstance(decision, Rejection):
            return
        outcome = runtime.writer.write_now(
            Item(
                scope=None, req_hash=b"", facts=decision.facts, states=decision.states, expect=reads.expect,
                result=decision.result,
            )
        )
        if not isinstance(outcome, Stale):
            return
