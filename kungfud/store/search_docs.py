"""What the search index holds, derived from the facts (WIRE.md 1.3 "Search";
docs/decisions.md D348, D351): one document per Memory (its current version),
entry, Task (its current contract) and delivery, and the catch-up from the log
that both engines share (:class:`Applier`).

A document also carries its *scope*: which Thread it is in, the Memory's author
and whether it is public, the parties of a restricted Task or an engagement.
The scope lets the engine leave out, in its own query, matches the caller
certainly may not read (so a search's work follows what the caller may read,
not the whole store). It is a superset, never the decision: the read checks
every match it keeps against its own snapshot (reads/search.py).
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from typing import Any, Iterator, NamedTuple

import msgspec

from ..core import facts as F
from ..core import task_facts as T
from ..core.search import content_text, tokens
from ..errors import Rejection, StoreUnavailable

__all__ = ["Doc", "Applier", "IndexBehind", "documents", "parties", "CHUNK", "BACKLOG"]

log = logging.getLogger("kungfud.store")

CHUNK = 2000  # facts applied per transaction while catching up
BACKLOG = 20_000  # facts a search applies itself; more are applied by a thread (IndexBehind)


class IndexBehind(StoreUnavailable):
    """The index is being caught up from a long backlog of the log, in a thread
    of its own: ``unavailable``, retry shortly."""

    def __init__(self, applied: int, target: int):
        super().__init__(f"search index at fact {applied} of {target}")
        self.applied, self.target = applied, target

    def rejection(self) -> Rejection:
        return Rejection.unavailable(
            f"the search index is being brought up to date from the log (fact {self.applied:,} of "
            f"{self.target:,}); retry in a few seconds"
        )


class Doc(NamedTuple):
    key: str  # what names it in the index: m:<memory>, e:<thread>:<entry>, t:<task>, a:<assignment>, g:<engagement>
    kind: str  # memory | entry | task | delivery
    ids: dict  # the item's ids (a Task's and a Memory's with their version)
    at: int  # when that version, entry, contract or delivery was recorded
    text: str  # every string value of the content (core/search.py content_text)
    thread: str | None  # an entry's or an assignment delivery's Thread
    owner: str | None  # a Memory's author
    public: bool  # a public Memory, an open Task
    parties: str | None  # " ag_a ag_b ": a Task's author, audience and judges; an engagement's parties
    pin: str | None  # an entry's pinned Memory when it is not the entry author's own (R9-10)
    seq: int  # the fact that wrote it: a read leaves out what is past its snapshot


def parties(agents: Any) -> str:
    return " " + " ".join(sorted(set(a for a in agents if a))) + " "


_decode = msgspec.json.decode


def _content(raw: bytes | None) -> str:
    if raw is None:
        return ""
    try:
        return content_text(_decode(raw))
    except msgspec.DecodeError:  # stored content is JSON the daemon checked; json's reading, to be sure
        try:
            return content_text(json.loads(raw))
        except ValueError:
            return ""


def documents(view: Any, seq: int, fact: Any, existing: Any, pinned: Any = None, author: Any = None) -> Iterator[tuple[str, Any]]:
    """What ``fact`` does to the documents: ``("new", Doc)`` (a key never
    written before), ``("put", Doc)`` (written anew), ``("delete", key)`` or
    ``("public", (key, bool))``. ``existing(key)`` is the document the index
    holds (a Memory's visibility, a Task's judges so far come from it);
    ``pinned(memory, version)`` the text of a Memory version and ``author(memory)``
    a Memory's author (by default read from the view). The view's rows read
    here never change (Memory versions, authors, an engagement's parties), so
    the result is the same whenever it is applied."""
    if pinned is None:
        pinned = lambda m, v: _content(view.memory_content(m, v))  # noqa: E731
    if author is None:
        author = lambda m: view.state(m).author  # noqa: E731
    at = fact.at
    end = (None, seq)  # (pin, seq) of every document but an entry
    if isinstance(fact, F.MemoryCreated):
        ids = {"memory": fact.memory, "version": 1}
        yield "new", Doc(f"m:{fact.memory}", "memory", ids, at, _content(fact.content), None, fact.author, False, None, *end)
    elif isinstance(fact, F.MemoryUpdated):
        key = f"m:{fact.memory}"
        old = existing(key)
        owner = old.owner if old is not None else view.state(fact.memory).author
        ids = {"memory": fact.memory, "version": fact.version}
        yield "put", Doc(key, "memory", ids, at, _content(fact.content), None, owner, bool(old and old.public), None, *end)
    elif isinstance(fact, F.MemoryVisibilitySet):
        yield "public", (f"m:{fact.memory}", fact.visibility == "public")
    elif isinstance(fact, F.MemoryWithdrawn):
        yield "delete", f"m:{fact.memory}"
    elif isinstance(fact, F.EntryPosted):
        text = pinned(fact.pin_memory, fact.pin_version)
        ids = {"thread": fact.thread, "entry": fact.entry}
        pin = None if author(fact.pin_memory) == fact.author else fact.pin_memory  # authors never change
        yield "new", Doc(f"e:{fact.thread}:{fact.entry:016d}", "entry", ids, at, text, fact.thread, None, False, None, pin, seq)
    elif isinstance(fact, T.TaskCreated):
        who = parties([fact.author, *(fact.audience or []), fact.contract.judge])
        ids = {"task": fact.task, "version": 1}
        text = _content(fact.contract.content)
        yield "new", Doc(f"t:{fact.task}", "task", ids, at, text, None, None, fact.audience is None, who, *end)
    elif isinstance(fact, T.TaskRevised):
        key = f"t:{fact.task}"
        old = existing(key)
        who = parties([*(old.parties.split() if old is not None and old.parties else []), fact.contract.judge])
        ids = {"task": fact.task, "version": fact.version}
        text = _content(fact.contract.content)
        yield "put", Doc(key, "task", ids, at, text, None, None, bool(old and old.public), who, *end)
    elif isinstance(fact, F.AssignmentDelivered):
        text = pinned(fact.pin_memory, fact.pin_version)
        ids = {"thread": fact.thread, "assignment": fact.assignment}
        yield "new", Doc(f"a:{fact.assignment}", "delivery", ids, at, text, fact.thread, None, False, None, *end)
    elif isinstance(fact, T.EngagementDelivered):
        e = view.state(fact.engagement)
        text = pinned(fact.pin_memory, fact.pin_version)
        ids = {"task": fact.task, "engagement": fact.engagement}
        who = parties([e.author, e.agent, e.judge])
        yield "new", Doc(f"g:{fact.engagement}", "delivery", ids, at, text, None, None, False, who, *end)


def _fingerprint(fact: Any) -> int | None:
    """Which fact this is, as a number (63 bits of its hash): the index records
    its last applied fact's, to know the log it was made from."""
    if fact is None:
        return None
    return int.from_bytes(hashlib.sha256(msgspec.msgpack.encode(fact)).digest()[:8], "big") >> 1


class Applier:
    """The catch-up both engines share: the facts between the seq the index
    records and a read snapshot's last seq, applied in transactions that hold
    the index's one writer lock and record the new seq with the documents.

    The documents a chunk writes are kept here until its end and inserted in
    one batch (:meth:`_insert`, ``executemany``), their words computed once
    per text (a post's entry has its content Memory's text); ``_get``,
    ``_delete`` and ``_set_public`` see them meanwhile. An engine provides the
    transaction, the seq and fingerprint rows, and the stored documents'
    ``_get_stored``/``_delete_stored``/``_set_public_stored``/``_insert``."""

    _applied = 0  # the last seq this process saw applied (a shortcut; the index says)
    _builder: threading.Thread | None = None  # applying a backlog (catch_up with a reader)
    _lock: Any
    _recent: dict  # (memory, version) -> text of the Memory versions just indexed
    _authors: dict  # memory -> author of the Memories just created
    _pending: dict  # key -> Doc to insert at the end of the chunk, in log order
    _last: tuple = ("", "")  # (text, its words) last computed

    def _begin(self) -> None: ...
    def _commit(self) -> None: ...
    def _rollback(self) -> None: ...
    def applied_seq(self) -> int: ...
    def _set_seq(self, seq: int) -> None: ...
    def _get_stored(self, key: str) -> Doc | None: ...
    def _delete_stored(self, key: str) -> None: ...
    def _set_public_stored(self, key: str, public: bool) -> None: ...
    def _insert(self, docs: list[tuple[Doc, str]]) -> None:
        """Insert ``(doc, its words)`` in order, new rows after every other;
        a key already stored is written anew."""
    def _get_fp(self) -> int | None: ...
    def _set_fp(self, fp: int) -> None: ...
    def _wipe(self) -> None: ...

    def catch_up(self, view: Any, reader: Any = None) -> int:
        """Apply the facts of ``view``'s snapshot the index lacks; the seq it
        now reflects. With ``reader`` (the store's ``read``), a backlog of more
        than :data:`BACKLOG` facts is applied by a thread of its own, and
        :class:`IndexBehind` raised meanwhile: a search never holds the event
        loop for long (a store never searched before, a large import)."""
        target = view.last_seq()
        if self._applied >= target:
            return self._applied
        while self._applied < target:
            if reader is not None and target - self._applied > BACKLOG:
                with self._lock:
                    self._applied = max(self._applied, self.applied_seq())  # another process may have caught up
                    self._end()
                if target - self._applied > BACKLOG:
                    self._behind(reader, target)
            self._chunk(view, target)
        return self._applied

    def _chunk(self, view: Any, target: int) -> None:
        """Apply up to :data:`CHUNK` facts in one transaction, under the lock.
        An index whose last applied fact is not this log's (a data directory
        restored from a backup beside a newer index) is emptied first."""
        with self._lock:
            self._recent, self._authors, self._pending = {}, {}, {}
            self._begin()  # the index's writer lock: another process's catch-up waits
            try:
                done = self.applied_seq()
                wiped = 0 < done <= target and _fingerprint(view.fact(done)) != self._get_fp()
                if wiped:
                    log.warning("the search index was not made from this store's log (a restored backup?): rebuilding it")
                    self._wipe()
                    done = 0
                stop = min(target, done + CHUNK)
                last = None
                for seq in range(done + 1, stop + 1):
                    last = view.fact(seq)
                    if last is not None:
                        self._apply(view, seq, last)
                if self._pending:
                    self._insert([(d, self._words(d.text)) for d in self._pending.values()])
                if stop > done:
                    self._set_seq(stop)
                    if last is not None:
                        self._set_fp(_fingerprint(last))
                self._commit()
            except BaseException:
                self._rollback()
                raise
            finally:
                self._pending = {}
            self._applied = stop if wiped else max(self._applied, done, stop)

    def reset(self) -> None:
        """Empty (``kungfud check --rebuild``, before catching up from the start)."""
        with self._lock:
            self._begin()
            try:
                self._wipe()
                self._set_seq(0)
                self._commit()
            except BaseException:
                self._rollback()
                raise
            self._applied = 0

    def _end(self) -> None:
        """End a read-only transaction a read of the seq may have begun."""

    def _behind(self, reader: Any, target: int) -> None:
        with self._lock:
            running = self._builder is not None and self._builder.is_alive()
            if not running:
                self._builder = threading.Thread(target=self._build, args=(reader,), name="kungfud-search-index", daemon=True)
                self._builder.start()
        raise IndexBehind(self._applied, target)

    def _build(self, reader: Any) -> None:
        try:
            while True:
                with reader() as view:  # a snapshot per chunk: no read transaction held for the whole build
                    target = view.last_seq()
                    if self._applied >= target:
                        return
                    self._chunk(view, target)
        except Exception:  # logged; the next search starts another
            log.exception("building the search index failed")

    # --- one document, pending or stored ---

    def _get(self, key: str) -> Doc | None:
        doc = self._pending.get(key)
        return doc if doc is not None else self._get_stored(key)

    def _put(self, doc: Doc, new: bool = False) -> None:
        if not new:
            self._delete(doc.key)  # a new row: rows are in log order (the read's last tie-break)
        self._pending[doc.key] = doc

    def _delete(self, key: str) -> None:
        if self._pending.pop(key, None) is None:
            self._delete_stored(key)

    def _set_public(self, key: str, public: bool) -> None:
        doc = self._pending.get(key)
        if doc is not None:
            self._pending[key] = doc._replace(public=public)
        else:
            self._set_public_stored(key, public)

    def _words(self, text: str) -> str:
        """The normalized words of ``text``, space-separated (what the engines index)."""
        last = self._last
        if text is not last[0] and text != last[0]:
            last = self._last = (text, " ".join(tokens(text)))
        return last[1]

    def _apply(self, view: Any, seq: int, fact: Any) -> None:
        for what, arg in documents(
            view, seq, fact, self._get, lambda m, v: self._pinned(view, m, v), lambda m: self._author(view, m),
        ):
            if what in ("new", "put"):
                self._put(arg, new=what == "new")
                if arg.kind == "memory":  # an entry pinning it usually follows at once (a post's content)
                    self._recent[(arg.ids["memory"], arg.ids["version"])] = arg.text
                    self._authors[arg.ids["memory"]] = arg.owner
                    if len(self._recent) > 64:
                        del self._recent[next(iter(self._recent))]
                    if len(self._authors) > 64:
                        del self._authors[next(iter(self._authors))]
            elif what == "delete":
                self._delete(arg)
            else:
                self._set_public(*arg)

    def _pinned(self, view: Any, memory: str, version: int) -> str:
        text = self._recent.get((memory, version))
        return text if text is not None else _content(view.memory_content(memory, version))

    def _author(self, view: Any, memory: str) -> str:
        owner = self._authors.get(memory)
        return owner if owner is not None else view.state(memory).author
