"""Build a :class:`Decision` whose new states are, by construction, the fold of its
facts over the states the decision read (L1-1).

How a fact changes an object depends on the object's kind, and the one table of
kinds (:mod:`kungfud.core.kinds`) sits above every concept module: the concept
modules decide, the table folds. So the table hands its fold down here once,
when the package is imported (``core/__init__.py``), and no concept module
imports the table — the core's imports all point one way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from .facts import Decision

if TYPE_CHECKING:
    from .context import Ctx

__all__ = ["make", "fold_into", "use"]

Apply = Callable[[str, Any, Any], Any]  # (object id, its state or None, fact) -> its new state
_apply: list[Apply] = []


def use(apply_to: Apply) -> None:
    """Called once by :mod:`kungfud.core.kinds`: how any object's state follows a fact."""
    _apply[:] = [apply_to]


def fold_into(states: dict[str, Any], facts: list, get: Any) -> dict[str, Any]:
    (apply_to,) = _apply
    for fact in facts:
        for obj in fact.objects():
            current = states[obj] if obj in states else get(obj)
            states[obj] = apply_to(obj, current, fact)
    return states


def make(facts: list, result: dict, ctx: "Ctx") -> Decision:
    return Decision(list(facts), result, fold_into({}, facts, ctx.get))
