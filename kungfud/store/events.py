"""The stored events and outcomes (WIRE.md "Event", §8 R8-20; WIRE.md 1.1
"Outcomes"): their seqs, keys and rows. Which events a fact makes, for whom and
what each says is the pure core's (:class:`~kungfud.core.events.FactEvents`);
this module numbers them and lays them out.

Every event has its own seq from one daemon-wide sequence (:func:`number`,
WIRE.md 1.2), allocated in commit order with the fact, and is stored as one row
under (agent, event seq) in the same transaction, so it can be rebuilt from the
log (``kungfud check``); a ``task_offered`` event once, under the reserved key
:data:`OPEN` (``*``), as an :class:`Offer`. The same fact's ended work yields
the ``outcomes`` index: one row per party and ended piece of work, keyed
(party, seq, id), holding the outcome item exactly as the event shows it — so
the ``outcomes`` read pages it newest first at a cost that does not grow with
history.

Which kinds a store makes for which facts (D285): the kinds a store had before
kinds were recorded (``original``) for every fact; a kind added later only for
the facts written from the first batch a writer that knows it committed, whose
first fact seq it records (``meta/event_kinds``, :func:`record_kinds`) in that
batch. ``kungfud check`` rebuilds with the same rule (:func:`enabled`), so a new
kind moves no seq of an event made before it and needs no format step
(docs/storage.md "Event kinds").
"""

from __future__ import annotations

from ..core.assignment import AssignmentState
from ..core.events import OPEN, FactEvents, outcome_parties
from ..event_kinds import KINDS, ORIGINAL_KINDS, encode, kind_of
from .codec import Offer, OutcomeRow, decode_kinds, encode_kinds, encode_offer, encode_outcome
from .layout import u64

__all__ = [
    "event_key", "outcome_key", "OutcomeRow", "Offer", "OPEN", "number", "rendered", "rows",
    "KINDS_KEY", "record_kinds", "kinds_since", "enabled",
]


def event_key(agent: str, seq: int) -> bytes:
    return agent.encode() + b"\x00" + u64(seq)


def number(rendered: list[tuple[str, bytes]], last: int, fact_seq: int) -> list[tuple[str, int, bytes]]:
    """The events of the fact ``fact_seq``, in order, each with its own event
    seq (WIRE.md 1.2, D200): one more than the event before it (``last``), but
    never below the fact's seq — so every event seq is at least the seq of the
    fact that made it, and a client that kept a seq from before format 4 (a
    fact seq) resumes without missing an event. A pure function of the log,
    so ``kungfud check`` rebuilds the same seqs."""
    out = []
    for agent, event in rendered:
        last = max(last + 1, fact_seq)
        out.append((agent, last, event))
    return out


def rendered(made: FactEvents, kinds: frozenset[str] | None = None) -> list[tuple[str, bytes]]:
    """(agent or :data:`OPEN`, event JSON) of the events ``made``, in order;
    with ``kinds``, only the events of those kinds (``check``'s rebuild of a
    fact written before a later kind was recorded: :func:`enabled`)."""
    out = [(agent, encode(event)) for agent, event in made.made()]
    if kinds is not None:
        out = [(agent, event) for agent, event in out if kind_of(event) in kinds]
    return out


def outcome_key(agent: str, seq: int, ident: str) -> bytes:
    return agent.encode() + b"\x00" + u64(seq) + ident.encode()


def rows(made: FactEvents, seq: int, numbered: list[tuple[str, int, bytes]]) -> list[tuple[str, bytes, bytes]]:
    """The derived rows of one fact (fact ``seq``, its events ``numbered`` by
    :func:`number`): one ``events`` row per event, under (agent, event seq) —
    a ``task_offered`` event once, under (:data:`OPEN`, event seq), as an
    :class:`Offer` —, and one ``outcomes`` row per party of each piece of work
    it ended."""
    offers = iter(made.offer_bars() if any(agent == OPEN for agent, _, _ in numbered) else ())
    out = []
    for agent, eseq, event in numbered:
        if agent == OPEN:
            barred, eligibility = next(offers)
            event = encode_offer(Offer(barred, eligibility, event))
        out.append(("events", event_key(agent, eseq), event))
    for state, _, item in made.outcomes():
        ident = state.assignment if isinstance(state, AssignmentState) else state.engagement
        value = encode_outcome(OutcomeRow(state.thread if isinstance(state, AssignmentState) else None, item))
        for agent in outcome_parties(state):
            out.append(("outcomes", outcome_key(agent, seq, ident), value))
    return out


# --- which kinds for which facts (D285) ------------------------------------------

#: ``meta`` key of the first fact seq each recorded kind is made for (msgpack
#: {kind: seq}); not derived: it says which derivation wrote the log's events.
KINDS_KEY = b"event_kinds"


def kinds_since(raw: bytes | None) -> dict[str, int]:
    """The stored ``meta/event_kinds`` row as {kind: first fact seq}; a store
    from before it was written makes every original kind for every fact."""
    since = {kind: 0 for kind in ORIGINAL_KINDS}
    if raw is not None:
        since.update(decode_kinds(raw))
    return since


def record_kinds(raw: bytes | None, next_seq: int) -> bytes | None:
    """The ``meta/event_kinds`` row a writer that knows :data:`KINDS` puts in its
    first batch, whose first fact is ``next_seq``: every kind the row lacks is
    made from that fact on (an original kind from the start); None when the row
    already has them all."""
    since = kinds_since(raw)
    if raw is not None and all(kind in since for kind in KINDS):
        return None
    for kind in KINDS:
        since.setdefault(kind, next_seq)
    return encode_kinds(since)


def enabled(since: dict[str, int], seq: int) -> frozenset[str] | None:
    """The kinds the fact ``seq`` makes events of, by ``since``: None when that
    is every kind this daemon knows (the writer's case, after
    :func:`record_kinds`)."""
    kinds = frozenset(kind for kind, first in since.items() if first <= seq)
    return None if kinds.issuperset(KINDS) else kinds

