"""Lifecycles as tables: one mechanism for the state machines of work (§6.4, §7.3).

An assignment (R6.4-*) and an engagement (R7.3-*) each declare their own
:class:`Lifecycle` — the spec keeps them distinct concepts (R2), so they share
this mechanism, not a table. A table holds, in one place:

- ``transitions``: per state, the verbs it allows and the state each leads to;
- ``parties``: per verb, the one agent who may do it (the taker delivers, the
  creator or the judge judges), any other refused as ``forbidden`` — checked
  before the state (D5: permission before state);
- ``refusals``: why a (state, verb) pair the table has no move for is refused,
  with its ``next`` and rule, worded as the spec's clients read it;
- ``deadlines``: per running state, the field holding when it falls due and
  what it ends as then (L4, R6.4-12…14, R7.3-10, R7.3-18).

Terminal states are derived: a state with no verb and no deadline (R6.4-17,
R7.3-24). A passed deadline wins over any verb (L4-3, B5), so the refusal of
work a deadline ended names when it passed, whether or not its expiry is
recorded yet. As in h11's ``_state.py``, a test walks every (state, verb) pair.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from ..errors import Next, DecisionRefused, Rejection
from .timestamps import deadline_passed

__all__ = ["Refusal", "Party", "Deadline", "Lifecycle", "due"]


@dataclass(frozen=True, slots=True)
class Refusal:
    """A ``conflict``: ``reason`` with ``{it}`` standing for "<kind> <id>"."""

    reason: str
    next: Next = "stop"
    rule: str | None = None

    def rejection(self, it: str) -> Rejection:
        return Rejection("conflict", self.reason.format(it=it), self.next, rule=self.rule)


@dataclass(frozen=True, slots=True)
class Party:
    """Who alone may do a verb: the agent ``getattr(state, field)`` names; anyone
    else is ``forbidden`` with ``reason`` (``{it}`` as in :class:`Refusal`)."""

    field: str
    reason: str
    rule: str | None = None


@dataclass(frozen=True, slots=True)
class Deadline:
    """While in its state, the work falls due at ``getattr(state, field)`` and
    then ends as ``outcomes[0]`` (a concept may refine which, B21). ``unless``
    names a field that is set when a verb, not this deadline, reached one of
    the ``outcomes`` (an engagement adopted by its judge, not by expiry)."""

    field: str
    outcomes: tuple[str, ...]
    unless: str | None = None


class Lifecycle:
    def __init__(
        self,
        name: str,
        states: Iterable[str],
        transitions: Mapping[str, Mapping[str, str]],
        refusals: Mapping[tuple[str | tuple[str, ...], str | tuple[str, ...]], Refusal],
        deadlines: Mapping[str, Deadline],
        parties: Mapping[str | tuple[str, ...], Party],
        final_rule: str | None = None,
    ) -> None:
        self.name = name
        self.states = frozenset(states)
        self.transitions = {s: dict(moves) for s, moves in transitions.items()}
        self.deadlines = dict(deadlines)
        self.terminal = self.states - set(self.transitions) - set(self.deadlines)
        self.final_rule = final_rule
        self.parties = {v: party for verbs, party in parties.items() for v in _each(verbs)}
        self.refusals: dict[tuple[str, str], Refusal] = {}
        for (states_, verbs), refusal in refusals.items():
            for s in _each(states_):
                for v in _each(verbs):
                    self.refusals[(s, v)] = refusal
        assert all(s in self.states for s in (*self.transitions, *self.deadlines)), name
        assert all(t in self.states for m in self.transitions.values() for t in m.values()), name
        assert not any(v in self.transitions.get(s, {}) for s, v in self.refusals), f"{name}: a move is also refused"
        assert not any(s in self.terminal for s, _ in self.refusals), f"{name}: a terminal state refuses alike"
        assert set(self.parties) == self.verbs, f"{name}: every verb has its one party"

    @property
    def verbs(self) -> frozenset[str]:
        return frozenset(v for moves in self.transitions.values() for v in moves)

    def allows(self, state: str, verb: str) -> bool:
        return verb in self.transitions.get(state, {})

    def check(self, obj: Any, verb: str, me: str | None = None) -> str:
        """The state ``verb`` leads ``obj`` to, or :class:`DecisionRefused`: first, when
        ``me`` is given, unless ``me`` is the verb's party (forbidden), then
        unless the state allows the verb (conflict)."""
        if me is not None:
            self.require_party(obj, verb, me)
        to = self.transitions.get(obj.state, {}).get(verb)
        if to is None:
            raise DecisionRefused(self.refusal(obj, verb))
        return to

    def require_party(self, obj: Any, verb: str, me: str) -> None:
        party = self.parties[verb]
        if getattr(obj, party.field) != me:
            raise DecisionRefused(Rejection.forbidden(party.reason.format(it=self._it(obj)), rule=party.rule))

    def refusal(self, obj: Any, verb: str) -> Rejection:
        """Why ``verb`` does not apply to ``obj`` in its state: its final state,
        else the table's refusal for the pair."""
        if obj.state in self.terminal:
            return self.final(obj)
        refusal = self.refusals.get((obj.state, verb))
        if refusal is None:
            # Pairs the decide functions' guards keep out (e.g. delivering an
            # assignment nobody took is refused as "forbidden" first).
            refusal = Refusal(f"{{it}} is {obj.state.replace('_', ' ')}; it does not allow {verb} now")
        return refusal.rejection(self._it(obj))

    def final(self, obj: Any, name: str | None = None) -> Rejection:
        """The refusal of any verb on ended work. ``name``: the state as of now
        when a deadline passed but its expiry is not recorded yet — then the same
        refusal as after the expiry (WIRE.md 1.1 "Wording of rejections")."""
        name = name or obj.state
        for dl in self.deadlines.values():
            if name in dl.outcomes and (dl.unless is None or getattr(obj, dl.unless) is None):
                if (at := getattr(obj, dl.field)) is not None:
                    return deadline_passed(self.name, self._id(obj), name, at)
        return Rejection.conflict(
            f"{self._it(obj)} is {obj.state.replace('_', ' ')}; that state is final", rule=self.final_rule
        )

    def due(self, obj: Any) -> int | None:
        """When ``obj``'s current state falls due, or None."""
        dl = self.deadlines.get(obj.state)
        return None if dl is None else getattr(obj, dl.field)

    def effective(self, obj: Any, now: int) -> str:
        """The state as of ``now``: a passed deadline wins even before its expiry
        fact is recorded (L4-3), so no reader ever sees an expired obligation."""
        at = self.due(obj)
        return self.deadlines[obj.state].outcomes[0] if at is not None and at <= now else obj.state

    def _id(self, obj: Any) -> str:
        return getattr(obj, self.name)

    def _it(self, obj: Any) -> str:
        return f"{self.name} {self._id(obj)}"


def _each(key: str | tuple[str, ...]) -> tuple[str, ...]:
    return (key,) if isinstance(key, str) else key


def due(live: Mapping[str, Any], now: int) -> list[str]:
    """The ids among ``live`` (id → a record with ``due``) whose deadline is at or
    before ``now``, in the order they fell due (ties by id)."""
    return [i for _, i in sorted((lv.due, i) for i, lv in live.items() if lv.due is not None and lv.due <= now)]
