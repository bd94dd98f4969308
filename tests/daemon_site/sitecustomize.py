"""Imported at start by every daemon the suite runs (tests/cluster.py puts this
folder on its PYTHONPATH): ``import trio`` fails in it, as in an install
without the test extra. selenium (a test dependency) installs trio, and
httpcore (under httpx and the A2A SDK) imports trio whenever it is there,
which cost each daemon start about 0.1 s of its 0.55 s CPU; the daemon never
runs on trio."""

import sys

sys.modules["trio"] = None  # type: ignore[assignment]
