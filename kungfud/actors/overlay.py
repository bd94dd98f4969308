"""What an actor's decision reads: one view of the store with the actor's
overlay of in-flight writes laid over it (pipelining, :mod:`.object_actor`),
recording the version of every object read (L5), the exact stored form of
every overlay object read, and the earliest deadline among the Threads and
Tasks read (B5)."""

from __future__ import annotations

from typing import Any

from ..core.kinds import kind_of
from ..core.queries import answering, answers, order
from ..store import Item
from ..store.view import View

__all__ = ["Reads", "owns_deadlines"]


def owns_deadlines(obj: str) -> bool:
    k = kind_of(obj)
    return k is not None and k.deadlines is not None


class Reads:
    """``ctx.get`` over one view and the actor's overlay, recording every version
    read (L5) and the earliest deadline among the Threads and Tasks read (B5)."""

    __slots__ = (
        "view", "overlay", "expect", "assumed", "states", "valid_until", "owners", "used_overlay", "after", "dues"
    )

    def __init__(self, view: View, overlay: "dict[str, tuple[int, Any, bytes, Item]] | None" = None):
        self.view = view
        self.overlay = overlay or {}
        self.expect: dict[str, int] = {}
        # Overlay objects read: the exact stored form the decision assumes. A
        # version number alone is not enough: another actor can reach the same
        # version with another state just as our own in-flight write fails.
        self.assumed: dict[str, bytes] = {}
        self.states: dict[str, Any] = {}
        self.valid_until: int | None = None
        self.owners: list[str] = []  # Threads and Tasks read that have a running deadline
        self.used_overlay = False
        # The in-flight items whose overlay states this decision read (D145).
        self.after: dict[int, Item] = {}
        # Each Thread's earliest running deadline, once found: one view and one
        # overlay answer alike for the life of these reads.
        self.dues: dict[str, int | None] = {}

    def query(self, name: str, key: str, limit: int | None = None, party: str | None = None) -> list[Any]:
        """A named query (Ctx.query, core/queries.py): the view's index rows,
        with the overlay's in-flight objects answering for themselves. It
        records no version: the decision's read of the Thread (or
        ``ag_….threads``) guards it (D90, D93)."""
        prefix, suffix = answering(name, key)
        mine: list[tuple[str, list[Any]]] = []
        for obj, entry in self.overlay.items():
            if obj.startswith(prefix) and obj.endswith(suffix):
                got = answers(name, key, party, entry[1])
                # An object created in flight (version 1) that answers nothing
                # has no row in the view either, or the same state's: it
                # neither answers nor hides a row (an untaken assignment of a
                # deadline query, say), and the decision does not depend on it.
                if got or entry[0] > 1:
                    mine.append((obj, got))
                    self.after[id(entry[3])] = entry[3]
        if not mine:
            return [answer for answer, _ in self.view.query(name, key, limit, party)]
        rows = self.view.query(name, key, limit, party, {obj for obj, _ in mine})
        out = order(name, [a for a, _ in rows] + [a for _, got in mine for a in got])
        return out if limit is None else out[:limit]

    def next_due(self, obj: str, state: Any) -> int | None:
        """The earliest running deadline of a Thread or a Task: its first ``due`` row (D93, D271)."""
        if obj not in self.dues:
            rows = self.query("due", obj, 1)
            self.dues[obj] = rows[0][0] if rows else None
        return self.dues[obj]

    def get(self, obj: str) -> Any:
        if obj in self.states:
            return self.states[obj]
        if obj in self.overlay:
            entry = self.overlay[obj]
            version, state = entry[0], entry[1]
            self.assumed[obj] = entry[2]
            self.after[id(entry[3])] = entry[3]
            self.used_overlay = True
        else:
            try:
                version, state = self.view.obj(obj)
            except KeyError:  # an id of no known kind names nothing
                return None
        self.expect[obj] = version
        self.states[obj] = state
        if state is not None and owns_deadlines(obj) and (due := self.next_due(obj, state)) is not None:
            self.valid_until = due if self.valid_until is None else min(self.valid_until, due)
            self.owners.append(obj)
        return state
