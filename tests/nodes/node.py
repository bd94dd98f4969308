"""Test-only: one kungfud node on a shared LMDB data directory, on its own
port, so a test can reach (and kill -9) each node by itself. The daemon's own
way to run several LMDB nodes is ``kungfud serve --workers N`` (one port,
SO_REUSEPORT, the supervisor holding the data-dir lock); this launcher skips
the lock and the supervisor and otherwise serves exactly as ``kungfud serve``.

    python -m tests.nodes.node DATA_DIR [--config PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from kungfud.actors import Runtime
from kungfud.actors.runtime import wall_ms
from kungfud.config import load
from kungfud.daemon import _bind, _serve, bootstrap_admin, limits_of
from kungfud.nodes.lmdb import lmdb_nodes
from kungfud.store import Store
from kungfud.testing.clock import OffsetClock


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("data_dir")
    ap.add_argument("--config")
    args = ap.parse_args()
    cfg = load(args.config, data_dir=args.data_dir, listen="127.0.0.1:0")
    listener = _bind(cfg)
    store = Store(cfg.data_dir, map_size_mb=cfg.storage.map_size_mb, lock=False)
    test_clock = OffsetClock.from_env()
    rt = Runtime(store, limits_of(cfg), clock=test_clock or wall_ms, nodes=lmdb_nodes(cfg.data_dir))
    if test_clock is not None:
        test_clock.on_advance = rt.clock_thread.wake
    rt.start()
    try:
        bootstrap_admin(rt)
        with asyncio.Runner() as runner:
            return runner.run(_serve(rt, cfg, listener))
    finally:
        rt.stop()
        store.close()


if __name__ == "__main__":
    sys.exit(main())
