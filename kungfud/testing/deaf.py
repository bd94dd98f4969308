"""Test-only: a node that hears nothing from the others (``KUNGFUD_TEST_DEAF=1``).

With several nodes on one store, a node learns of the others' commits by their
announcements and, when one is lost, by the safety poll (kungfud/nodes/link.py).
Started with ``KUNGFUD_TEST_DEAF=1``, it ignores both: no wake-up from another
node ever reaches its feed, its clock or its connections' key check (D156). The
cross-node key test uses it to show that a key rotated on another node stops
working here at once without any announcement (D185). Only ``new_runtime``
reads the variable, and a node running with it logs a warning at start.
"""

from __future__ import annotations

import logging
import os
from typing import Any

__all__ = ["ENV", "install_from_env"]

ENV = "KUNGFUD_TEST_DEAF"

log = logging.getLogger("kungfud.testing")


def install_from_env(link: Any) -> bool:
    """Make ``link`` (a :class:`kungfud.nodes.link.Link`, before it starts)
    drop every wake-up from other nodes if ``KUNGFUD_TEST_DEAF`` is ``1``."""
    if os.environ.get(ENV) != "1":
        return False
    log.warning("%s=1: this node ignores the other nodes' announcements and its safety poll (tests only)", ENV)
    link.on_remote = lambda seq, agents, dues: None
    return True
