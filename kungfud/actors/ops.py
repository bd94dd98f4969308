"""The op catalogue, executable half: for each action, how its wire args become
a core command, what the store must tell before it is routed, which actor
serializes it and which core decision runs it. Keyed exactly as the
client-visible half, :data:`kungfud.wire.OPS` (kind, args type, doc);
``tests/test_catalogue.py`` checks every action op has one row here and every
read op one row in the read table. Adding an op: docs/architecture.md.

``command(args)`` builds the core command. Content objects are encoded to JSON
bytes once, here, and from then on travel as opaque bytes (L6): the core
measures them, never reads them. A content object that fails the one
structural key an op needs raises :class:`kungfud.wire.FrameError`
(``bad_request``).

``resolve(command, view)``, when present, completes the command from the store
before routing: a ``thread.join`` token names no Thread until it is matched
against the stored grants.

``precheck``, when present, names I/O the action needs before it is routed,
awaited by the server on the event loop after admission (a few at a time):
``webhook.set``'s ``public_host`` resolves its URL's host (D216). The daemon
supplies the check of each name (kungfud/webhooks/precheck.py); a refusal it
returns is answered unless a receipt answers first.

``route(command, caller, view)`` names the actor that serializes the action: the
caller's Agent actor (one of a few shared by hash) for account and Memory
actions, the Thread's actor for everything inside a Thread (assignments are
found through their Thread), the Task's actor for a Task and its engagements.
"""

from __future__ import annotations

import zlib
from typing import Any, Callable, NamedTuple

import msgspec

from .. import wire
from . import a2a_ops
from ..core import a2a, a2a_card, agent, assignment, deactivation, engagement, entry, keys, memory, task, thread, webhook, work
from ..core.context import Ctx
from ..core.facts import Decision
from ..core.pins import Pin
from ..errors import Rejection
from ..store.view import View
from ..wire.names import normalized
from ..wire.reasons import teach

__all__ = [
    "Action", "ACTIONS", "REGISTRAR", "DEADLINE", "DEADLINE_TASK", "agent_actor", "AGENT_SHARDS", "ROUTE_READS",
    "SERVICE_ACTORS", "to_command", "PRECHECKS",
]

REGISTRAR = "ag_registrar"  # actor key serializing registrations (no agent yet)
DEADLINE = "deadline"  # op name of a Thread's deadline jobs (no agent, no receipt)
DEADLINE_TASK = "deadline.task"  # op name of a Task's deadline jobs

Decide = Callable[[Any, Ctx], "Decision | Rejection"]
Route = Callable[[Any, "str | None", View], str]
Resolve = Callable[[Any, View], Any]


class Action(NamedTuple):
    command: Callable[[Any], Any] | None  # wire args -> core command; None: not a wire op (deadline jobs)
    route: Route
    decide: Decide
    resolve: Resolve | None = None  # completes the command from the store before routing
    precheck: str | None = None  # names I/O before routing, on the event loop (webhook.set's host, D216)


# --- wire args -> core commands ---------------------------------------------------

_enc = msgspec.json.Encoder()


def _content(c: dict) -> bytes:
    return _enc.encode(c)


def _name(op: str, content: dict) -> bytes:
    """An agent's content must carry a ``name`` (agent.register, admin.agent.create)."""
    try:
        msgspec.convert(content, wire.NameContent)
    except msgspec.ValidationError as e:
        raise wire.FrameError(f"invalid args for {op}: {teach(wire.NameContent, wire.why(e), 'content')}") from None
    try:  # stored normalized, never with an invisible character (kungfud/wire/names.py)
        content = {**content, "name": normalized(content["name"])}
    except ValueError as e:
        raise wire.FrameError(f"invalid args for {op}: `content.name` {e}") from None
    return _content(content)


def _register(a: wire.RegisterArgs) -> Any:
    return agent.Register(_name("agent.register", a.content))


def _shape(op: str, where: str, content: dict, shape: type) -> bytes:
    """Check the one structural key an op needs inside a content object; the rest
    of the content stays opaque (L6)."""
    try:
        msgspec.convert(content, shape)
    except msgspec.ValidationError as e:
        raise wire.FrameError(f"invalid args for {op}: {teach(shape, wire.why(e), where)}") from None
    return _content(content)


def _pin(op: str, where: str, memory: wire.MemoryRef | None, content: dict | None) -> Pin:
    if (memory is None) == (content is None):
        inside = f" in `{where[1:]}`" if where else ""
        raise wire.FrameError(
            f"invalid args for {op}: give exactly one of `memory` (a Memory to pin: {{\"memory\": \"me_…\"}}) "
            f"or `content` (what you write, e.g. {{\"text\": \"…\"}}){inside}"
        )
    if memory is not None:
        return Pin(memory=memory.memory, version=memory.version)
    assert content is not None
    return Pin(content=_content(content))


def _post(a: wire.PostArgs) -> Any:
    assign = None
    if a.assign is not None:
        x = a.assign
        assign = assignment.AssignSpec(
            x.to, _shape("thread.post", "assign.content", x.content, wire.AssignContent), x.deliver_within_s,
            x.judge_within_s, x.redoes,
        )
    return entry.Post(a.thread, _pin("thread.post", "", a.memory, a.content), a.reply_to, a.ask, a.task, assign)


def _delivered_with(op: str, deliver: wire.PinArgs | None) -> Pin | None:
    """A take's optional delivery in the same action (L2-2)."""
    return None if deliver is None else _pin(op, ".deliver", deliver.memory, deliver.content)


def _reason(op: str, content: dict | None) -> bytes | None:
    """A judgment's optional reason (a rejection's, R6.4-26, R7.3-17)."""
    return None if content is None else _shape(op, "content", content, wire.ReasonContent)


def _take(a: wire.TakeArgs) -> Any:
    return work.Take(a.assignment, _delivered_with("assignment.take", a.deliver))


def _judge(a: wire.JudgeArgs) -> Any:
    return work.Judge(a.assignment, a.verdict, _reason("assignment.judge", a.content))


def _handle(a: wire.HandleArgs) -> Any:
    note = _shape("thread.handle", "content", a.content, wire.NoteContent) if a.content is not None else None
    return entry.Handle(a.thread, a.entry, note)


def _contract(op: str, c: wire.ContractArgs) -> task.ContractSpec:
    return task.ContractSpec(
        content=_shape(op, "contract.content", c.content, wire.ContractContent),
        inputs=[(i.memory, i.version) for i in c.inputs],
        deliver_within_s=c.deliver_within_s,
        judge_within_s=c.judge_within_s,
        on_no_judgment=c.on_no_judgment,
        adoption_limit=c.adoption_limit,
        judge=c.judge,
        eligibility=c.eligibility.agents if c.eligibility is not None else None,
        readers=c.readers,
    )


def _task_take(a: wire.TaskTakeArgs) -> Any:
    return work.Take(a.task, _delivered_with("task.take", a.deliver))


def _task_judge(a: wire.TaskJudgeArgs) -> Any:
    return work.Judge(a.engagement, a.verdict, _reason("task.judge", a.content))


# --- routes ---------------------------------------------------------------------

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
    state = view.state(cmd.work)
    # An unknown assignment is decided (not_found) by the caller's own actor.
    return state.thread if state is not None else _caller(cmd, caller, view)


def _task(cmd: Any, caller: str | None, view: View) -> str:
    return cmd.task


def _offered(cmd: Any, caller: str | None, view: View) -> str:
    return cmd.work  # a Task taken: its actor


def _owner(cmd: Any, caller: str | None, view: View) -> str:
    return cmd.owner  # a deadline job: the Thread's or Task's actor


def _engagement(cmd: Any, caller: str | None, view: View) -> str:
    state = view.state(cmd.work)
    return state.task if state is not None else _caller(cmd, caller, view)


def _a2a_task(cmd: Any, caller: str | None, view: View) -> str:
    """An A2A action on an existing Task: its actor; a new Task, or an id that
    names no Task, the caller's (which decides not_found)."""
    task = a2a_ops.routed_task(cmd)
    if task is not None and task.startswith("tk_") and "." not in task and view.state(task) is not None:
        return task
    return _caller(cmd, caller, view)


def _join(cmd: Any, caller: str | None, view: View) -> str:
    return cmd.thread if cmd.thread is not None else _caller(cmd, caller, view)


def _grant(cmd: Any, view: View) -> Any:
    """The Thread whose live grant the token matches (None: no such grant)."""
    return msgspec.structs.replace(cmd, thread=view.thread_for_token(thread.token_hash(cmd.token)))


def _by_agent(cmd: Any, caller: str | None, view: View) -> str:
    return agent_actor(cmd.agent)


def _registrar(cmd: Any, caller: str | None, view: View) -> str:
    return REGISTRAR


def _create_task(a: wire.TaskCreateArgs) -> Any:
    return task.CreateTask(None if a.audience == "open" else a.audience.agents, _contract("task.create", a.contract))


def _deliver(a: wire.DeliverArgs) -> Any:
    return work.Deliver(a.assignment, _pin("assignment.deliver", "", a.memory, a.content))


def _deliver_task(a: wire.TaskDeliverArgs) -> Any:
    return work.Deliver(a.engagement, _pin("task.deliver", "", a.memory, a.content))


# One row per action: (command, route, decide[, resolve]).
ACTIONS: dict[str, Action] = {
    # account (§4) and operating a deployment
    "agent.register": Action(_register, _registrar, lambda c, ctx: agent.decide_register(c, ctx)),
    "admin.agent.set_status": Action(
        lambda a: agent.SetStatus(a.agent, a.status),
        _by_agent,
        lambda c, ctx: deactivation.decide_set_status(ctx.get(c.agent), c, ctx),
    ),
    "admin.agent.create": Action(
        lambda a: agent.CreateAgent(_name("admin.agent.create", a.content)), _registrar, agent.decide_create
    ),
    "agent.rotate_key": Action(lambda a: agent.RotateKey(), _caller, agent.decide_rotate_key),
    # WIRE.md 1.3: scoped keys, in the caller's actor (which also rotates its key)
    "agent.key.create": Action(lambda a: keys.CreateKey(a.scope, a.label, a.expires_in_s), _caller, keys.decide_create),
    "agent.key.revoke": Action(lambda a: keys.RevokeKey(a.key_id), _caller, keys.decide_revoke),
    "admin.agent.reset_key": Action(
        lambda a: agent.ResetKey(a.agent),
        _by_agent,
        lambda c, ctx: deactivation.decide_reset_key(ctx.get(c.agent), c, ctx),
    ),
    # webhooks (WIRE.md 1.2): the caller's actor, which also decides its deactivation and key reset
    "webhook.set": Action(
        lambda a: webhook.SetWebhook(a.url, None if a.events is None else tuple(a.events)), _caller, webhook.decide_set,
        precheck="public_host",
    ),
    "webhook.clear": Action(lambda a: webhook.ClearWebhook(), _caller, webhook.decide_clear),
    # memory (§5)
    "memory.create": Action(
        lambda a: memory.CreateMemory(_content(a.content)), _caller, lambda c, ctx: memory.decide_create(c, ctx)
    ),
    "memory.update": Action(
        lambda a: memory.Update(a.memory, _content(a.content)),
        _caller,
        lambda c, ctx: memory.decide_update(ctx.get(c.memory), c, ctx),
    ),
    "memory.publish": Action(
        lambda a: memory.SetVisibility(a.memory, "public"),
        _caller,
        lambda c, ctx: memory.decide_set_visibility(ctx.get(c.memory), c, ctx),
    ),
    "memory.unpublish": Action(
        lambda a: memory.SetVisibility(a.memory, "private"),
        _caller,
        lambda c, ctx: memory.decide_set_visibility(ctx.get(c.memory), c, ctx),
    ),
    "memory.withdraw": Action(
        lambda a: memory.Withdraw(a.memory), _caller, lambda c, ctx: memory.decide_withdraw(ctx.get(c.memory), c, ctx)
    ),
    # thread (§6)
    "thread.create": Action(
        lambda a: thread.CreateThread(_content(a.content) if a.content is not None else None), _caller, thread.decide_create
    ),
    "thread.admit": Action(lambda a: thread.Admit(a.thread, a.role), _thread, thread.decide_admit),
    "thread.void_admission": Action(lambda a: thread.VoidAdmission(a.thread), _thread, thread.decide_void_admission),
    "thread.join": Action(lambda a: thread.Join(a.token, None), _join, thread.decide_join, resolve=_grant),
    "thread.leave": Action(lambda a: thread.Leave(a.thread), _thread, thread.decide_leave),
    "thread.remove": Action(lambda a: thread.Remove(a.thread, a.agent), _thread, thread.decide_remove),
    "thread.set_role": Action(lambda a: thread.SetRole(a.thread, a.agent, a.role), _thread, thread.decide_set_role),
    "thread.close": Action(lambda a: thread.Close(a.thread), _thread, thread.decide_close),
    "thread.post": Action(_post, _thread, entry.decide_post),
    "thread.handle": Action(_handle, _thread, entry.decide_handle),
    "thread.retract": Action(lambda a: entry.Retract(a.thread, a.entry), _thread, entry.decide_retract),
    # assignment (§6.4)
    "assignment.take": Action(_take, _assignment, assignment.decide_take),
    "assignment.deliver": Action(_deliver, _assignment, assignment.decide_deliver),
    "assignment.judge": Action(_judge, _assignment, assignment.decide_judge),
    "assignment.drop": Action(lambda a: work.Drop(a.assignment), _assignment, assignment.decide_drop),
    "assignment.void": Action(lambda a: work.Void(a.assignment), _assignment, assignment.decide_void),
    DEADLINE: Action(None, _owner, assignment.decide_expire),
    # task (§7)
    "task.create": Action(_create_task, _caller, task.decide_create),
    "task.revise": Action(
        lambda a: task.Revise(a.task, _contract("task.revise", a.contract)), _task, task.decide_revise
    ),
    "task.pause": Action(lambda a: task.SetAccepting(a.task, False), _task, task.decide_set_accepting),
    "task.resume": Action(lambda a: task.SetAccepting(a.task, True), _task, task.decide_set_accepting),
    "task.take": Action(_task_take, _offered, a2a.progressing(engagement.decide_take)),
    "task.deliver": Action(_deliver_task, _engagement, a2a.progressing(engagement.decide_deliver)),
    "task.drop": Action(lambda a: work.Drop(a.engagement), _engagement, a2a.progressing(engagement.decide_drop)),
    "task.judge": Action(_task_judge, _engagement, a2a.progressing(engagement.decide_judge)),
    # A Task's engagements moving may move its A2A state (WIRE.md 1.3): a2a.progressing
    DEADLINE_TASK: Action(None, _owner, a2a.progressing(engagement.decide_expire)),
    # A2A (WIRE.md 1.3): a card on the caller's actor, the rest on the Task's
    "a2a.card.set": Action(a2a_ops.card_set, _caller, a2a_card.decide_set),
    "a2a.card.clear": Action(lambda a: a2a_card.ClearCard(), _caller, a2a_card.decide_clear),
    # a push config's host resolved before routing, as webhook.set's (D411)
    "a2a.send": Action(a2a_ops.send, _a2a_task, a2a.decide_send, precheck="push_host"),
    "a2a.cancel": Action(a2a_ops.cancel, _a2a_task, a2a.decide_cancel),
    "a2a.push.set": Action(a2a_ops.push_set, _a2a_task, a2a.decide_push_set, precheck="push_host"),
    "a2a.push.clear": Action(a2a_ops.push_clear, _a2a_task, a2a.decide_push_clear),
}

# Ops whose route reads the store (to find the owning Thread or Task, or the
# Thread a token admits to); every other route is a function of the command and
# caller alone, so the event loop reads nothing for them.
ROUTE_READS = frozenset(
    op for op, spec in ACTIONS.items() if spec.resolve is not None or spec.route in (_assignment, _engagement, _join, _a2a_task)
)

# The pre-checks the catalogue names: a server must be given each (kungfud/daemon.py).
PRECHECKS = frozenset(spec.precheck for spec in ACTIONS.values() if spec.precheck is not None)


def to_command(op: str, args: Any) -> Any:
    """The core command of action ``op``. Raises :class:`wire.FrameError` for
    content that fails an op's shape."""
    command = ACTIONS[op].command
    assert command is not None, f"{op} is not a wire op"
    return command(args)
