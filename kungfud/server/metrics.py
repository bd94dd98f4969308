"""Prometheus text metrics and the health check, served on the daemon's port
(``GET /metrics``, ``GET /healthz``). Counters live on the event loop; gauges are
read when scraped."""

from __future__ import annotations

import bisect
import os
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .app import Server

__all__ = ["Metrics", "BUCKETS_MS"]

BUCKETS_MS = (0.5, 1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000)


_GROUPS = {"MainThread": "event_loop", "kungfud-writer": "writer", "kungfud-clock": "clock", "kungfud-reaper": "reaper"}


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
        group = _GROUPS.get(t.name) or ("actors" if t.name.startswith("ObjectActor") else "other")
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
        rt = server.rt
        used, size = rt.store.map_usage()
        with rt.store.read() as view:
            obligations = view.count("obligations")
            deadlines = view.count("deadlines")
            last_seq = view.last_seq()
        out = [
            "# HELP kungfud_actions_total Actions that took effect, by op.",
            "# TYPE kungfud_actions_total counter",
        ]
        out += [f'kungfud_actions_total{{op="{op}"}} {n}' for op, n in sorted(self.actions.items())]
        out += [
            "# HELP kungfud_replays_total Actions answered from their stored receipt.",
            "# TYPE kungfud_replays_total counter",
            f"kungfud_replays_total {self.replays}",
            "# HELP kungfud_rejections_total Rejected requests, by code.",
            "# TYPE kungfud_rejections_total counter",
        ]
        out += [f'kungfud_rejections_total{{code="{c}"}} {n}' for c, n in sorted(self.rejections.items())]
        out += [
            "# HELP kungfud_reads_total Reads answered.",
            "# TYPE kungfud_reads_total counter",
            f"kungfud_reads_total {self.reads}",
            "# HELP kungfud_action_latency_ms Action latency from arrival to durable reply.",
            "# TYPE kungfud_action_latency_ms histogram",
        ]
        cumulative = 0
        for bound, n in zip(BUCKETS_MS, self.buckets):
            cumulative += n
            out.append(f'kungfud_action_latency_ms_bucket{{le="{bound}"}} {cumulative}')
        out += [
            f'kungfud_action_latency_ms_bucket{{le="+Inf"}} {cumulative + self.buckets[-1]}',
            f"kungfud_action_latency_ms_sum {self.latency_sum_ms:.3f}",
            f"kungfud_action_latency_ms_count {self.latency_count}",
            "# HELP kungfud_connections Open websocket connections.",
            "# TYPE kungfud_connections gauge",
            f"kungfud_connections {len(server.connections)}",
            "# HELP kungfud_subscribers Connections subscribed to events.",
            "# TYPE kungfud_subscribers gauge",
            f"kungfud_subscribers {sum(len(s) for s in server.subscribers.values())}",
            "# HELP kungfud_events_sent_total Event frames sent to subscribers, live and replayed by subscribe since.",
            "# TYPE kungfud_events_sent_total counter",
            f"kungfud_events_sent_total {self.events_sent}",
            "# HELP kungfud_slow_subscribers_dropped_total Subscribers closed for falling behind.",
            "# TYPE kungfud_slow_subscribers_dropped_total counter",
            f"kungfud_slow_subscribers_dropped_total {self.slow_subscribers_dropped}",
            "# HELP kungfud_lmdb_map_used_bytes Bytes of the LMDB map in use.",
            "# TYPE kungfud_lmdb_map_used_bytes gauge",
            f"kungfud_lmdb_map_used_bytes {used}",
            "# HELP kungfud_lmdb_map_size_bytes Configured LMDB map size.",
            "# TYPE kungfud_lmdb_map_size_bytes gauge",
            f"kungfud_lmdb_map_size_bytes {size}",
            "# HELP kungfud_obligations_open Open obligations (respond, deliver, judge).",
            "# TYPE kungfud_obligations_open gauge",
            f"kungfud_obligations_open {obligations}",
            "# HELP kungfud_deadlines_pending Running deadlines.",
            "# TYPE kungfud_deadlines_pending gauge",
            f"kungfud_deadlines_pending {deadlines}",
            "# HELP kungfud_expiry_wakeups_total Times the deadline clock woke an owner.",
            "# TYPE kungfud_expiry_wakeups_total counter",
            f"kungfud_expiry_wakeups_total {rt.clock_thread.expiries_told}",
            "# HELP kungfud_facts_total Facts recorded (the last global sequence number).",
            "# TYPE kungfud_facts_total counter",
            f"kungfud_facts_total {last_seq}",
            "# HELP kungfud_commits_total Group commits written.",
            "# TYPE kungfud_commits_total counter",
            f"kungfud_commits_total {rt.writer.batches}",
            "# HELP kungfud_live_actors Actors currently running.",
            "# TYPE kungfud_live_actors gauge",
            f"kungfud_live_actors {rt.registry.live()}",
            "# HELP kungfud_thread_cpu_seconds CPU seconds used by the live threads of each group.",
            "# TYPE kungfud_thread_cpu_seconds gauge",
        ]
        for (group, mode), seconds in sorted(thread_cpu_seconds().items()):
            out.append(f'kungfud_thread_cpu_seconds{{group="{group}",mode="{mode}"}} {seconds:.2f}')
        return "\n".join(out) + "\n"
