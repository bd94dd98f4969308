"""What a writer carries from one batch to the next (D281): the ``usage``
totals it committed (:mod:`kungfud.store.quota`) and the objects it read or
wrote, so that an agent's next action, or the next post into a busy Thread,
is checked without reading again what this writer itself just committed.

Only while nothing else wrote the store. Every change of an object or of a
total is a fact, and every batch with facts moves the store's fact seq
(``meta``/``seq``), so a batch that begins at a seq other than the one this
writer's last commit left — another worker's or node's commit between the
two, or a batch of this writer that did not commit — forgets everything and
reads the store again. What is carried is what the store held at that seq,
so a version check against it (L5) is the check against the store.
"""

from __future__ import annotations

import itertools
from typing import Any

__all__ = ["Carried", "LIMIT", "BUDGET"]

# Objects (and agents' totals) carried at most, and the bytes of the objects'
# stored forms; past either the least recently carried are forgotten (read
# again as they come). Stored forms past MAX_BYTES are not carried.
LIMIT = 40_000
BUDGET = 16 * 1024 * 1024
MAX_BYTES = 64 * 1024


class Carried:
    __slots__ = ("seq", "totals", "objects", "size")

    def __init__(self) -> None:
        self.seq: int | None = None
        self.totals: dict[str, int] = {}  # agent -> its usage total, as committed
        # id -> (stored form, version, state), as committed; least recently carried first
        self.objects: dict[str, tuple[bytes, int, Any]] = {}
        self.size = 0  # bytes of the stored forms in ``objects``

    def at(self, seq: int) -> "Carried":
        """What may be used by a batch that begins at fact seq ``seq``."""
        if seq != self.seq:
            self.forget()
        return self

    def read(self, obj: str, raw: bytes, version: int, state: Any) -> None:
        """An object as the store holds it: read by the batch (committed before
        it), or written by a batch that committed."""
        objects = self.objects
        old = objects.pop(obj, None)
        if old is not None:
            self.size -= len(old[0])
        if len(raw) <= MAX_BYTES:
            objects[obj] = (raw, version, state)
            self.size += len(raw)
            if len(objects) > LIMIT or self.size > BUDGET:
                self._shed()

    def _shed(self) -> None:
        """Forget the least recently carried eighth (issue 38 §4: forgetting
        everything at the bound made a writer serving more busy objects than
        the bound read every one of them again, round after round)."""
        objects = self.objects
        drop = max(1, len(objects) // 8)
        for key in list(itertools.islice(objects, drop)):
            self.size -= len(objects.pop(key)[0])
        while objects and (len(objects) > LIMIT or self.size > BUDGET):
            self.size -= len(objects.pop(next(iter(objects)))[0])

    def committed(self, seq: int, totals: dict[str, int], objects: list[Any]) -> None:
        """A batch committed, leaving fact seq ``seq``: its payers' ``totals``
        and the planned ``objects`` it wrote are the store's now."""
        if len(self.totals) + len(totals) > LIMIT:
            self.totals.clear()
        self.totals.update(totals)
        for o in objects:
            self.read(o.id, o.stored, o.version, o.state)
        self.seq = seq

    def forget(self) -> None:
        self.totals.clear()
        self.objects.clear()
        self.size = 0
        self.seq = None
