"""§5 Memory: content with one author, evolving through immutable versions.

A Memory is valid or withdrawn, private or public (R5-1…R5-15). Creation makes
version 1, private (R5-2). Only the author updates (a new version, R5-3),
publishes/unpublishes (R5-4) and withdraws (R5-5). Withdrawal is terminal (R5-6,
DECISIONS.md B15). Visibility belongs to the whole Memory (R5-9). Who may read
which version is :mod:`kungfud.core.visibility`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import msgspec

from ..errors import DecisionRefused, Rejection, rejects
from .context import acting, fits
from .facts import Decision, Fact, MemoryCreated, MemoryUpdated, MemoryVisibilitySet, MemoryWithdrawn
from .visibility import may_read_memory

if TYPE_CHECKING:
    from .context import Ctx

__all__ = [
    "MemoryState",
    "CreateMemory",
    "Update",
    "SetVisibility",
    "Withdraw",
    "apply",
    "decide_create",
    "decide_update",
    "decide_set_visibility",
    "decide_withdraw",
]


class MemoryState(msgspec.Struct, frozen=True):
    memory: str
    author: str
    latest: int
    status: Literal["valid", "withdrawn"]
    visibility: Literal["private", "public"]
    created_at: int

    @property
    def valid(self) -> bool:
        return self.status == "valid"


class CreateMemory(msgspec.Struct, frozen=True):
    content: bytes


class Update(msgspec.Struct, frozen=True):
    memory: str
    content: bytes


class SetVisibility(msgspec.Struct, frozen=True):
    memory: str
    visibility: Literal["private", "public"]


class Withdraw(msgspec.Struct, frozen=True):
    memory: str


@rejects
def decide_create(cmd: CreateMemory, ctx: "Ctx") -> Decision:
    me = acting(ctx)
    fits(cmd.content, ctx)
    memory = ctx.new_id("me_")
    fact = MemoryCreated(at=ctx.now, by=me, memory=memory, author=me, content=cmd.content)
    return Decision([fact], {"memory": memory, "version": 1, "visibility": "private"}, {memory: apply(None, fact)})


def _authored(state: MemoryState | None, ident: str, ctx: "Ctx", verb: str) -> tuple[MemoryState, str]:
    """The author alone changes a Memory; others learn only what §9 lets them read."""
    me = acting(ctx)
    if state is None or not may_read_memory(state, me, None):
        raise DecisionRefused(Rejection.not_found("memory", ident))
    if state.author != me:
        raise DecisionRefused(Rejection.forbidden(f"only the author of memory {ident} may {verb} it"))
    return state, me


@rejects
def decide_update(state: MemoryState | None, cmd: Update, ctx: "Ctx") -> Decision:
    state, me = _authored(state, cmd.memory, ctx, "update")
    if not state.valid:
        raise DecisionRefused(Rejection.conflict(f"memory {cmd.memory} is withdrawn; withdrawal is terminal", rule="R5-6"))
    fits(cmd.content, ctx)
    fact = MemoryUpdated(at=ctx.now, by=me, memory=cmd.memory, version=state.latest + 1, content=cmd.content)
    return Decision([fact], {"memory": cmd.memory, "version": fact.version}, {cmd.memory: apply(state, fact)})


@rejects
def decide_set_visibility(state: MemoryState | None, cmd: SetVisibility, ctx: "Ctx") -> Decision:
    verb = "publish" if cmd.visibility == "public" else "unpublish"
    state, me = _authored(state, cmd.memory, ctx, verb)
    if not state.valid:
        raise DecisionRefused(Rejection.conflict(f"memory {cmd.memory} is withdrawn and cannot be {verb}ed"))
    if state.visibility == cmd.visibility:
        # WIRE.md: an action that would change nothing is a conflict (L2-7).
        raise DecisionRefused(Rejection.conflict(f"memory {cmd.memory} is already {cmd.visibility}"))
    fact = MemoryVisibilitySet(at=ctx.now, by=me, memory=cmd.memory, visibility=cmd.visibility)
    return Decision([fact], {"memory": cmd.memory, "visibility": cmd.visibility}, {cmd.memory: apply(state, fact)})


@rejects
def decide_withdraw(state: MemoryState | None, cmd: Withdraw, ctx: "Ctx") -> Decision:
    state, me = _authored(state, cmd.memory, ctx, "withdraw")
    if not state.valid:
        raise DecisionRefused(Rejection.conflict(f"memory {cmd.memory} is already withdrawn"))
    fact = MemoryWithdrawn(at=ctx.now, by=me, memory=cmd.memory)
    return Decision([fact], {"memory": cmd.memory, "status": "withdrawn"}, {cmd.memory: apply(state, fact)})


def apply(state: MemoryState | None, fact: Fact) -> MemoryState:
    rep = msgspec.structs.replace
    match fact:
        case MemoryCreated():
            assert state is None
            return MemoryState(fact.memory, fact.author, 1, "valid", "private", fact.at)
    assert state is not None
    match fact:
        case MemoryUpdated(version=version):
            assert state.valid and version == state.latest + 1
            return rep(state, latest=version)
        case MemoryVisibilitySet(visibility=visibility):
            return rep(state, visibility=visibility)
        case MemoryWithdrawn():
            return rep(state, status="withdrawn")
    raise TypeError(f"memory cannot apply {type(fact).__name__}")
