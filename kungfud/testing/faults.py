"""Test-only storage fault injection (issue 6.4; tests/reliability/test_storage_faults.py).

``KUNGFUD_FAULT_NTH=N`` makes the writer's fault hook raise at its Nth call once
installed (unset in production: :func:`install_from_env` then does nothing).
The writer calls the hook at every named write point — each fact, object, index
row and receipt (``Writer._put``/``_delete``) and the commit — so N = 1, 2, …
walks a fault through all of them.
"""

from __future__ import annotations

import logging
import os
from typing import Any

__all__ = ["InjectedFault", "NthCallFault", "install_from_env", "ENV"]

log = logging.getLogger("kungfud")

ENV = "KUNGFUD_FAULT_NTH"


class InjectedFault(Exception):
    """A storage failure injected for tests (``injected``: no traceback logged)."""

    injected = True


class NthCallFault:
    """A writer fault hook that raises at its Nth call after arming."""

    def __init__(self, n: int, *, armed: bool = False):
        self.n = n
        self.calls = 0
        self.armed = armed

    def arm(self) -> None:
        self.armed = True

    def __call__(self, point: str) -> None:
        if not self.armed:
            return
        self.calls += 1
        if self.calls == self.n:
            log.warning("injecting a storage fault at call %d (%s)", self.n, point)
            raise InjectedFault(f"injected storage fault at call {self.n} ({point})")


def install_from_env(writer: Any) -> NthCallFault | None:
    """Give ``writer`` an armed :class:`NthCallFault` if ``KUNGFUD_FAULT_NTH`` is
    a positive integer. Called after the bootstrap: faults hit client actions
    only, never the creation of the admin agent."""
    raw = os.environ.get(ENV)
    if not (raw and raw.isdigit() and int(raw) > 0):
        return None
    fault = NthCallFault(int(raw), armed=True)
    writer.fault = fault
    return fault
