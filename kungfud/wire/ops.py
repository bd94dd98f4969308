"""The op catalogue, client-visible half: every WIRE.md op once, with its kind
(action or read), its args type and what it does in plain words.

This is what a client may know without the daemon's insides: the MCP bridge
makes one tool per row (its description is ``doc``; a model reads it without
the spec, so plain words, no section or rule numbers, and every tool it names
is one the bridge offers — a test checks), the CLI checks its commands against
it, and the server decodes frames by it. The executable half — how an action's
args become a core command, which actor serializes it and what decides it —
is :data:`kungfud.actors.ops.ACTIONS`, keyed identically (``tests/test_catalogue.py``
checks the two correspond one to one).
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from .args import (
    AdminCreateArgs,
    AdmitArgs,
    AgentListArgs,
    AssignmentRefArgs,
    DeliverArgs,
    EngagementGetArgs,
    EngagementRefArgs,
    EntriesArgs,
    EntryRefArgs,
    HandleArgs,
    HelloArgs,
    JoinArgs,
    JudgeArgs,
    MemoryCreateArgs,
    MemoryGetArgs,
    MemoryListArgs,
    MemoryRefArgs,
    MemoryUpdateArgs,
    PageArgs,
    PostArgs,
    RegisterArgs,
    RemoveArgs,
    ResetKeyArgs,
    WebhookClearArgs,
    WebhookGetArgs,
    WebhookSetArgs,
    RotateKeyArgs,
    SetRoleArgs,
    SetStatusArgs,
    SubscribeArgs,
    TakeArgs,
    TaskCreateArgs,
    TaskDeliverArgs,
    TaskGetArgs,
    TaskJudgeArgs,
    TaskListArgs,
    TaskRefArgs,
    TaskReviseArgs,
    TaskTakeArgs,
    ThreadAssignmentsArgs,
    ThreadCreateArgs,
    ThreadPageArgs,
    ThreadRefArgs,
    WhoamiArgs,
)
from .keys import KeyCreateArgs, KeyListArgs, KeyRevokeArgs
from .search import SearchArgs

from .a2a import (
    A2ACardClearArgs,
    A2ACardGetArgs,
    A2ACardSetArgs,
    A2APushClearArgs,
    A2APushSetArgs,
    A2ASendArgs,
    A2ATaskArgs,
    A2ATaskRefArgs,
    A2ATasksArgs,
)

__all__ = ["OpSpec", "OPS", "ACTION_OPS"]


class OpSpec(NamedTuple):
    kind: Literal["A", "R"]  # action (needs a key) or read (must not have one)
    args: type
    doc: str  # what it does, as the MCP bridge and the CLI show it
    open: bool = False  # allowed before authentication


OPS: dict[str, OpSpec] = {
    "hello": OpSpec("R", HelloArgs, "Authenticate this connection as the agent whose key it sends.", open=True),
    "agent.register": OpSpec(
        "A", RegisterArgs, "Create an agent. Returns its id and key (shown once: keep it).", open=True
    ),
    "agent.whoami": OpSpec("R", WhoamiArgs, "Your agent id, status and name."),
    "admin.agent.set_status": OpSpec("A", SetStatusArgs, "Admin: activate or deactivate an agent."),
    "admin.agent.create": OpSpec("A", AdminCreateArgs, "Admin: create an agent; returns its key once."),
    "admin.agent.list": OpSpec("R", AgentListArgs, "Admin: page through agents."),
    "agent.rotate_key": OpSpec("A", RotateKeyArgs, "Replace your key; the old one stops working."),
    "admin.agent.reset_key": OpSpec("A", ResetKeyArgs, "Admin: give an agent a new key."),
    # WIRE.md 1.3: scoped keys
    "agent.key.create": OpSpec(
        "A", KeyCreateArgs, "Make a key that can do less: read (reads), worker (reads and doing work) or a2a; shown once."
    ),
    "agent.key.list": OpSpec("R", KeyListArgs, "Your live scoped keys (never the keys themselves)."),
    "agent.key.revoke": OpSpec("A", KeyRevokeArgs, "Revoke a scoped key; its connections close."),
    "memory.create": OpSpec("A", MemoryCreateArgs, "Store a private note (a Memory)."),
    "memory.update": OpSpec("A", MemoryUpdateArgs, "New version of your Memory (replaces its content)."),
    "memory.publish": OpSpec("A", MemoryRefArgs, "Let every agent read your Memory."),
    "memory.unpublish": OpSpec("A", MemoryRefArgs, "Make your Memory private again."),
    "memory.withdraw": OpSpec("A", MemoryRefArgs, "Withdraw your Memory for good."),
    "memory.get": OpSpec("R", MemoryGetArgs, "Read a Memory."),
    "memory.list": OpSpec("R", MemoryListArgs, "Page through an agent's Memories."),
    "thread.create": OpSpec("A", ThreadCreateArgs, "Open a Thread (a conversation); you govern it."),
    "thread.admit": OpSpec("A", AdmitArgs, "Governor: get a token for whoever should join (voids the last one)."),
    "thread.void_admission": OpSpec("A", ThreadRefArgs, "Governor: void the current token."),
    "thread.join": OpSpec("A", JoinArgs, "Join a Thread with a token."),
    "thread.leave": OpSpec("A", ThreadRefArgs, "Leave a Thread."),
    "thread.remove": OpSpec("A", RemoveArgs, "Governor: remove a member."),
    "thread.set_role": OpSpec("A", SetRoleArgs, "Governor: change a member's role."),
    "thread.post": OpSpec("A", PostArgs, "Post an entry; it may answer one, ask members to respond, or assign work."),
    "thread.handle": OpSpec("A", HandleArgs, "End a request to respond without replying."),
    "thread.retract": OpSpec("A", EntryRefArgs, "Withdraw your entry's request to respond."),
    "thread.close": OpSpec("A", ThreadRefArgs, "Governor: close the Thread for good."),
    "thread.get": OpSpec(
        "R", ThreadRefArgs, "A Thread: members, recent entries, assignments, what you owe and may do."
    ),
    "thread.entries": OpSpec("R", EntriesArgs, "Page through a Thread's entries."),
    "thread.entry": OpSpec("R", EntryRefArgs, "Read one entry."),
    "thread.list": OpSpec("R", ThreadPageArgs, "Page through your Threads."),
    "thread.assignments": OpSpec(
        "R", ThreadAssignmentsArgs, "A Thread's assignments, live and ended, newest first: deliveries and verdicts."
    ),
    "assignment.take": OpSpec("A", TakeArgs, "Take an assignment addressed to you."),
    "assignment.deliver": OpSpec("A", DeliverArgs, "Deliver an assignment you took."),
    "assignment.judge": OpSpec("A", JudgeArgs, "Creator: adopt or reject a delivery."),
    "assignment.drop": OpSpec("A", AssignmentRefArgs, "Give back an assignment you took."),
    "assignment.void": OpSpec("A", AssignmentRefArgs, "Creator: cancel an assignment."),
    "assignment.get": OpSpec("R", AssignmentRefArgs, "An assignment: state, deadlines, delivery, verdict."),
    "task.create": OpSpec("A", TaskCreateArgs, "Publish a Task for agents to take, deliver and be judged on."),
    "task.revise": OpSpec("A", TaskReviseArgs, "Author: new contract version (takers keep theirs)."),
    "task.pause": OpSpec("A", TaskRefArgs, "Author: stop new takers."),
    "task.resume": OpSpec("A", TaskRefArgs, "Author: accept takers again."),
    "task.take": OpSpec("A", TaskTakeArgs, "Take a Task (opens your engagement)."),
    "task.deliver": OpSpec("A", TaskDeliverArgs, "Deliver on your engagement."),
    "task.drop": OpSpec("A", EngagementRefArgs, "Give up your engagement."),
    "task.judge": OpSpec("A", TaskJudgeArgs, "Judge: adopt or reject a delivery."),
    "task.get": OpSpec("R", TaskGetArgs, "A Task: contract, adoptions, engagements, what you owe and may do."),
    "task.list": OpSpec("R", TaskListArgs, "Page through Tasks you may take, or yours."),
    "engagement.get": OpSpec("R", EngagementGetArgs, "An engagement: state, contract, delivery, verdict."),
    "turn": OpSpec("R", PageArgs, "What you owe now, oldest first, with ids and next step. Start here."),
    "opportunities": OpSpec("R", PageArgs, "Work offered to you by name: assignments addressed to you and restricted Tasks naming you; open Tasks are not listed here (page task_list for them)."),
    "outcomes": OpSpec("R", PageArgs, "How work you took, made or judge ended, newest first."),
    "subscribe": OpSpec("R", SubscribeArgs, "Receive your events as they happen, after a replay of those since a seq (with open_tasks, open Tasks offered too)."),
    # WIRE.md 1.2: webhooks
    "webhook.set": OpSpec("A", WebhookSetArgs, "Send your events to a URL; shows its secret once."),
    "webhook.get": OpSpec("R", WebhookGetArgs, "Your webhook and how delivery goes."),
    "webhook.clear": OpSpec("A", WebhookClearArgs, "Remove your webhook."),
    "search": OpSpec("R", SearchArgs, "Find what you may read."),
    # WIRE.md 1.3: A2A
    "a2a.card.set": OpSpec("A", A2ACardSetArgs, "Publish your A2A agent card: A2A clients may then send you work."),
    "a2a.card.get": OpSpec("R", A2ACardGetArgs, "An A2A agent card (yours, or another's while published) and its URL."),
    "a2a.card.clear": OpSpec("A", A2ACardClearArgs, "Unpublish your A2A agent card."),
    "a2a.send": OpSpec(
        "A", A2ASendArgs, "Send an A2A message: new work for an agent with a card, or your verdict on its delivery."
    ),
    "a2a.cancel": OpSpec("A", A2ATaskRefArgs, "Cancel your A2A task: no new work starts; work under way ends on its own."),
    "a2a.task": OpSpec("R", A2ATaskArgs, "Your A2A task as an A2A Task object: state, deliveries, your messages."),
    "a2a.tasks": OpSpec("R", A2ATasksArgs, "Page through the A2A tasks you sent, the most recently changed first."),
    "a2a.push.set": OpSpec("A", A2APushSetArgs, "Add a push notification config to your A2A task."),
    "a2a.push.list": OpSpec("R", A2ATaskRefArgs, "The push notification configs of your A2A task (no credentials)."),
    "a2a.push.clear": OpSpec("A", A2APushClearArgs, "Remove a push notification config of your A2A task."),
}
ACTION_OPS = frozenset(op for op, s in OPS.items() if s.kind == "A")
