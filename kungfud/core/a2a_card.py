"""An agent's A2A card (WIRE.md 1.3 "A2A": ``a2a.card.set/get/clear``).

The card is the state of the agent's sub-object ``ag_….a2a``, folded from
:class:`CardSet` and :class:`CardCleared` like the webhook registration
(:mod:`kungfud.core.webhook`): durable, rebuilt by ``kungfud check``. It holds
what the agent publishes (``content``: name, description, skills — opaque JSON
bytes, L6) and who may send it work (``accept``: None for anyone, else the
named agents). An agent without a card is served nothing over A2A, and looks
exactly like an agent that does not exist (:func:`published`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from ..errors import DecisionRefused, Rejection, rejects
from .agent import require_active
from .context import fits
from .facts import Decision, Fact

if TYPE_CHECKING:
    from .context import Ctx

__all__ = [
    "CardState", "CardSet", "CardCleared", "SetCard", "ClearCard", "card_obj", "card_url", "published",
    "no_card", "decide_set", "decide_clear", "apply",
]

_SUB = ".a2a"
#: The path of a card under ``[a2a] public_url`` (WIRE.md 1.3 "Endpoints").
CARD_PATH = "/a2a/agents/{agent}/.well-known/agent-card.json"


def card_obj(agent: str) -> str:
    """The agent's card sub-object (no wire id contains ``.a2a``)."""
    return agent + _SUB


def card_url(base: str, agent: str) -> str:
    """The URL of ``agent``'s card under the advertised base."""
    return base.rstrip("/") + CARD_PATH.format(agent=agent)


class CardSet(Fact, frozen=True, tag="a2a.card_set"):
    agent: str
    content: bytes  # {name, description, skills?} as JSON
    accept: list[str] | None  # None: any agent may send work

    def objects(self) -> tuple[str, ...]:
        return (card_obj(self.agent),)


class CardCleared(Fact, frozen=True, tag="a2a.card_cleared"):
    agent: str

    def objects(self) -> tuple[str, ...]:
        return (card_obj(self.agent),)


class CardState(msgspec.Struct, frozen=True):
    agent: str
    content: bytes | None = None  # None: no card (cleared)
    accept: list[str] | None = None
    set_at: int = 0


class SetCard(msgspec.Struct, frozen=True):
    content: bytes
    accept: list[str] | None


class ClearCard(msgspec.Struct, frozen=True):
    pass


def no_card(agent: str) -> Rejection:
    """The one answer for an agent that does not exist and an agent without a
    card: the same bytes either way (WIRE.md 1.3)."""
    return Rejection.not_found("a2a agent", agent)


def published(state: CardState | None) -> bool:
    return state is not None and state.content is not None


@rejects
def decide_set(cmd: SetCard, ctx: "Ctx") -> Decision | Rejection:
    """``a2a.card.set``: the caller's card, replacing any."""
    if (r := require_active(ctx)) is not None:
        raise DecisionRefused(r)
    assert ctx.caller is not None
    agent = ctx.caller.agent
    fits(cmd.content, ctx, "the card's content")
    if cmd.accept is not None and len(set(cmd.accept)) != len(cmd.accept):
        raise DecisionRefused(Rejection.bad_request("`accept.agents` names an agent more than once (in `accept`)"))
    obj = card_obj(agent)
    before = ctx.get(obj)  # its version guards a concurrent set or clear (L5)
    fact = CardSet(at=ctx.now, by=agent, agent=agent, content=cmd.content, accept=cmd.accept)
    result = {"agent": agent, "card_url": card_url(ctx.limits.a2a_public_url, agent)}
    return Decision([fact], result, {obj: apply(before, fact)})


@rejects
def decide_clear(cmd: ClearCard, ctx: "Ctx") -> Decision | Rejection:
    """``a2a.card.clear``: no card any more (also when there was none). Tasks
    already made through A2A go on; no new ones can be sent."""
    if (r := require_active(ctx)) is not None:
        raise DecisionRefused(r)
    assert ctx.caller is not None
    agent = ctx.caller.agent
    obj = card_obj(agent)
    before = ctx.get(obj)
    fact = CardCleared(at=ctx.now, by=agent, agent=agent)
    return Decision([fact], {"cleared": True}, {obj: apply(before, fact)})


def apply(state: CardState | None, fact: Fact) -> CardState:
    if isinstance(fact, CardSet):
        return CardState(fact.agent, fact.content, fact.accept, fact.at)
    if isinstance(fact, CardCleared):
        return CardState(fact.agent)
    raise TypeError(f"a2a card cannot apply {type(fact).__name__}")
