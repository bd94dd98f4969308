"""Prometheus text metrics and the health check, served on the daemon's port
(``GET /metrics``, ``GET /healthz``). Counters live on the event loop; gauges are
read when scraped."""

from __future__ import annotations

import bisect
import os
import threading
from typing import TYPE_CHECKING

from .. import logs, tracing
from ..actors.registry import THREAD_NAME as ACTOR_THREADS

if TYPE_CHECKING:
    from .app import Server

__all__ = ["Metrics", "BUCKETS_MS"]

BUCKETS_MS = (0.5, 1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000)


_GROUPS = {
    "MainThread": "event_loop",
    "kungfud-writer": "writer",
    "kungfud-clock": "clock",
    "kungfud-reaper": "reaper",
    "kungfud-log": "log",
}


def thread_cpu_seconds() -> dict[tuple[str, str], float]:
    """CPU seconds used so far by the daemon's live threads, by group (event
    loop, writer, actors, clock, reaper) and mode (user, system), from
    /proc/self/task (Linux; empty elsewhere). Where the time goes under load
    (docs/performance.md)."""
    try:
        tick = float(os.sysconf("SC_CLK_TCK"))
    except (ValueError, OSError, AttributeError):
        return {}
    out: dict[tuple[str, str], float] = {}
    for t in threading.enumerate():
        try:
            with open(f"/proc/self/task/{t.native_id}/stat") as f:
                raw = f.read()
        except OSError:
            continue
        fields = raw[raw.rindex(")") + 2 :].split()
        group = _GROUPS.get(t.name) or ("actors" if t.name.startswith(ACTOR_THREADS) else "other")
        for mode, value in (("user", fields[11]), ("system", fields[12])):
            out[(group, mode)] = out.get((group, mode), 0.0) + int(value) / tick
    return out


class Metrics:
    def __init__(self) -> None:
        self.actions: dict[str, int] = {}  # op -> accepted (first success)
        self.replays = 0
        self.rejections: dict[str, int] = {}  # code -> count
        self.reads = 0
        self.buckets = [0] * (len(BUCKETS_MS) + 1)
        self.latency_sum_ms = 0.0
        self.latency_count = 0
        self.events_sent = 0
        self.slow_subscribers_dropped = 0

    def action(self, op: str) -> None:
        self.actions[op] = self.actions.get(op, 0) + 1

    def rejected(self, code: str) -> None:
        self.rejections[code] = self.rejections.get(code, 0) + 1

    def latency(self, ms: float) -> None:
        self.buckets[bisect.bisect_left(BUCKETS_MS, ms)] += 1
        self.latency_sum_ms += ms
        self.latency_count += 1

    def render(self, server: "Server") -> str:
        """The Prometheus text of the server's counters, its connections and
        the runtime's :meth:`~kungfud.actors.runtime.Runtime.stats`."""
        st = server.rt.stats()
        cumulative = 0
        buckets = []
        for bound, n in zip(BUCKETS_MS, self.buckets):
            cumulative += n
            buckets.append((f'_bucket{{le="{bound}"}}', cumulative))
        buckets += [
            ('_bucket{le="+Inf"}', cumulative + self.buckets[-1]),
            ("_sum", f"{self.latency_sum_ms:.3f}"),
            ("_count", self.latency_count),
        ]
        cpu = [(f'{{group="{g}",mode="{m}"}}', f"{s:.2f}") for (g, m), s in sorted(thread_cpu_seconds().items())]
        out = [
            *_family("kungfud_actions_total", "counter", "Actions that took effect, by op.",
                     [(f'{{op="{op}"}}', n) for op, n in sorted(self.actions.items())]),
            *_one("kungfud_replays_total", "counter", "Actions answered from their stored receipt.", self.replays),
            *_family("kungfud_rejections_total", "counter", "Rejected requests, by code.",
                     [(f'{{code="{c}"}}', n) for c, n in sorted(self.rejections.items())]),
            *_one("kungfud_reads_total", "counter", "Reads answered.", self.reads),
            *_family("kungfud_action_latency_ms", "histogram", "Action latency from arrival to durable reply.", buckets),
            *_one("kungfud_connections", "gauge", "Open websocket connections.", len(server.connections)),
            *_one("kungfud_subscribers", "gauge", "Connections subscribed to events.",
                  sum(len(s) for s in server.subscribers.values())),
            *_one("kungfud_events_sent_total", "counter",
                  "Event frames sent to subscribers, live and replayed by subscribe since.", self.events_sent),
            *_one("kungfud_slow_subscribers_dropped_total", "counter", "Subscribers closed for falling behind.",
                  self.slow_subscribers_dropped),
            *_one("kungfud_log_lines_dropped_total", "counter",
                  "Log lines (audit lines too) dropped because the log's reader did not keep up (D270).",
                  lines.dropped if (lines := logs.writer()) is not None else 0),
            *(_one("kungfud_lmdb_map_used_bytes", "gauge", "Bytes of the LMDB map in use.", st.map_used_bytes)
              if st.map_used_bytes is not None else ()),  # a store without a size bound has none
            *(_one("kungfud_lmdb_map_size_bytes", "gauge", "Configured LMDB map size.", st.map_size_bytes)
              if st.map_size_bytes is not None else ()),
            *_family("kungfud_quota_refusals_total", "counter",
                     "Actions refused by a capacity limit: an agent's bytes, or the store's reserve.",
                     [(f'{{limit="{k}"}}', n) for k, n in sorted(st.quota_refusals.items())]),
            *(_one("kungfud_quota_agent_bytes_limit", "gauge", "Bytes of facts each ordinary agent may record.",
                   st.agent_bytes_limit) if st.agent_bytes_limit is not None else ()),
            *(_one("kungfud_store_used_bytes", "gauge", "Bytes of the store in use, as the capacity limits see it.",
                   st.store_used_bytes) if st.store_used_bytes is not None else ()),
            *(_one("kungfud_store_capacity_bytes", "gauge",
                   "The store's size the capacity limits take shares of (LMDB: the map; PostgreSQL: capacity_mb).",
                   st.store_capacity_bytes) if st.store_capacity_bytes is not None else ()),
            *(_one("kungfud_store_reserve_bytes", "gauge",
                   "Bytes of the store kept for deadlines and operator actions.", st.reserve_bytes)
              if st.reserve_bytes is not None else ()),
            *_one("kungfud_obligations_open", "gauge", "Open obligations (respond, deliver, judge).", st.obligations_open),
            *_one("kungfud_deadlines_pending", "gauge", "Running deadlines.", st.deadlines_pending),
            *_one("kungfud_expiry_wakeups_total", "counter", "Times the deadline clock woke an owner.", st.expiry_wakeups),
            *_one("kungfud_facts_total", "counter", "Facts recorded (the last global sequence number).", st.facts),
            *_one("kungfud_commits_total", "counter", "Group commits written.", st.commits),
            *_one("kungfud_live_actors", "gauge", "Actors currently running.", st.live_actors),
            *(line for figure in server.sink.figures() for line in _one(*figure)),  # the webhook runner's
            *(_one("kungfud_trace_spans_dropped_total", "counter",
                   "Spans not exported: the export queue was full, or the collector refused or was not reached.",
                   tracing.dropped()) if tracing.on else ()),
            *_family("kungfud_thread_cpu_seconds", "gauge", "CPU seconds used by the live threads of each group.", cpu),
        ]
        return "\n".join(out) + "\n"


def _family(name: str, kind: str, help: str, samples: list[tuple[str, object]]) -> list[str]:
    """One metric family in the Prometheus text format: its HELP and TYPE lines,
    then a line per sample, ``(suffix or labels, value)``."""
    return [f"# HELP {name} {help}", f"# TYPE {name} {kind}", *(f"{name}{suffix} {value}" for suffix, value in samples)]


def _one(name: str, kind: str, help: str, value: object) -> list[str]:
    return _family(name, kind, help, [("", value)])
