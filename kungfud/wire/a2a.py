"""The args of the A2A ops (WIRE.md 1.3 "A2A"): ``a2a.card.*``, ``a2a.send``,
``a2a.cancel``, ``a2a.task``, ``a2a.tasks``, ``a2a.push.*``.

The A2A message travels as A2A 1.0 writes it (ProtoJSON, camelCase). Task ids
are any string here, not the ``tk_…`` pattern: an A2A read of something that is
not the caller's A2A Task answers ``not_found`` with the same bytes whatever the
id looks like (WIRE.md 1.3 "Reads").
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from .args import AgentList
from .fields import AgentId, Args, Limit

__all__ = [
    "A2ASkill", "A2ACardContent", "A2ACardSetArgs", "A2ACardGetArgs", "A2ACardClearArgs", "A2AMessage",
    "A2ASendArgs", "A2ATaskRefArgs", "A2ATaskArgs", "A2ATasksArgs", "A2APushAuth", "A2APushConfig",
    "A2APushSetArgs", "A2APushClearArgs", "A2ATaskState",
]

_Text = Annotated[str, msgspec.Meta(min_length=1, max_length=2000)]
_Short = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
#: What a client names a task by; not_found unless it is one of its A2A Tasks.
A2ATaskRef = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
A2ATaskState = Literal[
    "TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_INPUT_REQUIRED", "TASK_STATE_COMPLETED",
    "TASK_STATE_CANCELED",
]


class A2ASkill(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    id: _Short
    name: _Short
    description: _Text
    tags: Annotated[list[_Short], msgspec.Meta(max_length=20)] = []
    examples: Annotated[list[_Text], msgspec.Meta(max_length=20)] | None = None


class A2ACardContent(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    name: _Short
    description: _Text
    skills: Annotated[list[A2ASkill], msgspec.Meta(max_length=50)] | None = None


class A2ACardSetArgs(Args, frozen=True):
    content: A2ACardContent
    accept: Literal["any"] | AgentList = "any"


class A2ACardGetArgs(Args, frozen=True):
    agent: AgentId | None = None


class A2ACardClearArgs(Args, frozen=True):
    pass


class A2AMessage(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, forbid_unknown_fields=True):
    """An A2A 1.0 Message (its fields as ProtoJSON names them; any other is
    refused, as for every op's args)."""

    message_id: Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
    role: Annotated[str, msgspec.Meta(max_length=64)]
    parts: Annotated[list[dict[str, Any]], msgspec.Meta(min_length=1, max_length=100)]
    task_id: A2ATaskRef | None = None
    context_id: Annotated[str, msgspec.Meta(max_length=256)] | None = None
    reference_task_ids: Annotated[list[A2ATaskRef], msgspec.Meta(max_length=100)] = []
    metadata: dict[str, Any] | None = None
    extensions: Annotated[list[Annotated[str, msgspec.Meta(max_length=512)]], msgspec.Meta(max_length=20)] = []


class A2ASendArgs(Args, frozen=True):
    to: AgentId
    message: A2AMessage
    configuration: dict[str, Any] | None = None


class A2ATaskRefArgs(Args, frozen=True):
    task: A2ATaskRef
    to: AgentId | None = None  # the agent whose endpoint was called: another's task is not found


class A2ATaskArgs(Args, frozen=True):
    task: A2ATaskRef
    history_length: Annotated[int, msgspec.Meta(ge=0, le=10_000)] | None = None
    to: AgentId | None = None


class A2ATasksArgs(Args, frozen=True):
    to: AgentId | None = None
    context: Annotated[str, msgspec.Meta(max_length=256)] | None = None
    state: A2ATaskState | None = None
    # the position of the last Task a page looked at: <change ms>.<task> (D410)
    cursor: Annotated[str, msgspec.Meta(pattern=r"^[0-9]{1,15}\.tk_[0-9a-z_]{1,60}$(?!\n)")] | None = None
    limit: Limit = 50


class A2APushAuth(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    scheme: Annotated[str, msgspec.Meta(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$(?!\n)")]
    credentials: Annotated[str, msgspec.Meta(max_length=4096)] | None = None


class A2APushConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    url: Annotated[str, msgspec.Meta(min_length=1, max_length=2048)]
    id: Annotated[str, msgspec.Meta(min_length=1, max_length=128)] | None = None
    token: Annotated[str, msgspec.Meta(max_length=4096)] | None = None
    authentication: A2APushAuth | None = None


class A2APushSetArgs(Args, frozen=True):
    task: A2ATaskRef
    config: A2APushConfig
    to: AgentId | None = None


class A2APushClearArgs(Args, frozen=True):
    task: A2ATaskRef
    config: Annotated[str, msgspec.Meta(min_length=1, max_length=128)]
    to: AgentId | None = None
