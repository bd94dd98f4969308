"""Pinning one version of one Memory (R5-8), or creating a private Memory from
inline content in the same action (WIRE.md "Conventions").

Entries may pin another agent's Memory only when the poster may read that version
now — the current version of a valid public Memory (DECISIONS.md B12);
deliveries pin the taker's own Memories (R6.4-22). Withdrawal stops new
references (R5-11).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import msgspec

from ..errors import DecisionRefused, Rejection, rejects
from .context import acting, fits
from .facts import Fact, MemoryCreated
from .visibility import may_read_memory

if TYPE_CHECKING:
    from .context import Ctx

__all__ = ["Pin", "resolve_pin"]


class Pin(msgspec.Struct, frozen=True):
    """Exactly one of ``memory`` (with an optional ``version``: the current one
    when omitted) or ``content``."""

    memory: str | None = None
    version: int | None = None
    content: bytes | None = None


@rejects
def resolve_pin(pin: Pin, ctx: "Ctx", purpose: Literal["entry", "delivery"]) -> tuple[list[Fact], str, int]:
    """The facts a pin adds (a new Memory for inline content), and the (memory,
    version) it pins; a :class:`~kungfud.errors.Rejection` when it may not."""
    me = acting(ctx)
    if pin.content is not None:
        fits(pin.content, ctx)
        memory = ctx.new_id("me_")
        return [MemoryCreated(at=ctx.now, by=me, memory=memory, author=me, content=pin.content)], memory, 1
    assert pin.memory is not None  # the wire admits exactly one of memory and content
    state = ctx.get(pin.memory)
    if state is None or not may_read_memory(state, me, pin.version):
        shown = pin.memory if pin.version is None else f"{pin.memory} version {pin.version}"
        raise DecisionRefused(Rejection.not_found("memory", shown))
    if not state.valid:
        raise DecisionRefused(Rejection.conflict(f"memory {pin.memory} is withdrawn; withdrawal stops new references", rule="R5-11"))
    if purpose == "delivery" and state.author != me:
        raise DecisionRefused(Rejection.forbidden(
            f"a delivery pins the taker's own Memories; memory {pin.memory} is not yours", rule="R6.4-22"
        ))
    return [], pin.memory, pin.version if pin.version is not None else state.latest
