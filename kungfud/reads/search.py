"""``search`` (WIRE.md 1.3 "Search"): words, phrases and prefixes over what the
caller may read at the moment of the read (§9, L6, R12-9).

The derived index (:mod:`kungfud.store.search_index`) is caught up from the
log to this read's snapshot, then gives every document matching all terms.
Each match is checked against the same snapshot with the rules the other reads
use (``memory.get``, ``thread.entry``, ``task.get``, ``assignment.get``,
``engagement.get``); only then is it scored, from its own text alone
(:func:`kungfud.core.search.score`), and ordered: score, then newest first
(time, then the order the log wrote them). So the items, their count, order and scores are a function of
the documents the caller may read, whatever else exists; the cursor is the
sort position of the page's last item, sealed (reads/cursors.py) for this
caller, op and query (docs/decisions.md D345–D348).
"""

from __future__ import annotations

import hashlib
import heapq
import struct
from typing import Any

from ..core.clock import rfc3339
from ..core.engagement import is_party
from ..core.facts import entry_obj, member_obj
from ..core.members import current, readable_thread
from ..core.search import KINDS, parse, score, snippet
from ..core.task import may_read_contract
from ..core.visibility import may_read_memory
from ..errors import Rejection
from ..store.store import View
from . import cursors
from .thread import pin_content

__all__ = ["search"]

_POS = struct.Struct(">dqq4s")  # score, at, the document's place in the index, query hash


class _Readable:
    """§9 over one snapshot, for one caller, with each Thread's membership read once."""

    def __init__(self, view: View, caller: str):
        self.view = view
        self.caller = caller
        self._member: dict[str, bool] = {}

    def member(self, thread: str) -> bool:
        m = self._member.get(thread)
        if m is None:
            m = self._member[thread] = current(self.view.state(member_obj(thread, self.caller))) is not None
        return m

    def __call__(self, kind: str, ids: dict) -> bool:
        v, me = self.view, self.caller
        if kind == "memory":  # the current version only, while memory.get reads it (never withdrawn)
            s = v.state(ids["memory"])
            return s is not None and s.valid and s.latest == ids["version"] and may_read_memory(s, me, None)
        if kind == "entry":  # a member's entry, with its pinned content readable (R9-10)
            if not self.member(ids["thread"]):
                return False
            e = v.state(entry_obj(ids["thread"], ids["entry"]))
            return e is not None and pin_content(v, e.author, e.pin_memory, e.pin_version) is not None
        if kind == "task":  # the current contract, where §9 allows (R9-13, R9-14)
            t = v.state(ids["task"])
            return t is not None and t.latest == ids["version"] and may_read_contract(t, me)
        if "assignment" in ids:  # a delivery, to the Thread's current members (R9-11)
            a = v.state(ids["assignment"])
            return a is not None and a.pin_memory is not None and self.member(a.thread)
        e = v.state(ids["engagement"])  # a delivery, to its parties (R9-16)
        return e is not None and e.pin_memory is not None and is_party(e, me)


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
    index.catch_up(view)
    readable = _Readable(view, caller)
    found = [m for m in index.matches(terms, kinds, args.thread) if readable(m[2], m[3])]
    texts = index.texts([m[0] for m in found])
    ranked = []
    for doc_id, key, kind, ids, at in found:
        text = texts.get(doc_id, "")
        sort = (-score(text, terms), -at, -doc_id)
        if after is None or sort > after:
            ranked.append((sort, kind, ids, text))
    page = heapq.nsmallest(args.limit + 1, ranked, key=lambda r: r[0])
    items = [_item(sort, kind, ids, text, terms) for sort, kind, ids, text in page[: args.limit]]
    cursor = None
    if len(page) > args.limit:
        (s, at, doc_id) = page[args.limit - 1][0]
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
