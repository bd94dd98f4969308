"""``search`` (WIRE.md 1.3 "Search"): words, phrases and prefixes over what the
caller may read at the moment of the read (§9, L6, R12-9).

The derived index (:mod:`kungfud.store.search_index`) is caught up from the
log to this read's snapshot, then gives the documents matching all terms within
the caller's scope, newest first. Each is checked against the same snapshot
with the rules the other reads use (``memory.get``, ``thread.entry``,
``task.get``, ``assignment.get``, ``engagement.get``); the newest
:data:`WINDOW` the caller may read are scored from their own text alone
(:func:`kungfud.core.search.score`) and ordered: score, then newest first (time,
then the order the log wrote them). So the items, their count, order and scores
are a function of the documents the caller may read, whatever else exists; the
cursor is the sort position of the page's last item, sealed (reads/cursors.py)
for this caller, op and query (docs/decisions.md D345–D351).
"""

from __future__ import annotations

import hashlib
import heapq
import struct
from typing import Any

from ..core.timestamps import rfc3339
from ..core.engagement import is_party
from ..core.facts import member_obj
from ..core.members import current, readable_thread
from ..core.search import KINDS, parse, score, snippet
from ..core.task import may_read_contract
from ..core.visibility import may_read_memory
from ..errors import Rejection
from ..store.view import View
from . import cursors

__all__ = ["search", "WINDOW"]

WINDOW = 10_000  # matches ranked at most: the newest the caller may read (D351)
_BATCH = 2_000  # matches read from the index at once
_POS = struct.Struct(">dqq4s")  # score, at, the document's place in the index, query hash


class _Readable:
    """§9 over one snapshot, for one caller, with each Thread's membership read once.
    A match is already within the caller's scope as the index holds it
    (search_docs.Doc): here it is decided on the snapshot, reading no more
    than the rule needs."""

    def __init__(self, view: View, caller: str):
        self.view = view
        self.caller = caller
        self._member: dict[str, bool] = {}

    def member(self, thread: str) -> bool:
        m = self._member.get(thread)
        if m is None:
            m = self._member[thread] = current(self.view.state(member_obj(thread, self.caller))) is not None
        return m

    def __call__(self, kind: str, ids: dict, pin: str | None) -> bool:
        v, me = self.view, self.caller
        if kind == "memory":  # the current version only, while memory.get reads it (never withdrawn)
            s = v.state(ids["memory"])
            return s is not None and s.valid and s.latest == ids["version"] and may_read_memory(s, me, None)
        if kind == "entry":  # a member's entry, its pinned content readable (R9-10)
            if not self.member(ids["thread"]):
                return False
            if pin is None:  # the author's own Memory: readable by the Thread's readers always
                return True
            s = v.state(pin)  # another agent's: while it is valid and public
            return s is not None and s.valid and s.visibility == "public"
        if kind == "task":  # the current contract, where §9 allows (R9-13, R9-14)
            t = v.state(ids["task"])
            return t is not None and t.latest == ids["version"] and may_read_contract(t, me)
        if "assignment" in ids:  # a delivery, to the Thread's current members (R9-11)
            return self.member(ids["thread"])
        e = v.state(ids["engagement"])  # a delivery, to its parties (R9-16)
        return e is not None and is_party(e, me)


def _newest_readable(index: Any, readable: _Readable, *query: Any) -> list[tuple]:
    """The newest :data:`WINDOW` matches the caller may read (newest: the last
    the log wrote), examined in batches from the newest: which they are depends
    only on the documents the caller may read (D351)."""
    found: list[tuple] = []
    before = None
    while True:
        batch = index.matches(*query, before, _BATCH)
        for m in batch:
            if readable(m[1], m[2], m[4]):
                found.append(m)
                if len(found) == WINDOW:
                    return found
        if len(batch) < _BATCH:
            return found
        before = batch[-1][0]


def _query_hash(q: str, kinds: tuple[str, ...], thread: str | None) -> bytes:
    return hashlib.sha256(f"{q}\x00{','.join(kinds)}\x00{thread or ''}".encode()).digest()[:4]


def search(index: Any, view: View, caller: str, args: Any, now: int) -> dict | Rejection:
    terms = parse(args.q)
    if isinstance(terms, Rejection):
        return terms
    kinds = tuple(k for k in KINDS if args.in_ is None or k in args.in_)
    if not kinds:
        return Rejection.bad_request(f"`in` names no kind: give some of {', '.join(KINDS)}, or leave it out for all")
    if args.thread is not None:
        r = readable_thread(view.state(args.thread), args.thread, view.state(member_obj(args.thread, caller)))
        if r is not None:
            return r
    qh = _query_hash(args.q, kinds, args.thread)
    after: tuple[float, int, int] | None = None
    if args.cursor is not None:
        pos = cursors.unseal("search", caller, args.cursor) if cursors.is_sealed(args.cursor) else None
        if pos is None or len(pos) != _POS.size or pos[24:] != qh:
            return cursors.bad_cursor()
        s, at, doc_id, _ = _POS.unpack(pos)
        after = (-s, -at, -doc_id)
    index.catch_up(view, view.recorder.read if view.recorder is not None else None)
    threads = [args.thread] if args.thread is not None else [t for t, _ in view.memberships(caller, None)]
    readable = _Readable(view, caller)
    found = _newest_readable(index, readable, terms, kinds, caller, threads, view.last_seq(), args.thread)
    words = index.words([m[0] for m in found])
    ranked = []
    for doc_id, kind, ids, at, _ in found:
        sort = (-score(words.get(doc_id, "").split(), terms), -at, -doc_id)
        if after is None or sort > after:
            ranked.append((sort, kind, ids))
    page = heapq.nsmallest(args.limit + 1, ranked, key=lambda r: r[0])
    shown = page[: args.limit]
    texts = index.texts([-sort[2] for sort, _, _ in shown])
    items = [_item(sort, kind, ids, texts.get(-sort[2], ""), terms) for sort, kind, ids in shown]
    cursor = None
    if len(page) > args.limit:
        (s, at, doc_id) = shown[-1][0]
        cursor = cursors.seal("search", caller, _POS.pack(-s, -at, -doc_id, qh))
    return {"items": items, "cursor": cursor}


def _item(sort: tuple[float, int, int], kind: str, ids: dict, text: str, terms: list) -> dict:
    out: dict[str, Any] = {"kind": kind}
    out.update(ids)
    if kind == "task":
        del out["version"]  # a Task's item names the Task (task.get reads its current contract)
    out["at"] = rfc3339(-sort[1])
    out["snippet"] = snippet(text, terms)
    out["score"] = -sort[0]
    return out
