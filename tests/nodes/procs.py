"""Test helpers: several node processes on one LMDB data directory, each on its
own port (tests/nodes/node.py), so a test reaches and kills each by itself."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import DAEMON_LOGS, ROOT, Daemon


class Node(Daemon):
    """One node (its own process and port) on a shared LMDB data directory."""

    def __init__(self, data_dir: Path, name: str, env: dict | None = None):
        super().__init__(data_dir, env=env)
        self.stderr_path = data_dir.parent / f"{name}.stderr"
        DAEMON_LOGS.append(self.stderr_path)

    def start(self, listen: str = "127.0.0.1:0", timeout: float = 20.0) -> "Node":
        cmd = [sys.executable, "-m", "tests.nodes.node", str(self.data_dir)]
        self._stderr = open(self.stderr_path, "ab")
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=self._stderr, cwd=ROOT, text=True,
            env={**os.environ, **(self.env or {})},
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("kungfud listening on "):
            self.proc.kill()
            raise RuntimeError(f"node did not start: {line!r}; stderr: {self.stderr_path.read_text()[-2000:]}")
        self.url = line.split()[-1]
        return self


def start_nodes(tmp_path: Path, n: int) -> list[Node]:
    """``n`` nodes on one new data directory; the first creates the store and admin."""
    data = tmp_path / "data"
    nodes = [Node(data, f"node{i}") for i in range(n)]
    nodes[0].start()
    for node in nodes[1:]:
        node.start()
    return nodes


def wait_for(pred, timeout: float, step: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(step)
    return pred()
