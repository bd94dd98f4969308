"""The action table: for each op, which actor owns it and which core decision it
runs. Adding a protocol action = one row here plus its core ``decide_*``.

``route(command, caller, view)`` names the actor that serializes the action: the
caller's Agent actor (one of a few shared by hash) for account and Memory
actions, the Thread's actor for everything inside a Thread (assignments are
found through their Thread), the Task's actor for a Task and its engagements.
"""

from __future__ import annotations

import zlib
from typing import Any, Callable, NamedTuple

from ..core import agent, assignment, deactivation, engagement, entry, memory, task, thread
from ..core.context import Ctx
from ..core.facts import Decision
from ..errors import Rejection
from ..store.store import View

__all__ = [
    "ActionSpec", "ACTIONS", "REGISTRAR", "DEADLINE", "DEADLINE_TASK", "agent_actor", "AGENT_SHARDS", "ROUTE_READS",
    "SERVICE_ACTORS",
]

REGISTRAR = "ag_registrar"  # actor key serializing registrations (no agent yet)
DEADLINE = "deadline"  # op name of a Thread's deadline jobs (no agent, no receipt)
DEADLINE_TASK = "deadline.task"  # op name of a Task's deadline jobs

Decide = Callable[[Any, Ctx], "Decision | Rejection"]
Route = Callable[[Any, "str | None", View], str]


class ActionSpec(NamedTuple):
    route: Route
    decide: Decide


AGENT_SHARDS = 2
_SHARDS = tuple(f"ag_shard{i}" for i in range(AGENT_SHARDS))
#: Actors that serialize by caller instead of owning one object: the only keys
#: the registry starts an actor for without the object existing (M5).
SERVICE_ACTORS = frozenset({REGISTRAR, *_SHARDS})


def agent_actor(agent: str) -> str:
    """The actor that serializes an agent's account and Memory actions. Agents
    share a few actors (by a stable hash of the id) instead of one thread each:
    fewer threads compete for the GIL, and each actor still orders the actions
    of every agent it serves."""
    return _SHARDS[zlib.crc32(agent.encode()) % AGENT_SHARDS]


def _caller(cmd: Any, caller: str | None, view: View) -> str:
    assert caller is not None
    return agent_actor(caller)


def _thread(cmd: Any, caller: str | None, view: View) -> str:
    return cmd.thread


def _assignment(cmd: Any, caller: str | None, view: View) -> str:
    state = view.state(cmd.assignment)
    # An unknown assignment is decided (not_found) by the caller's own actor.
    return state.thread if state is not None else _caller(cmd, caller, view)


def _task(cmd: Any, caller: str | None, view: View) -> str:
    return cmd.task


def _engagement(cmd: Any, caller: str | None, view: View) -> str:
    state = view.state(cmd.engagement)
    return state.task if state is not None else _caller(cmd, caller, view)


def _join(cmd: Any, caller: str | None, view: View) -> str:
    return cmd.thread if cmd.thread is not None else _caller(cmd, caller, view)


ACTIONS: dict[str, ActionSpec] = {
    "agent.register": ActionSpec(lambda c, a, v: REGISTRAR, lambda c, ctx: agent.decide_register(c, ctx)),
    "admin.agent.set_status": ActionSpec(
        lambda c, a, v: agent_actor(c.agent), lambda c, ctx: deactivation.decide_set_status(ctx.get(c.agent), c, ctx)
    ),
    "admin.agent.create": ActionSpec(lambda c, a, v: REGISTRAR, agent.decide_create),
    "agent.rotate_key": ActionSpec(_caller, agent.decide_rotate_key),
    "admin.agent.reset_key": ActionSpec(
        lambda c, a, v: agent_actor(c.agent), lambda c, ctx: agent.decide_reset_key(ctx.get(c.agent), c, ctx)
    ),
    "memory.create": ActionSpec(_caller, lambda c, ctx: memory.decide_create(c, ctx)),
    "memory.update": ActionSpec(_caller, lambda c, ctx: memory.decide_update(ctx.get(c.memory), c, ctx)),
    "memory.publish": ActionSpec(_caller, lambda c, ctx: memory.decide_set_visibility(ctx.get(c.memory), c, ctx)),
    "memory.unpublish": ActionSpec(_caller, lambda c, ctx: memory.decide_set_visibility(ctx.get(c.memory), c, ctx)),
    "memory.withdraw": ActionSpec(_caller, lambda c, ctx: memory.decide_withdraw(ctx.get(c.memory), c, ctx)),
    "thread.create": ActionSpec(_caller, thread.decide_create),
    "thread.admit": ActionSpec(_thread, thread.decide_admit),
    "thread.void_admission": ActionSpec(_thread, thread.decide_void_admission),
    "thread.join": ActionSpec(_join, thread.decide_join),
    "thread.leave": ActionSpec(_thread, thread.decide_leave),
    "thread.remove": ActionSpec(_thread, thread.decide_remove),
    "thread.set_role": ActionSpec(_thread, thread.decide_set_role),
    "thread.close": ActionSpec(_thread, thread.decide_close),
    "thread.post": ActionSpec(_thread, entry.decide_post),
    "thread.handle": ActionSpec(_thread, entry.decide_handle),
    "thread.retract": ActionSpec(_thread, entry.decide_retract),
    "assignment.take": ActionSpec(_assignment, assignment.decide_take),
    "assignment.deliver": ActionSpec(_assignment, assignment.decide_deliver),
    "assignment.judge": ActionSpec(_assignment, assignment.decide_judge),
    "assignment.drop": ActionSpec(_assignment, assignment.decide_drop),
    "assignment.void": ActionSpec(_assignment, assignment.decide_void),
    DEADLINE: ActionSpec(_thread, assignment.decide_expire),
    "task.create": ActionSpec(_caller, task.decide_create),
    "task.revise": ActionSpec(_task, task.decide_revise),
    "task.pause": ActionSpec(_task, task.decide_set_accepting),
    "task.resume": ActionSpec(_task, task.decide_set_accepting),
    "task.take": ActionSpec(_task, engagement.decide_take),
    "task.deliver": ActionSpec(_engagement, engagement.decide_deliver),
    "task.drop": ActionSpec(_engagement, engagement.decide_drop),
    "task.judge": ActionSpec(_engagement, engagement.decide_judge),
    DEADLINE_TASK: ActionSpec(_task, engagement.decide_expire),
}

# Ops whose route reads the store (to find the owning Thread or Task); every
# other route is a function of the command and caller alone.
ROUTE_READS = frozenset(op for op, spec in ACTIONS.items() if spec.route in (_assignment, _engagement, _join))
