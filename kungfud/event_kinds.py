"""The events, defined once (WIRE.md "Event", §8 R8-20; D285): every kind is
one type of the tagged union :data:`AnyEvent`, its tag the kind. Everything else
that names kinds derives them from here — the wire's ``WebhookEvent``
(``webhook.set {events}``), the core's defaults, ``kungfu wake --on``, the
console's ``/console/events.js`` (served from :func:`kinds`), and the one
reading of a stored event's kind (:func:`kind_of`).

Which events a fact makes, for whom, is the pure core's
(:mod:`kungfud.core.events`); their seqs and rows are the store's
(:mod:`kungfud.store.events`). This module depends on nothing of kungfud's,
so every layer may import it: the wire and the clients too.

An event is stored and framed as its JSON: ``{"event": kind, "data": …}``
(the tag first, as msgspec writes it); the frame a subscriber or a webhook
receives puts the seq first (:func:`frame`). Adding a kind: docs/architecture.md
"Adding an event kind".
"""

from __future__ import annotations

from typing import Any, ClassVar, Union, get_args

import msgspec

__all__ = [
    "Event", "Turn", "TurnData", "Ended", "Opportunity", "Outcome", "TaskOffered", "Offered", "A2ATask", "A2ATaskData",
    "AnyEvent", "KINDS", "DEFAULT_KINDS", "ORIGINAL_KINDS", "kind_of", "frame", "encode",
]


class Event(msgspec.Struct, frozen=True, tag_field="event"):
    """One event, without its seq. Each kind says, as class variables:

    - ``default``: whether a webhook (``webhook.set`` without ``events``) and
      ``kungfu wake`` (without ``--on``) take it;
    - ``original``: whether it is made for every fact of a store, whenever the
      fact was written — true of the kinds a store had before kinds were
      recorded (format 5, D285). A kind added later is made only for the facts
      written from the first time a daemon that knows it wrote to the store:
      no event before it is renumbered (docs/storage.md "Event kinds")."""

    default: ClassVar[bool] = False
    original: ClassVar[bool] = False


class Ended(msgspec.Struct, frozen=True):
    """An obligation that ended, and why (named after the fact that ended it)."""

    obligation_id: str
    why: str


class TurnData(msgspec.Struct, frozen=True):
    added: list[dict[str, Any]]  # obligation items (kungfud.core.shapes.obligation_item)
    ended: list[Ended]


class Turn(Event, frozen=True, tag="turn"):
    """The holder's obligations this fact added and ended (R8-20, R8-21)."""

    default: ClassVar[bool] = True
    original: ClassVar[bool] = True
    data: TurnData


class Opportunity(Event, frozen=True, tag="opportunity"):
    """An untaken assignment addressed to the agent, or a restricted Task
    naming it (kungfud.core.shapes.opportunity_item)."""

    default: ClassVar[bool] = True
    original: ClassVar[bool] = True
    data: dict[str, Any]


class Outcome(Event, frozen=True, tag="outcome"):
    """The terminal state a piece of work reached, to its other parties
    (WIRE.md 1.1 "Outcomes"): the outcome item's JSON, as the ``outcomes``
    index keeps it (kungfud.core.shapes.outcome_item)."""

    default: ClassVar[bool] = True
    original: ClassVar[bool] = True
    data: msgspec.Raw


class Offered(msgspec.Struct, frozen=True):
    task: str
    author: str
    contract_version: int
    at: str  # RFC 3339


class TaskOffered(Event, frozen=True, tag="task_offered"):
    """An open-audience Task that starts or resumes taking engagements
    (WIRE.md 1.2), content-free; stored once, on the open-Task stream, for
    whoever asked for open Tasks (``subscribe {open_tasks}``, a webhook or
    ``kungfu wake --on`` naming it)."""

    original: ClassVar[bool] = True
    data: Offered


class A2ATaskData(msgspec.Struct, frozen=True):
    task: str
    state: str  # spelled as A2A does: TASK_STATE_WORKING, …
    generation: int
    at: str  # RFC 3339


class A2ATask(Event, frozen=True, tag="a2a_task"):
    """An A2A-visible change of an A2A Task, to its author (WIRE.md 1.3
    "A2A"), content-free; heard by who asks for it (``subscribe {a2a: true}``,
    a webhook or ``kungfu wake --on`` naming it)."""

    data: A2ATaskData


#: Every kind of event, one type each; the tag is the kind. The order is the
#: order kinds are listed in (``webhook.set``, ``kungfu wake --on``, the console).
AnyEvent = Union[Turn, Opportunity, Outcome, TaskOffered, A2ATask]

_TYPES: tuple[type[Event], ...] = get_args(AnyEvent)
KINDS: tuple[str, ...] = tuple(t.__struct_config__.tag for t in _TYPES)  # type: ignore[misc]
DEFAULT_KINDS: tuple[str, ...] = tuple(t.__struct_config__.tag for t in _TYPES if t.default)  # type: ignore[misc]
ORIGINAL_KINDS: tuple[str, ...] = tuple(t.__struct_config__.tag for t in _TYPES if t.original)  # type: ignore[misc]

_json = msgspec.json.Encoder()
encode = _json.encode  # an event's stored JSON


class _Head(msgspec.Struct):
    event: str


_head = msgspec.json.Decoder(_Head)


def kind_of(event: bytes) -> str:
    """The kind of a stored event's JSON. Stored events begin
    ``{"event":"<kind>",`` (the tag first): read the name without decoding
    the rest; anything else is decoded."""
    if event.startswith(b'{"event":"'):
        end = event.find(b'"', 10)
        if end > 0:
            return event[10:end].decode()
    return _head.decode(event).event


def frame(seq: int, event: bytes) -> bytes:
    """The frame of a stored event with its seq, ``{"seq":N,"event":…,"data":…}``
    (WIRE.md "Event"): what a subscriber receives, and a webhook's body after
    its ``agent``."""
    return b'{"seq":%d,' % seq + event[1:]
