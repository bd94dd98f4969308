"""From decoded wire args to core commands (actions) and read calls.

Content objects are encoded to JSON bytes once, here, and from then on travel as
opaque bytes (L6): the core measures them, never reads them.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Callable, Mapping

import msgspec

from ..core import agent, assignment, engagement, entry, memory, task, thread
from ..core.pins import Pin
from ..errors import Rejection
from ..store.store import View
from .. import wire
from ..reads import READS

__all__ = ["to_command", "run_read"]

_enc = msgspec.json.Encoder()


def _content(c: dict) -> bytes:
    return _enc.encode(c)


def _name(op: str, content: dict) -> bytes:
    """An agent's content must carry a ``name`` (agent.register, admin.agent.create)."""
    try:
        msgspec.convert(content, wire.NameContent)
    except msgspec.ValidationError as e:
        raise wire.FrameError(f"invalid args for {op}: {wire.why(e)} - in `$.args.content`") from None
    return _content(content)


def _register(a: wire.RegisterArgs) -> Any:
    return agent.Register(_name("agent.register", a.content))


def _shape(op: str, where: str, content: dict, shape: type) -> bytes:
    """Check the one structural key an op needs inside a content object; the rest
    of the content stays opaque (L6)."""
    try:
        msgspec.convert(content, shape)
    except msgspec.ValidationError as e:
        raise wire.FrameError(f"invalid args for {op}: {wire.why(e)} - in `$.args.{where}`") from None
    return _content(content)


def _pin(op: str, where: str, memory: wire.MemoryRef | None, content: dict | None) -> Pin:
    if (memory is None) == (content is None):
        raise wire.FrameError(f"invalid args for {op}: give exactly one of `memory` or `content` - at `$.args{where}`")
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


def _take(a: wire.TakeArgs) -> Any:
    deliver = None
    if a.deliver is not None:
        deliver = _pin("assignment.take", ".deliver", a.deliver.memory, a.deliver.content)
    return assignment.Take(a.assignment, deliver)


def _judge(a: wire.JudgeArgs) -> Any:
    reason = None
    if a.content is not None:
        reason = _shape("assignment.judge", "content", a.content, wire.ReasonContent)
    return assignment.Judge(a.assignment, a.verdict, reason)


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
    deliver = None
    if a.deliver is not None:
        deliver = _pin("task.take", ".deliver", a.deliver.memory, a.deliver.content)
    return engagement.TakeTask(a.task, deliver)


def _task_judge(a: wire.TaskJudgeArgs) -> Any:
    reason = _shape("task.judge", "content", a.content, wire.ReasonContent) if a.content is not None else None
    return engagement.JudgeTask(a.engagement, a.verdict, reason)


_COMMANDS: dict[str, Callable[[Any], Any]] = {
    "agent.register": _register,
    "admin.agent.set_status": lambda a: agent.SetStatus(a.agent, a.status),
    "admin.agent.create": lambda a: agent.CreateAgent(_name("admin.agent.create", a.content)),
    "agent.rotate_key": lambda a: agent.RotateKey(),
    "admin.agent.reset_key": lambda a: agent.ResetKey(a.agent),
    "memory.create": lambda a: memory.Create(_content(a.content)),
    "memory.update": lambda a: memory.Update(a.memory, _content(a.content)),
    "memory.publish": lambda a: memory.SetVisibility(a.memory, "public"),
    "memory.unpublish": lambda a: memory.SetVisibility(a.memory, "private"),
    "memory.withdraw": lambda a: memory.Withdraw(a.memory),
    "thread.create": lambda a: thread.Create(_content(a.content) if a.content is not None else None),
    "thread.admit": lambda a: thread.Admit(a.thread, a.role),
    "thread.void_admission": lambda a: thread.VoidAdmission(a.thread),
    "thread.join": lambda a: thread.Join(a.token, None),  # the server resolves the thread
    "thread.leave": lambda a: thread.Leave(a.thread),
    "thread.remove": lambda a: thread.Remove(a.thread, a.agent),
    "thread.set_role": lambda a: thread.SetRole(a.thread, a.agent, a.role),
    "thread.post": _post,
    "thread.handle": _handle,
    "thread.retract": lambda a: entry.Retract(a.thread, a.entry),
    "thread.close": lambda a: thread.Close(a.thread),
    "assignment.take": _take,
    "assignment.deliver": lambda a: assignment.Deliver(a.assignment, _pin("assignment.deliver", "", a.memory, a.content)),
    "assignment.judge": _judge,
    "assignment.drop": lambda a: assignment.Drop(a.assignment),
    "assignment.void": lambda a: assignment.Void(a.assignment),
    "task.create": lambda a: task.CreateTask(
        None if a.audience == "open" else a.audience.agents, _contract("task.create", a.contract)
    ),
    "task.revise": lambda a: task.Revise(a.task, _contract("task.revise", a.contract)),
    "task.pause": lambda a: task.SetAccepting(a.task, False),
    "task.resume": lambda a: task.SetAccepting(a.task, True),
    "task.take": _task_take,
    "task.deliver": lambda a: engagement.DeliverTask(a.engagement, _pin("task.deliver", "", a.memory, a.content)),
    "task.drop": lambda a: engagement.DropTask(a.engagement),
    "task.judge": _task_judge,
}


def to_command(op: str, args: Any) -> Any:
    """Raises :class:`wire.FrameError` for content that fails an op's shape."""
    return _COMMANDS[op](args)


def run_read(
    view: View, op: str, caller: str, args: Any, now: int, seen: Mapping[str, int] = MappingProxyType({})
) -> "dict | Rejection":
    """``now`` decides which deadlines have passed: readers never show an
    obligation whose deadline passed (L4-3). ``seen``: agent -> when this
    daemon last saw it (ms)."""
    return READS[op](view, caller, args, now, seen)
