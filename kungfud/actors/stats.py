"""What the running daemon reports about itself (``GET /metrics``'s gauges and
counters below the server): one struct, read in one go."""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

if TYPE_CHECKING:
    from .runtime import Runtime

__all__ = ["Stats", "stats_of"]


class Stats(msgspec.Struct, frozen=True):
    map_used_bytes: int | None  # of the store's map in use (None: a store without a size bound)
    map_size_bytes: int | None  # the configured map size
    obligations_open: int  # respond, deliver, judge (the obligations index)
    deadlines_pending: int  # running deadlines (the deadlines index)
    expiry_wakeups: int  # times the deadline clock woke an owner
    facts: int  # facts recorded: the last global sequence number
    commits: int  # group commits written
    live_actors: int  # actors currently running
    # Capacity limits (R12-11): this process's refusals by limit ("agent_bytes",
    # "reserve"); the per-agent limit and the reserve in bytes (None: none).
    quota_refusals: dict[str, int] = {}
    agent_bytes_limit: int | None = None
    reserve_bytes: int | None = None
    store_used_bytes: int | None = None  # what the capacity limits take the fill from (None: no size)
    store_capacity_bytes: int | None = None


def stats_of(rt: "Runtime") -> Stats:
    used, size = rt.store.usage() or (None, None)
    quota = getattr(rt.writer, "quota", None)
    fill = getattr(rt.store, "fill", None)
    filled, capacity = (fill() if fill is not None else None) or (None, None)
    with rt.store.read() as view:
        obligations, deadlines, facts = view.count("obligations"), view.count("deadlines"), view.last_seq()
    return Stats(
        map_used_bytes=used,
        map_size_bytes=size,
        obligations_open=obligations,
        deadlines_pending=deadlines,
        expiry_wakeups=rt.clock_thread.expiries_told,
        facts=facts,
        commits=rt.writer.batches,
        live_actors=rt.registry.live(),
        quota_refusals=dict(getattr(rt.writer, "quota_refusals", {})),
        agent_bytes_limit=quota.agent_limit(capacity) if quota is not None else None,
        reserve_bytes=(quota.reserve(capacity) or None) if quota is not None else None,
        store_used_bytes=filled,
        store_capacity_bytes=capacity,
    )
