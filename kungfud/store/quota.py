"""Capacity limits per agent and the store's reserve (R12-11, L4-5; D240–D242).

What an agent can spend is the bytes of facts its actions recorded: the length
of each encoded log row it caused (participant content included — the log is
append-only, so this is what fills the disk). The ``usage`` table holds one row
per agent that ever acted, ``agent id -> u64 total``; it is derived (the sum
over the log's facts of :func:`payer`), written in the same transaction as the
facts that spend it, so it is exact across restarts and across every process
writing one store (LMDB workers, PostgreSQL nodes: the writer's lock orders
them), and ``kungfud check`` rebuilds and compares it like every index.

The planner (:func:`kungfud.store.plan.plan`) asks :meth:`Room.spend` for each
action, inside the write transaction and before anything of it is written:

- **per agent**: an action that would take its agent past its limit — the
  smaller of ``[limits] max_bytes_per_agent`` and
  ``max_store_percent_per_agent`` of the store's size, where the store has one
  (LMDB: the map; PostgreSQL: ``[storage] capacity_mb``; the backend's
  ``fill()``) — is refused ``rate_limited`` with nothing written;
- **reserve**: once the store is within ``[storage] reserve_percent`` of its
  size, an ordinary agent's action is refused ``unavailable`` with nothing
  written, so that deadline facts (no agent pays for them) and operator
  (admin) actions still commit.

Admin agents pay (their usage is counted) but are held to neither limit. Nor
is an agent's own exit from its obligations — leaving a Thread, handling a
response, dropping work it took — which L4-1 says must never depend on another
party (raising a limit is the operator's); exits are counted all the same, and
each ends an obligation someone else's action (which paid) created. Two bounds
keep that exemption from being a way to fill the store (D325):

- an exit is exempt only while it carries no content: a ``thread.handle`` with
  a note writes participant text beyond ending the obligation, so it counts
  like any other write (refused with ``next: revise`` — the same handle
  without its note is accepted);
- exits may use the reserve down to its last half (``floor``), never into it:
  obligations can be stocked up in advance while there is room, so their exits
  could otherwise fill the reserve, and that last half is for deadline facts
  and operators only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.agent import AgentState
from ..core.facts import AgentRegistered, AssignmentDropped, MembershipEnded, ResponseHandled
from ..core.task_facts import EngagementDropped
from ..errors import Rejection
from .codec import decode_object
from .layout import from_u64, u64

__all__ = ["TABLE", "RULE", "Quota", "Room", "payer", "is_exit", "add_usage"]

TABLE = "usage"
RULE = "R12-11"  # every refusal of this module carries it (the writer counts them for /metrics)

Row = tuple[str, bytes, bytes]
_MIB = 1024 * 1024


def payer(fact: Any) -> str | None:
    """The agent whose capacity ``fact`` spends: the agent that acted; for a
    self-registration (recorded with no actor) the new agent; None for deadline
    facts and the daemon's own (its admin bootstrap)."""
    if fact.by is not None:
        return fact.by
    if isinstance(fact, AgentRegistered) and not fact.admin:
        return fact.agent
    return None


def is_exit(fact: Any) -> bool:
    """Whether ``fact`` is its actor's own exit from obligations (L4-1, L4-4),
    carrying no content: never refused by the per-agent limit, and by the
    reserve only at its floor (D325)."""
    if isinstance(fact, MembershipEnded):
        return fact.why == "left" and fact.agent == fact.by
    if isinstance(fact, ResponseHandled):
        return fact.agent == fact.by and not fact.note
    return isinstance(fact, (AssignmentDropped, EngagementDropped))


def _noted_exit(fact: Any) -> bool:
    """An own ``thread.handle`` that carries a note: the exit without the note would pass."""
    return isinstance(fact, ResponseHandled) and fact.agent == fact.by and bool(fact.note)


def add_usage(totals: dict[bytes, int], fact: Any, size: int) -> None:
    """Count a fact of ``size`` encoded bytes into ``totals`` (agent id -> bytes)."""
    who = payer(fact)
    if who is not None:
        key = who.encode()
        totals[key] = totals.get(key, 0) + size


@dataclass(frozen=True, slots=True)
class Quota:
    """The configured limits (0: none). ``Quota()`` limits nothing: the usage
    is still counted."""

    agent_bytes: int = 0  # [limits] max_bytes_per_agent
    agent_percent: int = 0  # [limits] max_store_percent_per_agent, of the store's size
    reserve_percent: int = 0  # [storage] reserve_percent, of the store's size

    def agent_limit(self, capacity: int | None) -> int | None:
        limits = []
        if self.agent_bytes:
            limits.append(self.agent_bytes)
        if self.agent_percent and capacity:
            limits.append(capacity * self.agent_percent // 100)
        return min(limits) if limits else None

    def reserve(self, capacity: int | None) -> int:
        return capacity * self.reserve_percent // 100 if capacity else 0

    def room(self, usage: tuple[int, int] | None) -> "Room":
        """What one batch may spend, given the store's ``(used, size)`` bytes
        as it begins (None: a store with no size of ours)."""
        used, capacity = usage if usage is not None else (0, None)
        return Room(self, used, capacity)


class Room:
    """One batch's view of the limits: the store's fill as the batch began plus
    what the batch wrote since, and each agent's usage as the batch has it."""

    __slots__ = ("quota", "used", "capacity", "limit", "reserve", "usage", "known")

    def __init__(self, quota: Quota, used: int, capacity: int | None):
        self.quota = quota
        self.used = used
        self.capacity = capacity
        self.limit = quota.agent_limit(capacity)
        self.reserve = quota.reserve(capacity)
        self.usage: dict[str, int] = {}  # agent -> bytes, as written so far in this batch
        # agent -> bytes committed before the batch, as its writer carried them
        # over (BatchState sets it: kungfud/store/carried.py)
        self.known: dict[str, int] = {}

    def spend(self, tx: Any, facts: list[Any], sizes: list[int]) -> dict[str, int] | Rejection:
        """The new totals of the agents an action whose facts encode to
        ``sizes`` bytes spends the capacity of, or the refusal (nothing
        written). Their ``usage`` rows are put once per batch (:meth:`rows`)."""
        if len(facts) == 1:  # most actions: one fact, one payer
            who = payer(facts[0])
            if who is None:
                return {}
            spent = {who: sizes[0]}
        else:
            spent = {}
            for fact, size in zip(facts, sizes):
                who = payer(fact)
                if who is not None:
                    spent[who] = spent.get(who, 0) + size
            if not spent:
                return {}  # deadline facts and the daemon's own: always written
        totals = {who: self._usage(tx, who) + n for who, n in spent.items()}
        limit = self.limit
        after = self.used + sum(spent.values())
        over_reserve = bool(self.reserve) and self.capacity is not None and after > self.capacity - self.reserve
        # Far from every limit (most actions): nothing more to read or decide.
        if not over_reserve and (limit is None or all(total <= limit for total in totals.values())):
            return totals
        if all(is_exit(f) for f in facts):
            # Content-free exits pass every limit but the reserve's floor (D325).
            if not over_reserve or self.capacity is None or after <= self.capacity - self.reserve // 2:
                return totals
        # Whether a payer is an admin is read only when a limit would refuse.
        noted = any(_noted_exit(f) for f in facts) and (
            not over_reserve or self.capacity is None or after <= self.capacity - self.reserve // 2
        )
        if over_reserve and not all(_is_admin(tx, facts, who) for who in spent):
            return self._reserve_refusal(noted)
        if limit is not None:
            for who, total in totals.items():
                if total > limit and not _is_admin(tx, facts, who):
                    return self._agent_refusal(who, total - spent[who], spent[who], noted)
        return totals

    def advance(self, totals: dict[str, int], written: int) -> None:
        """Record a written action: its payers' totals and the bytes it wrote."""
        self.usage.update(totals)
        self.used += written

    def rows(self) -> list[Row]:
        """The ``usage`` rows of every agent the batch's written actions spent
        the capacity of, at its total as the batch leaves it: one put per
        agent per batch, in the batch's transaction (R12-11)."""
        return [(TABLE, who.encode(), u64(total)) for who, total in self.usage.items()]

    def _usage(self, tx: Any, who: str) -> int:
        n = self.usage.get(who)
        if n is None:
            n = self.known.get(who)
            if n is None:
                raw = tx.get(TABLE, who.encode())
                n = from_u64(raw) if raw else 0
        return n

    def _agent_refusal(self, who: str, had: int, cost: int, noted: bool = False) -> Rejection:
        q = self.quota
        why = []
        if q.agent_bytes and self.limit == q.agent_bytes:
            why.append(f"[limits] max_bytes_per_agent = {q.agent_bytes}")
        if q.agent_percent and self.capacity and self.limit == self.capacity * q.agent_percent // 100:
            why.append(f"[limits] max_store_percent_per_agent = {q.agent_percent} % of the {_mib(self.capacity)} store")
        reason = (
            f"capacity limit reached: agent {who} has recorded {had} bytes and this action needs {cost} more, "
            f"over its limit of {self.limit} bytes ({' and '.join(why)}); nothing was written. "
        )
        if noted:
            return Rejection("rate_limited", reason + _NOTED, "revise", rule=RULE)
        return Rejection(
            "rate_limited",
            reason + "Waiting frees nothing — only the operator can raise the limit: ask them, then try again",
            "wait",
            rule=RULE,
        )

    def _reserve_refusal(self, noted: bool = False) -> Rejection:
        assert self.capacity is not None
        reason = (
            f"the store is nearly full: {_mib(self.used)} of its {_mib(self.capacity)} are used, and the last "
            f"{self.quota.reserve_percent} % ([storage] reserve_percent) is kept for deadlines and operator actions; "
            "nothing was written"
        )
        if noted:
            return Rejection("unavailable", reason + ". " + _NOTED, "revise", rule=RULE)
        return Rejection(
            "unavailable", reason + " — retry after the operator enlarges [storage] map_size_mb", "retry", rule=RULE
        )


# A handle's note is content like any other (D325); ending the request is not refused for it.
_NOTED = "a note is content and counts like any other write: thread.handle without the note ends the request all the same"


def _mib(n: int) -> str:
    return f"{n / _MIB:.1f} MiB"


def _is_admin(tx: Any, facts: list[Any], who: str) -> bool:
    for fact in facts:  # the daemon's admin, created by this very action
        if isinstance(fact, AgentRegistered) and fact.agent == who:
            return fact.admin
    raw = tx.get("objects", who.encode())
    return raw is not None and decode_object(raw, AgentState)[1].admin

