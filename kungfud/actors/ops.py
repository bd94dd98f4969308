"""The action table: for each op, which actor owns it, which objects the decision
reads, and which core decision it runs. Adding a protocol action = one row here
plus its core ``decide_*``."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

from ..core import agent, memory
from ..core.context import Ctx
from ..core.facts import Decision
from ..errors import Rejection

__all__ = ["ActionSpec", "ACTIONS", "REGISTRAR"]

REGISTRAR = "ag_registrar"  # actor key serializing registrations (no agent yet)

States = dict[str, Any]
Decide = Callable[[States, Any, Ctx], "Decision | Rejection"]


class ActionSpec(NamedTuple):
    route: Callable[[Any, str | None], str]  # (command, caller) -> actor key
    reads: Callable[[Any], list[str]]  # objects the decision reads (besides the caller)
    decide: Decide


def _by_caller(cmd: Any, caller: str | None) -> str:
    assert caller is not None
    return caller


def _none(cmd: Any) -> list[str]:
    return []


def _memory(cmd: Any) -> list[str]:
    return [cmd.memory]


ACTIONS: dict[str, ActionSpec] = {
    "agent.register": ActionSpec(lambda c, a: REGISTRAR, _none, lambda s, c, ctx: agent.decide_register(c, ctx)),
    "admin.agent.set_status": ActionSpec(
        lambda c, a: c.agent, lambda c: [c.agent], lambda s, c, ctx: agent.decide_set_status(s[c.agent], c, ctx)
    ),
    "memory.create": ActionSpec(_by_caller, _none, lambda s, c, ctx: memory.decide_create(c, ctx)),
    "memory.update": ActionSpec(_by_caller, _memory, lambda s, c, ctx: memory.decide_update(s[c.memory], c, ctx)),
    "memory.publish": ActionSpec(
        _by_caller, _memory, lambda s, c, ctx: memory.decide_set_visibility(s[c.memory], c, ctx)
    ),
    "memory.unpublish": ActionSpec(
        _by_caller, _memory, lambda s, c, ctx: memory.decide_set_visibility(s[c.memory], c, ctx)
    ),
    "memory.withdraw": ActionSpec(_by_caller, _memory, lambda s, c, ctx: memory.decide_withdraw(s[c.memory], c, ctx)),
}
