"""The suite in parallel: README's ``python -m pytest -n auto`` (pytest-xdist; D370).

Most of an e2e test's time is spent waiting (a daemon's start, fsync, sockets, a
deadline), so more workers than cores keep the two cores busy: ``-n auto`` is
:data:`WORKERS_PER_CORE` workers per core (``PYTEST_XDIST_AUTO_NUM_WORKERS=N``
or ``-n N`` choose another count; ``-n 0`` runs serially, in one process).

How tests are handed out (:class:`Scheduler`): a test file that shares
something between its tests — a ``shared_daemon``, a fixture of ``scope="module"``
or ``"class"`` (the console's browser) — goes out in runs of consecutive tests
(:data:`SHARED_CHUNK`), so what it shares starts once per run; every other test
goes alone to whichever worker is free. The longest work is handed out first (:func:`longest_first`), so the run
does not end waiting on one long test or file.

What is per worker: each worker is a pytest session of its own (its temp dirs
under ``--basetemp``'s ``popen-gwN``, its own PostgreSQL cluster when a test
needs one, tests/pg.py); daemons listen on ports the kernel picks. What the
controller must see (the mode's deselection summary, secrets in daemon logs,
processes that outlived the suite) each worker reports at its end
(tests/conftest.py).
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: ``-n auto``: workers per core (measured on the 2-core machine, D370)
WORKERS_PER_CORE = 2

#: tests of a sharing file per unit of work: its daemon's start (about a second,
#: two in the two-node modes) spread over them, and a big file over several workers
SHARED_CHUNK = 6

_SHARES = re.compile(r"\bshared_daemon\b|scope=[\"'](?:module|class)[\"']")


@functools.cache
def shares_between_tests(path: str) -> bool:
    """True if the test file at ``path`` (from the root) keeps something for several tests."""
    try:
        return bool(_SHARES.search((ROOT / path).read_text()))
    except OSError:
        return False


#: what a test that names its own limit (``timeout_s``) but no ``long_test``
#: length is taken to last: longer than all but the longest tests (D405)
LIMITED_S = 30.0


def expected_s(item) -> float:
    """How long a long test takes: ``long_test(seconds)`` (measured on the
    shared 2-core machine, D405), :data:`LIMITED_S` for a test that names its
    own limit (``timeout_s``), else 0 (not a long test)."""
    marker = item.get_closest_marker("long_test")
    if marker is not None:
        return float(marker.args[0]) if marker.args else LIMITED_S
    return LIMITED_S if item.get_closest_marker("timeout_s") is not None else 0.0


def longest_first(items: list) -> None:
    """Reorder ``items`` in place, longest work first, so that the run does not
    end waiting on one long unit: the tests marked ``long_test`` or that name
    their own (long) limit (``timeout_s``), longest first,
    then the files handed out whole (most tests first), then the rest, each
    as collected. Every worker collects the same items, so the same order."""
    size: dict[str, int] = {}
    for item in items:
        size[item.nodeid.split("::", 1)[0]] = size.get(item.nodeid.split("::", 1)[0], 0) + 1

    def key(item) -> tuple[int, float]:
        path = item.nodeid.split("::", 1)[0]
        if expected := expected_s(item):
            return (0, -expected)
        return (1, -size[path]) if shares_between_tests(path) else (2, 0)

    items.sort(key=key)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # xdist's own hook reads it
    return WORKERS_PER_CORE * (len(os.sched_getaffinity(0)) or 1)


try:
    from xdist.scheduler import LoadScopeScheduling
except ImportError:  # pragma: no cover - without pytest-xdist the suite runs serially
    pass
else:

    class Scheduler(LoadScopeScheduling):
        """One unit of work per test; a file that shares between its tests in
        units of :data:`SHARED_CHUNK` consecutive tests (what it shares starts
        once per unit, and a big file still spreads over the workers)."""

        _scopes: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            return (self._scopes or {}).get(nodeid, nodeid)

        def schedule(self) -> None:
            if self._scopes is None and self.collection_is_completed and self.registered_collections:
                self._scopes = {}
                seen: dict[str, int] = {}
                for nodeid in next(iter(self.registered_collections.values())):
                    path = nodeid.split("::", 1)[0]
                    if shares_between_tests(path):
                        n = seen[path] = seen.get(path, -1) + 1
                        self._scopes[nodeid] = f"{path}#{n // SHARED_CHUNK}"
            # Keep the collection's order (longest_first): LoadScopeScheduling
            # would otherwise order the units by their number of tests alone.
            self.config.option.loadscopereorder = False
            super().schedule()

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(config, log):
        if config.getvalue("dist") in ("load", "loadscope", "loadfile", "loadgroup"):
            return Scheduler(config, log)
        return None  # each, worksteal: as asked
