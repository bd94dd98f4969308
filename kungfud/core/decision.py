"""Build a :class:`Decision` whose new states are, by construction, the fold of its
facts over the states the decision read (L1-1)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .facts import Decision

if TYPE_CHECKING:
    from .context import Ctx

__all__ = ["make", "fold_into"]


def fold_into(states: dict[str, Any], facts: list, get: Any) -> dict[str, Any]:
    from .atoms import apply_to

    for fact in facts:
        for obj in fact.objects():
            current = states[obj] if obj in states else get(obj)
            states[obj] = apply_to(obj, current, fact)
    return states


def make(facts: list, result: dict, ctx: "Ctx") -> Decision:
    return Decision(list(facts), result, fold_into({}, facts, ctx.get))
