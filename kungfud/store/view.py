"""The consistent read view every backend shares (:class:`View`): the named
queries over one :class:`~kungfud.store.kv.Snapshot` that everything outside
``store/`` reads through (docs/storage.md "Reads").

One :class:`View` is one snapshot: a permission check and the content it
guards come from the same state (R9-5, R12-10). Writes go through
:class:`~kungfud.store.writer.Writer` (and the webhook runner's cursors through
:mod:`~kungfud.store.hooks`), never through a view.
"""

from __future__ import annotations

import heapq
from itertools import islice
from typing import Any, Iterator

from ..core.kinds import state_type
from ..core.obligations import Obligation
from . import hooks
from .codec import Receipt, decode_agent_key, decode_fact, decode_object, decode_obligation, decode_offer, decode_outcome, decode_receipt
from .events import OPEN
from .indexes import members_listed, query_rows
from .kv import Snapshot, prefix_stop
from .layout import PUBLIC, from_u64, u32, u64

__all__ = ["View"]


class View:
    """Reads over one :class:`~kungfud.store.kv.Snapshot` (a read transaction
    of any backend), through ``get``/``scan``/``count`` only.

    Everything outside ``store/`` reads through the named queries below: they
    take and return plain Python values (ids, numbers, decoded states, and
    opaque ``bytes`` page positions), never a transaction, a cursor or a key, so
    another backend can answer the same questions (docs/storage.md "Reads").
    A page position is whatever the store needs to resume strictly after (or,
    newest first, before) a row; callers only pass back what a query returned.
    """

    __slots__ = ("kv", "recorder")

    def __init__(self, kv: Snapshot, recorder: Any = None):
        self.kv = kv  # for the store's own modules (check, integrity); never outside store/
        self.recorder = recorder  # the store it reads (search's derived index is beside it)

    def last_seq(self) -> int:
        """The seq of the last committed fact."""
        raw = self.kv.get("meta", b"seq")
        return from_u64(raw) if raw else 0

    def last_event_seq(self) -> int:
        """The seq of the last event (WIRE.md 1.2: one daemon-wide sequence)."""
        raw = self.kv.get("meta", b"events")
        return from_u64(raw) if raw else 0

    def version(self, obj: str) -> int:
        raw = self.kv.get("objects", obj.encode())
        return 0 if raw is None else decode_object(raw, state_type(obj))[0]

    def obj(self, obj: str) -> tuple[int, Any]:
        """(version, state); (0, None) for an object that does not exist."""
        raw = self.kv.get("objects", obj.encode())
        if raw is None:
            return 0, None
        return decode_object(raw, state_type(obj))

    def state(self, obj: str) -> Any:
        return self.obj(obj)[1]

    def exists(self, obj: str) -> bool:
        """Whether an object of this id was ever created (objects are never deleted)."""
        key = obj.encode()
        return len(key) <= 511 and self.kv.get("objects", key) is not None

    def receipt(self, scope: bytes) -> Receipt | None:
        raw = self.kv.get("receipts", scope)
        return None if raw is None else decode_receipt(raw)

    def agent_for_key_hash(self, key_hash: bytes) -> str | None:
        raw = self.kv.get("agent_keys", key_hash)
        return None if raw is None else raw.split(b"\x00", 1)[0].decode()

    def key_holder(self, key_hash: bytes) -> tuple[str, str | None, int | None, str | None] | None:
        """(agent, scope, expires_at ms, key_id) of a key's hash (a main key: None for the rest), or None."""
        raw = self.kv.get("agent_keys", key_hash)
        return None if raw is None else decode_agent_key(raw)

    def thread_for_token(self, token_hash: bytes) -> str | None:
        raw = self.kv.get("tokens", token_hash)
        return None if raw is None else raw.decode()

    def events_for(self, agent: str, after: int) -> Iterator[tuple[int, bytes]]:
        """(event seq, event JSON) of ``agent``'s feed with seq > ``after``, in order."""
        prefix = agent.encode() + b"\x00"
        n = len(prefix)
        for key, value in self.kv.scan("events", prefix + u64(after + 1), prefix_stop(prefix)):
            yield from_u64(key[n:]), bytes(value)

    def offers_for(self, agent: str, after: int) -> Iterator[tuple[int, bytes]]:
        """(event seq, event JSON) of the open-Task stream with seq > ``after``
        that are offered to ``agent`` (:meth:`~kungfud.store.codec.Offer.offered_to`), in order."""
        return ((seq, e) for seq, e in self.offer_rows(agent, after) if e is not None)  # type: ignore[misc]

    def offer_rows(self, agent: str, after: int) -> Iterator[tuple[int, bytes | None]]:
        """As :meth:`offers_for`, with (event seq, None) for each row not offered
        to ``agent``: read and passed over, which a bounded read counts (D331)."""
        prefix = OPEN.encode() + b"\x00"
        n = len(prefix)
        for key, value in self.kv.scan("events", prefix + u64(after + 1), prefix_stop(prefix)):
            offer = decode_offer(value)
            yield from_u64(key[n:]), (offer.event if offer.offered_to(agent) else None)

    def feed(
        self, agent: str, after: int, open_tasks: bool = False, *, passed: bool = False
    ) -> Iterator[tuple[int, bytes | None]]:
        """(event seq, event JSON) of what ``agent`` hears after ``after``, in
        seq order: its own events, and with ``open_tasks`` the open-Task
        stream's offers to it merged in (WIRE.md 1.2; ``passed``: with the rows
        passed over, :meth:`offer_rows`). Close it before the view ends (its cursors)."""
        own = self.events_for(agent, after)
        if not open_tasks:
            yield from own
            return
        offers = self.offer_rows(agent, after) if passed else self.offers_for(agent, after)
        try:
            yield from heapq.merge(own, offers, key=lambda e: e[0])
        finally:
            own.close()
            offers.close()

    def fact(self, seq: int) -> Any:
        raw = self.kv.get("log", u64(seq))
        return None if raw is None else decode_fact(raw)

    def fact_at_or_before(self, seq: int) -> Any:
        """The last fact with a seq at most ``seq`` (an event's seq is at least
        its fact's, D200: this is that fact or a later one); None if none."""
        for _, raw in self.kv.scan("log", b"", u64(seq + 1), reverse=True):
            return decode_fact(raw)
        return None

    def memory_content(self, memory: str, version: int) -> bytes | None:
        raw = self.kv.get("versions", memory.encode() + b"\x00" + u32(version))
        if raw is None:
            return None
        return self.fact(from_u64(raw)).content

    # --- scans: one owner's rows of an index, in key order --------------------------

    def _after(self, db: str, prefix: bytes, after: bytes | None, values: bool = True) -> Iterator[tuple[bytes, bytes]]:
        """(key suffix, value) of the rows under ``prefix``, strictly after the
        suffix ``after`` (from the first with None), in key order."""
        start = prefix if after is None else prefix + after + b"\x00"  # the first key after the position's
        n = len(prefix)
        for key, value in self.kv.scan(db, start, prefix_stop(prefix), values=values):
            yield key[n:], value

    def _before(self, db: str, prefix: bytes, before: bytes | None) -> Iterator[tuple[bytes, bytes]]:
        """(key suffix, value) of the rows under ``prefix``, newest (last key)
        first, strictly before the suffix ``before`` (from the last with None)."""
        # Without a position: the first key past the range.
        upper = prefix + before if before is not None else prefix_stop(prefix)
        n = len(prefix)
        for key, value in self.kv.scan(db, prefix, upper, reverse=True):
            yield key[n:], value

    def memories_of(self, author: str, after: str | None, *, public: bool = False) -> Iterator[str]:
        """Memory ids of ``author`` still listed (``public``: only its public
        ones, D233), in creation order, after ``after``."""
        prefix = author.encode() + (PUBLIC if public else b"\x00")
        for suffix, _ in self._after("memories", prefix, after.encode() if after else None, False):
            yield suffix.decode()

    def agents(self, after: str | None) -> Iterator[str]:
        """Every agent id, in id order (= creation order: ids are time-ordered),
        after ``after``. Agents are the ``ag_…`` objects without a sub-object
        suffix (``ag_….threads``)."""
        start = after.encode() + b"\x00" if after else b"ag_"
        for key, _ in self.kv.scan("objects", start, prefix_stop(b"ag_"), values=False):
            if b"." not in key:
                yield key.decode()

    def memberships(self, agent: str, after: str | None) -> Iterator[tuple[str, str]]:
        """(thread, role) of ``agent``'s current memberships, in Thread id order,
        after the Thread ``after``."""
        for suffix, role in self._after("memberships", agent.encode() + b"\x00", after.encode() if after else None):
            yield suffix.decode(), role.decode()

    def is_member(self, agent: str, thread: str) -> bool:
        """Whether ``agent`` is a current member of ``thread`` (one index lookup)."""
        key = agent.encode() + b"\x00" + thread.encode()
        return self.kv.get("memberships", key) is not None

    def obligations_of(self, holder: str, after: bytes | None) -> Iterator[tuple[bytes, Obligation]]:
        """(position, obligation) of ``holder``'s open obligations, in the order
        they arose (R8-7), after the position ``after``."""
        for pos, value in self._after("obligations", holder.encode() + b"\x00", after):
            yield pos, decode_obligation(value)

    def opportunities_of(self, agent: str, after: bytes | None) -> Iterator[tuple[bytes, str, str]]:
        """(position, assignment or Task id, its Thread or the Task) of
        ``agent``'s opportunities rows, in id order, after the position ``after``."""
        for pos, value in self._after("opportunities", agent.encode() + b"\x00", after):
            yield pos, pos.decode(), value.decode()

    def outcomes_of(self, party: str, before: bytes | None) -> Iterator[tuple[bytes, str | None, bytes]]:
        """(position, Thread gating it or None, outcome item JSON) of ``party``'s
        ended work, newest first, before the position ``before``."""
        for pos, value in self._before("outcomes", party.encode() + b"\x00", before):
            row = decode_outcome(value)
            yield pos, row.thread, row.item

    @staticmethod
    def outcome_position(pos: bytes) -> bool:
        """Whether ``pos`` has the shape of an ``outcomes_of`` position (a seq
        and an assignment or engagement id), so a made-up one is refused."""
        ident = pos[8:]
        return len(pos) <= 80 and ident[:3] in (b"as_", b"en_") and ident[3:].isalnum() and ident.isascii()

    def engagements_of(self, task: str, agent: str | None = None, *, newest: bool = False, limit: int) -> list[str]:
        """Engagement ids of ``task`` (only ``agent``'s, when given), in the
        order they were taken: the oldest ``limit``, or with ``newest`` the newest."""
        prefix = (agent.encode() + b"\x00" if agent is not None else b"") + task.encode() + b"\x00"
        rows = self._before("engagements", prefix, None) if newest else self._after("engagements", prefix, None, False)
        out = [suffix.decode() for suffix, _ in islice(rows, limit)]
        return out[::-1] if newest else out

    def adopted(self, task: str, after: str | None) -> Iterator[str]:
        """Adopted engagement ids of ``task``, in id order, after ``after``."""
        for suffix, _ in self._after("adopted", task.encode() + b"\x00", after.encode() if after else None, False):
            yield suffix.decode()

    def push_tasks(self) -> Iterator[tuple[str, str]]:
        """(author, task) of every A2A Task with a push config (WIRE.md 1.3)."""
        for key, _ in self.kv.scan("a2a_push", values=False):
            author, _, task = bytes(key).decode().partition("\x00")
            yield author, task

    def a2a_changed(self, author: str, before: tuple[int, str] | None) -> Iterator[tuple[int, str]]:
        """(last change, task) of ``author``'s A2A Tasks, newest first, before ``before`` (D410)."""
        pos = None if before is None else u64(before[0]) + before[1].encode()
        for suffix, _ in self._before("a2a_changed", author.encode() + b"\x00", pos):
            yield from_u64(suffix[:8]), suffix[8:].decode()

    def tasks_for(self, agent: str, mine: bool, after: str | None) -> Iterator[str]:
        """Task ids in id order after ``after``: with ``mine``, those ``agent``
        authored; else those it may be offered, open ones and restricted ones
        naming it."""
        start = after.encode() if after else None

        def under(prefix: bytes, kind: bytes) -> Iterator[str]:
            return (s.decode() for s, k in self._after("tasks", prefix, start) if k == kind)

        if mine:
            yield from under(agent.encode() + b"\x00", b"author")
            return
        last = None
        for tk in heapq.merge(under(b"*\x00", b"open"), under(agent.encode() + b"\x00", b"named")):
            if tk != last:
                yield tk
            last = tk

    def deadlines(self) -> Iterator[tuple[int, str, str]]:
        """(due ms, object id, owner actor key) of every running deadline, the
        earliest first."""
        for key, value in self.kv.scan("deadlines"):
            yield from_u64(key[:8]), key[8:].decode(), value.decode()

    def query(
        self, name: str, key: str, limit: int | None = None, party: str | None = None, skip: Any = ()
    ) -> list[tuple[Any, str]]:
        """A named collection query of the core (core/queries.py: a Thread's
        governors, speakers, pending responses, live assignments and running
        deadlines; an agent's memberships), answered from the index rows:
        ``(answer, id of the object whose state gave it)`` in the query's order.
        Rows of objects in ``skip`` are left out (the caller answers for them)."""
        return query_rows(self.kv, name, key, limit, party, skip)

    def members_listed(self, thread: str, limit: int) -> list[str]:
        """The first ``limit`` current members of ``thread`` in the order they
        joined (ties: by agent id; D90)."""
        return members_listed(self.kv, thread, limit)

    def hook_cursor(self, agent: str) -> Any:
        """The webhook runner's :class:`~kungfud.store.hooks.Cursor` of ``agent`` (None: none yet)."""
        return hooks.cursor_of(self.kv, agent)

    def hooked_agents(self) -> Iterator[str]:
        """Every agent with a webhook endpoint, in id order."""
        return hooks.hooked_agents(self.kv)

    def count(self, index: str) -> int:
        """Rows in one index (``obligations``: open obligations; ``deadlines``:
        running deadlines; docs/storage.md)."""
        return self.kv.count(index)
