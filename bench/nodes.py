"""What the node benches (bench/nodes_contention.py, bench/nodes_deadlines.py)
share: how many nodes and which store (their options), and those nodes started
on a temporary directory by the tests' launcher (tests/cluster.py ``Cluster``):
on LMDB ``kungfud serve --workers N`` with each worker also on its own port
(the test-only ``KUNGFUD_WORKER_PORTS=1``), one node being ``serve`` alone (as
``--workers 1`` is); with ``--store postgresql://…`` N ``serve`` processes on
that database."""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Awaitable, Callable, Iterator

from kungfud.client import Client
from tests.cluster import Cluster

__all__ = ["parse_node_args", "started_nodes", "run_per_count", "Measure"]

#: one measurement: (node count, the arguments, every node's URL, the admin's client, a new Thread's id)
Measure = Callable[[int, argparse.Namespace, list[str], Client, str], Awaitable[None]]


def _counts(text: str) -> list[int]:
    try:
        counts = [int(part) for part in text.split(",")]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"node counts are whole numbers of 1 or more, comma-separated; not {text!r}")
    return counts


def parse_node_args(ap: argparse.ArgumentParser) -> argparse.Namespace:
    """``ap``'s arguments with the node options added: ``--nodes N[,N…]``
    (alias ``--workers``; several counts are measured in turn, in one run) and
    ``--store URL`` (PostgreSQL nodes instead of LMDB workers; one count, as
    each count needs an empty database)."""
    ap.add_argument("--nodes", "--workers", dest="nodes", type=_counts, default=[2], metavar="N[,N…]",
                    help="LMDB workers (or PostgreSQL nodes with --store); several counts are measured in turn (default 2)")
    ap.add_argument("--store", help="postgresql://… of an empty database: nodes on PostgreSQL instead of LMDB workers")
    args = ap.parse_args()
    if args.store and len(args.nodes) > 1:
        ap.error("--store: one node count per run (each count needs an empty database)")
    return args


@contextmanager
def started_nodes(n: int, store: str | None, prefix: str) -> Iterator[Cluster]:
    """``n`` nodes on one fresh store; stopped on leaving. ``cluster.urls[i]``
    reaches node ``i``, ``cluster.admin_key`` is the admin's key."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    cluster = Cluster("pg2" if store else "lmdb2", tmp / "data", store_url=store, nodes=n).start()
    try:
        yield cluster
    finally:
        cluster.stop()


def run_per_count(ap: argparse.ArgumentParser, measure: Measure, name: str) -> None:
    """The bench's main: ``ap``'s arguments with the node options; then, for
    each node count in turn, that many nodes on a fresh store, the admin
    connected to the first and a new Thread titled ``name``, and ``measure``."""
    args = parse_node_args(ap)

    async def each() -> None:
        for n in args.nodes:
            with started_nodes(n, args.store, f"kf-{name}-") as cluster:
                urls = cluster.urls
                admin = await Client.connect(urls[0], cluster.admin_key)
                try:
                    thread = (await admin.act("thread.create", {"content": {"title": name}}))["thread"]
                    await measure(n, args, urls, admin, thread)
                finally:
                    await admin.close()

    asyncio.run(each())
