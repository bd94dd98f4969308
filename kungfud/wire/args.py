"""WIRE.md as types: the args of every op (their shared field types: :mod:`.fields`).

Args are frozen msgspec Structs that forbid unknown fields, so a typo or a wrongly
typed value is a ``bad_request`` naming the field (WIRE.md "Frames"). Participant
values are accepted only inside ``content`` objects (L6). The same types generate
the MCP bridge's input schemas, so the bridge cannot drift from the wire.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from ..event_kinds import KINDS
from .fields import (  # the shared field types (wire/__init__.py exports them)
    Args, AgentId, MemoryId, ThreadId, AssignmentId, TaskId, RoleName, MAX_INT, EntryNo, Version, WithinS,
    Content, Limit, EntryCursor, MemoryCursor, ThreadCursor, TaskCursor, AgentCursor, PositionCursor, EngagementId,
)

__all__ = [
    "HelloArgs",
    "NameContent",
    "RegisterArgs",
    "WhoamiArgs",
    "SetStatusArgs",
    "AdminCreateArgs",
    "AgentListArgs",
    "RotateKeyArgs",
    "ResetKeyArgs",
    "WebhookSetArgs",
    "WebhookGetArgs",
    "WebhookClearArgs",
    "MemoryCreateArgs",
    "MemoryUpdateArgs",
    "MemoryRefArgs",
    "MemoryGetArgs",
    "MemoryListArgs",
    "MemoryRef",
    "PinArgs",
    "AssignContent",
    "NoteContent",
    "ReasonContent",
    "AssignArgs",
    "ThreadCreateArgs",
    "ThreadRefArgs",
    "AdmitArgs",
    "JoinArgs",
    "RemoveArgs",
    "SetRoleArgs",
    "PostArgs",
    "HandleArgs",
    "EntryRefArgs",
    "EntriesArgs",
    "ThreadPageArgs",
    "ThreadAssignmentsArgs",
    "PageArgs",
    "TakeArgs",
    "DeliverArgs",
    "Verdict",
    "JudgeArgs",
    "AssignmentRefArgs",
    "AgentList",
    "InputRef",
    "ContractContent",
    "ContractArgs",
    "TaskCreateArgs",
    "TaskReviseArgs",
    "TaskRefArgs",
    "TaskTakeArgs",
    "TaskDeliverArgs",
    "EngagementRefArgs",
    "TaskJudgeArgs",
    "TaskGetArgs",
    "EngagementGetArgs",
    "SubscribeArgs",
    "TaskListArgs",
]

# --- account (§4) ------------------------------------------------------------


class HelloArgs(Args, frozen=True):
    key: Annotated[str, msgspec.Meta(min_length=1, max_length=256)]


class NameContent(msgspec.Struct, frozen=True):
    """``agent.register`` content must carry a ``name`` string; any other content
    fields are kept as given."""

    name: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]


class RegisterArgs(Args, frozen=True):
    content: Content


class WhoamiArgs(Args, frozen=True):
    pass


class SetStatusArgs(Args, frozen=True):
    agent: AgentId
    status: Literal["active", "deactivated"]


# --- operating a deployment (WIRE.md "Additions in 1.1") ----------------------


class AdminCreateArgs(Args, frozen=True):
    content: Content  # {"name": …}, as agent.register


class AgentListArgs(Args, frozen=True):
    status: Literal["active", "deactivated"] | None = None
    cursor: AgentCursor = None
    limit: Limit = 50


class RotateKeyArgs(Args, frozen=True):
    pass


class ResetKeyArgs(Args, frozen=True):
    agent: AgentId


# --- webhooks (WIRE.md 1.2) ----------------------------------------------------

WebhookEvent = Literal[KINDS]  # type: ignore[valid-type]  # every kind of kungfud/event_kinds.py


class WebhookSetArgs(Args, frozen=True):
    url: Annotated[str, msgspec.Meta(min_length=1, max_length=2048)]
    events: Annotated[list[WebhookEvent], msgspec.Meta(min_length=1, max_length=len(KINDS))] | None = None


class WebhookGetArgs(Args, frozen=True):
    pass


class WebhookClearArgs(Args, frozen=True):
    pass


# --- memory (§5) -------------------------------------------------------------


class MemoryCreateArgs(Args, frozen=True):
    content: Content


class MemoryUpdateArgs(Args, frozen=True):
    memory: MemoryId
    content: Content


class MemoryRefArgs(Args, frozen=True):
    memory: MemoryId


class MemoryGetArgs(Args, frozen=True):
    memory: MemoryId
    version: Version | None = None


class MemoryListArgs(Args, frozen=True):
    author: AgentId | None = None
    cursor: MemoryCursor = None
    limit: Limit = 50


# --- thread (§6) -------------------------------------------------------------


class MemoryRef(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``{"memory": "me_…", "version": 3}``; without ``version``, the current one."""

    memory: MemoryId
    version: Version | None = None


class PinArgs(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``{memory|content}``: a Memory reference, or content for a new private Memory."""

    memory: MemoryRef | None = None
    content: Content | None = None


class AssignContent(msgspec.Struct, frozen=True):
    """Shape check only: an assignment's content names its acceptance criteria."""

    criteria: Any


class NoteContent(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """B10: a handle note is one line of at most 1,000 characters: no character that
    ends a line (``str.splitlines``: LF, VT, FF, CR, FS, GS, RS, NEL, U+2028, U+2029)."""

    note: Annotated[str, msgspec.Meta(max_length=1000, pattern=r"^[^\n\x0b\x0c\r\x1c-\x1e\x85\u2028\u2029]*$(?!\n)")]


class ReasonContent(msgspec.Struct, frozen=True):
    reason: Annotated[str, msgspec.Meta(min_length=1)]


class AssignArgs(Args, frozen=True):
    to: AgentId
    content: Content
    deliver_within_s: WithinS | None = None
    judge_within_s: WithinS | None = None
    redoes: AssignmentId | None = None


class ThreadCreateArgs(Args, frozen=True):
    content: Content | None = None


class ThreadRefArgs(Args, frozen=True):
    thread: ThreadId


class AdmitArgs(Args, frozen=True):
    thread: ThreadId
    role: RoleName = "speaker"


class JoinArgs(Args, frozen=True):
    token: Annotated[str, msgspec.Meta(min_length=1, max_length=256)]


class RemoveArgs(Args, frozen=True):
    thread: ThreadId
    agent: AgentId


class SetRoleArgs(Args, frozen=True):
    thread: ThreadId
    agent: AgentId
    role: RoleName


class PostArgs(Args, frozen=True):
    thread: ThreadId
    memory: MemoryRef | None = None
    content: Content | None = None
    reply_to: EntryNo | None = None
    ask: Annotated[list[AgentId], msgspec.Meta(max_length=1000)] | None = None
    task: TaskId | None = None
    assign: AssignArgs | None = None


class HandleArgs(Args, frozen=True):
    thread: ThreadId
    entry: EntryNo
    content: Content | None = None


class EntryRefArgs(Args, frozen=True):
    thread: ThreadId
    entry: EntryNo


class EntriesArgs(Args, frozen=True):
    thread: ThreadId
    cursor: EntryCursor = None
    limit: Limit = 50
    full: bool = False
    newest_first: bool = False  # WIRE.md 1.1 "Reading the work itself"


class ThreadAssignmentsArgs(Args, frozen=True):
    """``thread.assignments`` (docs/wire.md): a Thread's assignments, newest first."""

    thread: ThreadId
    state: Literal["live", "ended"] | None = None  # absent: both
    cursor: EntryCursor = None
    limit: Limit = 50


class ThreadPageArgs(Args, frozen=True):
    cursor: ThreadCursor = None
    limit: Limit = 50


class PageArgs(Args, frozen=True):
    """``turn`` and ``opportunities``: paged by index position."""

    cursor: PositionCursor = None
    limit: Limit = 50


# --- assignment (§6.4) ----------------------------------------------------------


class TakeArgs(Args, frozen=True):
    assignment: AssignmentId
    deliver: PinArgs | None = None


Verdict = Literal["adopt", "reject"]


def _delivery(name: str, work: str, work_id: Any) -> Any:
    """``{<work>, memory|content}``: the delivery of a piece of work. One shape
    for an assignment and an engagement, which differ only in the id field
    (spec R2 keeps the two concepts apart, so the wire names them apart)."""
    fields = [(work, work_id), ("memory", MemoryRef | None, None), ("content", Content | None, None)]
    return msgspec.defstruct(name, fields, bases=(Args,), frozen=True, module=__name__)


def _judgment(name: str, work: str, work_id: Any) -> Any:
    """``{<work>, verdict, content?}``: adopt or reject a delivery (a reason in
    ``content``). One shape for an assignment and an engagement."""
    fields = [(work, work_id), ("verdict", Verdict), ("content", Content | None, None)]
    return msgspec.defstruct(name, fields, bases=(Args,), frozen=True, module=__name__)


DeliverArgs = _delivery("DeliverArgs", "assignment", AssignmentId)
JudgeArgs = _judgment("JudgeArgs", "assignment", AssignmentId)


class AssignmentRefArgs(Args, frozen=True):
    assignment: AssignmentId


# --- task (§7) -------------------------------------------------------------------


class AgentList(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    agents: Annotated[list[AgentId], msgspec.Meta(min_length=1, max_length=1000)]


class InputRef(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    memory: MemoryId
    version: Version


class ContractContent(msgspec.Struct, frozen=True):
    """Shape check only: a contract's content states output and criteria (R7.1-1)."""

    output: Any
    criteria: Any


class ContractArgs(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    content: Content
    inputs: Annotated[list[InputRef], msgspec.Meta(max_length=100)] = []
    deliver_within_s: WithinS | None = None
    judge_within_s: WithinS | None = None
    on_no_judgment: Literal["undecided", "adopt"] = "undecided"
    adoption_limit: Version | None = None
    judge: AgentId | None = None
    eligibility: AgentList | None = None
    readers: Literal["parties", "public"] = "parties"


class TaskCreateArgs(Args, frozen=True):
    audience: Literal["open"] | AgentList
    contract: ContractArgs


class TaskReviseArgs(Args, frozen=True):
    task: TaskId
    contract: ContractArgs


class TaskRefArgs(Args, frozen=True):
    task: TaskId


class TaskTakeArgs(Args, frozen=True):
    task: TaskId
    deliver: PinArgs | None = None


TaskDeliverArgs = _delivery("TaskDeliverArgs", "engagement", EngagementId)


class EngagementRefArgs(Args, frozen=True):
    engagement: EngagementId


TaskJudgeArgs = _judgment("TaskJudgeArgs", "engagement", EngagementId)


class TaskGetArgs(Args, frozen=True):
    task: TaskId
    contract_version: Version | None = None
    adopted_after: EngagementId | None = None  # continue `adopted` after this item (its `adopted_cursor`)


class EngagementGetArgs(Args, frozen=True):
    engagement: EngagementId
    inputs_after: Annotated[int, msgspec.Meta(ge=0, le=100)] = 0  # inputs whose content an earlier page gave


class SubscribeArgs(Args, frozen=True):
    since: Annotated[int, msgspec.Meta(ge=0, le=MAX_INT)] | None = None
    open_tasks: bool = False  # WIRE.md 1.2: task_offered events too
    a2a: bool = False  # WIRE.md 1.3: a2a_task events too


class TaskListArgs(Args, frozen=True):
    cursor: TaskCursor = None
    limit: Limit = 50
    mine: bool = False
