"""The store's interface: what crosses it, and what a backend provides
(docs/storage.md "The store interface"; L1, L2, L3, L5).

Shaped after eventsourcing's recorder (``persistence.py``): a backend commits a
batch of planned actions atomically and serves reads from consistent
snapshots. Everything an action *means* — receipts, versions, the fold, index
rows, feed rows — is computed once, by :mod:`kungfud.store.plan`, over the tiny
:class:`Tx` protocol (kv.py); so a second backend implements storage, not
protocol rules. Nothing here imports a storage library.

- :class:`Item` is one action ready to write, :data:`Outcome` what became of it.
- :class:`Tx` (:mod:`kungfud.store.kv`) is one open write transaction (or
  savepoint) by table and key, a :class:`Snapshot` one consistent read.
- :class:`Recorder` is the store as the layers above read it: snapshot
  views with named queries, the event-feed tail, the last seq, close.
- :class:`Committer` is the write side: submit (group-committed), write now,
  write a batch on the caller's thread.
- :class:`Backend` is a Recorder that can also write: it opens a
  :class:`WriteTxn` that excludes every other writer; the one write engine,
  :class:`~kungfud.store.writer.Writer` (a Committer), drives any Backend.

The backends are :class:`~kungfud.store.lmdb.LmdbBackend` and
:class:`~kungfud.store.postgres.store.PgBackend`, opened through
:mod:`~kungfud.store.open` (which migrates an older format).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Protocol, runtime_checkable

import msgspec

from ..errors import Rejection
from .integrity import StoreDamaged, log_problems
from .kv import Snapshot, Tx
from .view import View

__all__ = [
    "Item", "Outcome", "Committed", "Replayed", "Stale", "Failed", "mismatch", "replay", "Snapshot", "Tx", "Recorder",
    "Committer", "WriteTxn", "Backend", "SnapshotTail", "is_pg_url",
]


def is_pg_url(url: str | None) -> bool:
    """Whether ``url`` names a PostgreSQL store (else: LMDB; open.py)."""
    return bool(url) and url.split("://", 1)[0] in ("postgresql", "postgres")  # type: ignore[union-attr]


# --- what an action becomes ---------------------------------------------------------


class Committed(msgspec.Struct, frozen=True):
    result: bytes  # JSON of the receipt as first returned (secrets included)
    last_seq: int


class Replayed(msgspec.Struct, frozen=True):
    result: bytes  # the stored receipt, secrets nulled


class Stale(msgspec.Struct, frozen=True):
    obj: str  # an object the decision read moved before the write


class Failed(msgspec.Struct, frozen=True):
    rejection: Rejection


Outcome = Committed | Replayed | Stale | Failed


def mismatch() -> Rejection:
    return Rejection(
        "idempotency_mismatch",
        "this idempotency key was already used for a different request by this agent; use a new key",
        "revise",
    )


def replay(receipt: Any, req_hash: bytes) -> Replayed | Failed:
    """The receipt rule, written once: a request whose receipt exists is
    answered with that receipt's replay (L3-2), or ``idempotency_mismatch``
    when the same key carried another request (L3-3). ``receipt`` is a stored
    :class:`~kungfud.store.layout.Receipt`. The writer applies it in the
    commit; the actors and the runtime apply it to a refusal."""
    return Replayed(receipt.result) if receipt.req_hash == req_hash else Failed(mismatch())


@dataclass(slots=True, kw_only=True, eq=False)
class Item:
    """One action ready to write: its facts, new states and receipt."""

    scope: bytes | None  # receipt key (agent, op, idempotency key); None: no receipt
    req_hash: bytes
    facts: list
    states: dict[str, Any]
    expect: dict[str, int]  # object id -> version the decision saw (0: absent)
    result: dict
    # Called once the outcome is final (on the writer's thread); ``write_now``
    # sets it itself.
    done: Callable[[Outcome], None] | None = None
    # B5: the write must happen before this instant (the earliest deadline
    # among the objects the decision read), else the action is decided again.
    valid_until: int | None = None
    # Objects the decision read from its actor's overlay of in-flight writes:
    # the exact stored form it assumed (compared byte for byte).
    assumed: dict[str, bytes] = field(default_factory=dict)  # type: ignore[assignment]
    # The stored form of each new state as the decider encoded it (version
    # included), if it did: equal bytes prove the fold check cheaply.
    encoded: dict[str, bytes] | None = None
    # The in-flight items whose states this decision read from its actor's
    # overlay: it is written only after each of them was (else Stale). Bytes
    # equal to the assumed ones are not proof when another node writes too
    # (D145). Dropped once the outcome is reported.
    after: list["Item"] | None = None
    written: bool = False  # set by the writer once this item's batch committed
    # The span that made it (a request's RequestSpan, or a deadline's
    # traceparent; tracing on): the events of its facts keep its traceparent
    # as meta.traceparent (WIRE.md 1.3; read only for a fact with events).
    trace: Any = None

    def __post_init__(self) -> None:
        if self.assumed is None:  # callers pass None for "read nothing from an overlay"
            self.assumed = {}


# --- what a backend provides ---------------------------------------------------------


@runtime_checkable
class Committer(Protocol):
    """The write side of a backend: commit batches of planned actions
    atomically, and report each outcome only once its batch is durable.

    What a backend must guarantee (docs/storage.md "The store interface"):
    - an action's facts, object snapshots, index rows, feed rows and receipt
      are written all or nothing (L2-1), in a batch committed at once; a
      failing action never takes its batch-mates down, a failing commit
      acknowledges none of them;
    - nothing is reported before it is durable and visible to a new read
      (L1-4): ``done`` runs after the commit;
    - every action is planned again inside the transaction
      (:func:`kungfud.store.plan.plan` over a :class:`Tx`), so receipts (L3) and
      versions across objects (L5) are checked against committed state plus
      the batch so far: the commit order is the serial order;
    - a storage failure answers ``unavailable`` ("nothing was written").
    """

    batches: int  # batches committed (metrics)
    items: int  # actions reported by committed batches
    committed_seq: int  # the last fact seq it committed (set before its events are published)

    def submit(self, item: Item) -> None:
        """Queue ``item``; its ``done`` is called once with its outcome."""

    def write_now(self, item: Item) -> Outcome:
        """Submit ``item`` and block until its outcome is final."""

    def write_batch(self, items: list[Item]) -> None:
        """Write ``items`` as one group commit on the calling thread (a
        deterministic driver's seam; the writer's own thread must not run)."""

    def start(self) -> None: ...

    def stop(self) -> None:
        """Write what is queued, then stop; later submits fail ``unavailable``."""


@runtime_checkable
class Recorder(Protocol):
    """The store as the layers above read it. ``read()`` yields one consistent
    snapshot, a :class:`~kungfud.store.view.View`, whose named queries are the
    read interface (a check and the content it guards come from one snapshot,
    R9-5, R12-10)."""

    data_dir: str

    def read(self) -> AbstractContextManager["View"]: ...

    def events_for(self, agent: str, after: int) -> Iterator[tuple[int, bytes]]:
        """The event-feed tail: (seq, event JSON) of ``agent``'s feed with
        seq > ``after``, gap-free and in seq order, from one snapshot."""

    def last_seq(self) -> int:
        """The seq of the last committed fact (0 for a store without facts)."""

    def last_event_seq(self) -> int:
        """The seq of the last event (0 for a store without events; WIRE.md 1.2)."""

    def close(self) -> None: ...


class WriteTxn(Protocol):
    """One open write transaction of a :class:`Backend`, or a nested one."""

    tx: Tx

    def nested(self) -> "WriteTxn":
        """A nested transaction (LMDB) or savepoint (PostgreSQL) of this one:
        its abort discards only its own writes; its commit keeps them for this
        transaction to commit or abort."""

    def commit(self) -> None:
        """Durable when it returns (fsync / ``synchronous_commit=on``)."""

    def abort(self) -> None: ...

    def drop_retired(self, name: str) -> None:
        """Drop the table ``name`` of an older storage format
        (:data:`~kungfud.store.layout.RETIRED`) if the store has it; with
        this transaction (the format migration, D186)."""


@runtime_checkable
class Backend(Recorder, Protocol):
    """A :class:`Recorder` that can also write: what the write engine drives."""

    def begin_write(self) -> WriteTxn:
        """Open the write transaction. Once open, it excludes every other writer
        on the same store, in any process or host, until commit or abort (LMDB:
        its writer lock; PostgreSQL: ``pg_advisory_xact_lock`` taken first thing
        in a READ COMMITTED transaction). So the planner's reads of meta/seq,
        receipts and versions see every earlier commit: the commit order is the
        serial order (L5), and fact and event seqs are allocated in commit
        order (no event commits below a seq a subscriber has passed)."""

    def storage_error(self, e: BaseException) -> bool:
        """Whether ``e`` is an expected storage failure (answered
        ``unavailable``, logged without a traceback) — an injected one too."""

    def usage(self) -> tuple[int, int] | None:
        """(bytes used, bytes allowed) of the store, or None if it has no such bound."""

    def require_consistent_log(self) -> None:
        """Raise StoreDamaged if the fact log disagrees with what was written with it."""


class SnapshotTail:
    """``events_for``, ``last_seq`` and the log's cheap check, over a
    :class:`Recorder`'s ``read()``: the same for every backend (each is one
    snapshot's query). A backend names where its store is and how to check it
    (``damage_place``)."""

    def damage_place(self) -> tuple[str, str]:  # pragma: no cover - each backend says
        """(the store as a person finds it, the ``kungfud check`` command for it)."""
        raise NotImplementedError

    def log_problems(self) -> list[str]:
        """Cheap check of the fact log against what was written with it
        (integrity.log_problems); empty when consistent."""
        with self.read() as view:  # type: ignore[attr-defined]
            return log_problems(view.kv)

    def require_consistent_log(self) -> None:
        """Raise StoreDamaged naming the store and the first problems, if any."""
        problems = self.log_problems()
        if problems:
            where, check = self.damage_place()
            more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
            raise StoreDamaged(f"{where} is not consistent: {'; '.join(problems[:3])}{more}; run `{check}` for a full report")

    def events_for(self, agent: str, after: int) -> Iterator[tuple[int, bytes]]:
        """The event-feed tail from one snapshot (interface.Recorder)."""
        with self.read() as view:  # type: ignore[attr-defined]
            yield from view.events_for(agent, after)

    def last_seq(self) -> int:
        with self.read() as view:  # type: ignore[attr-defined]
            return view.last_seq()

    def last_event_seq(self) -> int:
        with self.read() as view:  # type: ignore[attr-defined]
            return view.last_event_seq()
