"""The fold of the fact log into every derived row (``kungfud check``, a
migration's rebuild): :func:`derive`.

Object snapshots are the fold of each object's facts through the core's
``apply``; versions count the facts that touched each object; the other
indexes come from :func:`fact_rows` over the log and :func:`state_rows` over
the folded states; the events and their seqs from the feed of each fact in
log order (:func:`~kungfud.store.events.number`), and with them the last event
seq (``meta/events``, the one derived ``meta`` row).

The fold visits every fact of the store, so its loop does per fact only what
the rows need (D396): an object's kind is found by its id's prefix where the
prefix names one kind (else looked up once per id, remembered a while), the
kinds of events a fact makes change only at the few seqs ``meta/event_kinds``
records, and the states are those :class:`~kungfud.store.derived_runs.States`
holds in bounded memory.
"""

from __future__ import annotations

from typing import Any, Callable

from ..core.events import FactEvents
from ..core.facts import member_obj
from ..core.kinds import KINDS, Kind, kind_of
from ..core.members import current
from .derived_runs import States
from .events import KINDS_KEY, enabled, kinds_since, number, rendered
from .events import rows as event_rows
from .indexes import fact_rows, state_rows
from .kv import Snapshot
from .codec import decode_fact, encode_object
from .layout import DERIVED, from_u64, u64
from .quota import TABLE as USAGE
from .quota import add_usage

__all__ = ["derive"]

# The id prefixes that name one kind alone (no sub-objects share them).
_ONLY: dict[str, Kind] = {}
for _k in KINDS:
    if sum(1 for k in KINDS if k.prefix == _k.prefix) == 1 and _k.sub is None:
        _ONLY[_k.prefix] = _k
_SEEN_MAX = 1 << 16


class _Kinds:
    """:func:`~kungfud.core.kinds.kind_of` of the ids the fold meets: by the
    prefix where that decides it, else remembered (the last ``_SEEN_MAX``
    ids asked about). The same ``apply`` and obligations as the core's
    ``apply_to`` and ``of_state``."""

    __slots__ = ("_seen",)

    def __init__(self) -> None:
        self._seen: dict[str, Kind | None] = {}

    def of(self, obj: str) -> Kind | None:
        k = _ONLY.get(obj[:3])
        if k is not None:
            return k
        seen = self._seen
        if obj in seen:
            return seen[obj]
        if len(seen) >= _SEEN_MAX:
            seen.clear()
        k = seen[obj] = kind_of(obj)
        return k

    def apply(self, obj: str, state: Any, fact: Any) -> Any:
        k = self.of(obj)
        if k is None:
            raise KeyError(f"no object kind for id {obj!r}")
        return k.apply(state, fact)

    def state_type(self, obj: str) -> type:
        k = self.of(obj)
        if k is None:
            raise KeyError(f"no object kind for id {obj!r}")
        return k.state

    def obligations(self, obj: str, state: Any) -> list:
        if state is None:
            return []
        k = self.of(obj)
        if k is None or k.obligations is None:
            return []
        return k.obligations(obj, state)


class _Enabled:
    """:func:`~kungfud.store.events.enabled` by seq, found again only when
    the seq passes one of the seqs ``since`` records (D285)."""

    __slots__ = ("_since", "_bounds", "_from", "_until", "_now")

    def __init__(self, since: dict[str, int]):
        self._since = since
        self._bounds = sorted(set(since.values()))
        self._from, self._until = 0, -1  # the current answer holds for these seqs (until: excluded)
        self._now: frozenset[str] | None = None

    def at(self, seq: int) -> frozenset[str] | None:
        if not self._from <= seq < self._until:
            self._now = enabled(self._since, seq)
            self._from = max((b for b in self._bounds if b <= seq), default=-(1 << 64))
            self._until = next((b for b in self._bounds if b > seq), 1 << 64)
        return self._now


def derive(
    kv: Snapshot, put: Callable[[str, bytes, bytes], None], errors: list[str] | None = None,
    tables: tuple[str, ...] = DERIVED, progress: Callable[[int], None] | None = None,
) -> None:
    """Each derived row of ``tables`` (and of ``meta``, :data:`DERIVED_META`)
    the log in ``kv`` makes, handed to ``put(table, key, value)``; a later row
    of one key replaces the earlier. Memory holds the most recently written
    of the objects' states (:class:`~kungfud.store.derived_runs.States`), never
    the rows. With ``errors``, a fact that does not decode or apply is reported
    there and skipped instead of raising. ``progress(seq)`` now and then."""
    kinds = _Kinds()
    with States(types=kinds.state_type) as states:
        _derive(kv, put, errors, frozenset(tables), progress, states, kinds)


def _derive(
    kv: Snapshot, put: Callable[[str, bytes, bytes], None], errors: list[str] | None, wanted: frozenset[str],
    progress: Callable[[int], None] | None, states: States, kinds: "_Kinds",
) -> None:
    usage: dict[bytes, int] = {}
    event_seq = 0
    # D285: a kind recorded after the store began is made from its first fact on.
    kinds_at = _Enabled(kinds_since(kv.get("meta", KINDS_KEY))).at
    indexes = any(t not in ("events", "outcomes") for t in wanted)
    feed_rows = bool(wanted & {"events", "outcomes"})
    apply, obligations = kinds.apply, kinds.obligations
    state_of, get, set_state = states.state, states.get, states.set

    def is_member(thread: str, agent: str) -> bool:
        return current(state_of(member_obj(thread, agent))) is not None

    for n, (k, v) in enumerate(kv.scan("log")):
        if len(k) != 8:
            if errors is None:
                raise ValueError(f"log key {k!r} is not a seq")
            errors.append(f"log: a key that is not a seq: {k[:32]!r}")
            continue
        seq = from_u64(k)
        if progress is not None and not n & 1023:
            progress(seq)
        try:
            fact = decode_fact(v)
            objs = list(fact.objects())
            folded = {}
            befores = {}  # (facts that touched it, state) of each before this fact: read once
            for obj in objs:
                if obj in folded:
                    state = folded[obj]
                else:
                    before = befores[obj] = get(obj)
                    state = before[1]
                folded[obj] = apply(obj, state, fact)
        except Exception as e:  # noqa: BLE001 — a damaged fact is a finding, not a crash
            if errors is None:
                raise
            errors.append(f"log: the fact at seq {seq} does not decode or apply: {type(e).__name__}: {e}")
            continue
        feed = FactEvents(is_member, state_of)
        for obj in objs:
            # An object the fact names twice: the second time, as the first left it.
            version, before = befores.pop(obj) if obj in befores else get(obj)
            after = folded[obj]
            set_state(obj, version + 1, after)
            feed.observe(obj, before, after, fact, obligations)
        if not feed.quiet():  # else no event and no outcome row
            numbered = number(rendered(feed, kinds_at(seq)), event_seq, seq)
            if numbered:
                event_seq = numbered[-1][1]
            if feed_rows:
                for db, key, value in event_rows(feed, seq, numbered):
                    if db in wanted:
                        put(db, key, value)
        if indexes:
            for db, key, value in fact_rows(fact, seq):
                if db in wanted:
                    put(db, key, value)
        add_usage(usage, fact, len(v))
    if USAGE in wanted:
        for key, n in usage.items():
            put(USAGE, key, u64(n))
    if indexes:
        want_objects = "objects" in wanted
        for obj, version, state, row in states.items():
            if want_objects:
                put("objects", obj.encode(), row if row is not None else encode_object(version, state))
            for db, key, value in state_rows(obj, state, obligations):
                if db in wanted:
                    put(db, key, value)
    if event_seq:
        put("meta", b"events", u64(event_seq))
