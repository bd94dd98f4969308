"""Shared fixtures. Async test functions run in a fresh event loop (no plugin
needed). ``daemon`` starts the real daemon as a subprocess on a free port; with
``--nodes=lmdb2|pg2`` (or ``$KUNGFUD_E2E_NODES``) it is two nodes on one store
(tests/cluster.py)."""

from __future__ import annotations

import asyncio
import collections
import inspect
import os
import re
from pathlib import Path

import pytest

from tests.cluster import DAEMON_LOGS, ENV, MODES, ROOT, Cluster, Daemon, mode_of
from tests.parallel import longest_first, pytest_xdist_auto_num_workers  # noqa: F401  (hooks)
from tests.processes import Tracker, become_subreaper

try:  # pytest-xdist's scheduler for this suite (tests/parallel.py)
    from tests.parallel import pytest_xdist_make_scheduler  # noqa: F401
except ImportError:  # without pytest-xdist the suite runs serially
    pass

try:  # the session's throwaway PostgreSQL cluster (pg2 mode, the PostgreSQL tests)
    from tests.pg import pg_server  # noqa: F401
except ImportError:  # pragma: no cover - until tests/pg.py lands
    pass

__all__ = ["Cluster", "DAEMON_LOGS", "Daemon", "ROOT", "SECRET_SHAPE"]
# Agent keys (kf_…) and admission tokens (kt_…) are 43 base64url characters.
SECRET_SHAPE = re.compile(rb"k[ft]_[A-Za-z0-9_-]{43}")


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    if inspect.iscoroutinefunction(pyfuncitem.obj):
        funcargs = pyfuncitem.funcargs
        args = {name: funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
        # A hung test fails instead of stalling the suite; a test whose length
        # is its point (the crash loop, the storage-fault walk) names its own
        # limit with @pytest.mark.timeout_s(N).
        limit = pyfuncitem.get_closest_marker("timeout_s")
        _run_limited(pyfuncitem.obj(**args), limit.args[0] if limit else 120)
        return True
    return None


def _run_limited(coro, limit: float) -> None:
    """``asyncio.run(coro)`` ended after ``limit`` seconds by a TimeoutError,
    even when the test's task does not end on its cancellation (a task can
    swallow one; the run then goes on instead of hanging). Cleans up as
    ``asyncio.run`` does, each step bounded."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    task = loop.create_task(coro)
    try:
        loop.run_until_complete(asyncio.wait({task}, timeout=limit))
        if not task.done():
            task.cancel()
            loop.run_until_complete(asyncio.wait({task}, timeout=10))
            ended = "" if task.done() else " and did not end when cancelled"
            raise TimeoutError(f"the test ran past its {limit:g} s limit{ended}")
        task.result()
    finally:
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for t in pending:
            t.cancel()
        if pending:
            loop.run_until_complete(asyncio.wait(pending, timeout=10))
        loop.run_until_complete(asyncio.wait({loop.create_task(loop.shutdown_asyncgens())}, timeout=10))
        loop.run_until_complete(asyncio.wait({loop.create_task(loop.shutdown_default_executor())}, timeout=10))
        asyncio.set_event_loop(None)
        loop.close()


def _node_mode(request) -> str:
    return mode_of(request.config)


def _new(request, data_dir: Path, config: Path | None = None, extra=None, test_clock: bool = False, env=None):
    """The daemon under test on ``data_dir``, not started: a Daemon (mode lmdb)
    or a two-node Cluster (lmdb2, pg2; tests/cluster.py)."""
    mode = _node_mode(request)
    if mode == "lmdb":
        return Daemon(data_dir, config, extra, env, test_clock=test_clock)
    store_url = request.getfixturevalue("pg_server").new_database() if mode == "pg2" else None
    return Cluster(mode, data_dir, config, extra, env, test_clock=test_clock, store_url=store_url)


@pytest.fixture
def daemon(request, tmp_path):
    d = _new(request, tmp_path / "data").start()
    yield d
    d.stop()


@pytest.fixture(scope="module")
def shared_daemon(request, tmp_path_factory):
    """One ``daemon`` for every test of a module that asks for it: for tests
    that each register agents of their own and read nothing daemon-wide (no
    log, metric or count), so a fresh daemon per test only costs its start
    (about a second each in the two-node modes). A module opts in with a
    ``daemon`` fixture of its own that returns this one."""
    d = _new(request, tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1]) / "data").start()
    yield d
    d.stop()


@pytest.fixture
def clocked_daemon(request, tmp_path):
    """``daemon`` whose clock the test moves: ``clocked_daemon.advance_clock(s)``
    instead of sleeping until a deadline passes (every node reads one clock)."""
    d = _new(request, tmp_path / "data", test_clock=True).start()
    yield d
    d.stop()


@pytest.fixture
def make_daemon(request, tmp_path):
    """Factory for daemons with a config file or extra flags (``test_clock``:
    a clock the test moves, as ``clocked_daemon``'s)."""
    made: list = []

    def make(
        config_text: str | None = None, name: str = "data", start: bool = True, extra: list[str] | None = None,
        env: dict | None = None, test_clock: bool = False,
    ):
        cfg = None
        if config_text is not None:
            cfg = tmp_path / f"{name}.toml"
            cfg.write_text(config_text)
        d = _new(request, tmp_path / name, cfg, extra, test_clock=test_clock, env=env)
        made.append(d)
        return d.start() if start else d

    yield make
    for d in made:
        d.stop()


@pytest.fixture
def make_cluster(request, tmp_path):
    """Factory for ``nodes`` (default two) nodes on one store of a given kind
    (``lmdb2`` or ``pg2``), whatever ``--nodes`` says: the cross-node tests name
    their store."""
    made: list[Cluster] = []

    def make(
        kind: str, config_text: str | None = None, name: str = "data", test_clock: bool = False, nodes: int = 2
    ) -> Cluster:
        cfg = None
        if config_text is not None:
            cfg = tmp_path / f"{name}.toml"
            cfg.write_text(config_text)
        store_url = request.getfixturevalue("pg_server").new_database() if kind == "pg2" else None
        c = Cluster(kind, tmp_path / name, cfg, test_clock=test_clock, store_url=store_url, nodes=nodes)
        made.append(c)
        return c.start()

    yield make
    for c in made:
        c.stop()


def pytest_addoption(parser):
    parser.addoption(
        "--nodes",
        choices=sorted(MODES),
        default=None,
        help=f"run the daemon fixtures as {'; '.join(f'{k}: {v}' for k, v in MODES.items())} "
        f"(default: ${ENV}, else lmdb)",
    )


def pytest_report_header(config):
    mode = mode_of(config)
    return f"kungfud nodes: {mode} ({MODES[mode]})"


#: the fixtures that start the daemon under test (tests/cluster.py)
DAEMON_FIXTURES = frozenset({"daemon", "shared_daemon", "clocked_daemon", "make_daemon"})


def _deselect_because(item, mode: str) -> str | None:
    """Why ``item`` does not run in a two-node ``mode``, or None: it runs."""
    marker = item.get_closest_marker("single_node")
    if marker is not None:
        return marker.args[0]
    marker = item.get_closest_marker("lmdb_only")
    if marker is not None and mode == "pg2":
        return marker.args[0]
    if not DAEMON_FIXTURES & set(getattr(item, "fixturenames", ())):
        return "start no daemon through the fixtures (the same in every mode)"
    return None


def pytest_collection_modifyitems(session, config, items):
    """In a two-node mode only the tests that meet the daemon under test run: a
    test about one process or one LMDB directory by nature
    (``@pytest.mark.single_node("why")``; ``lmdb_only``: not on PostgreSQL) and
    a test that starts no daemon through the fixtures are deselected, not skipped."""
    if hasattr(config, "workeroutput"):  # an xdist worker
        longest_first(items)
    mode = mode_of(config)
    deferred = _deferred_files()
    if mode == "lmdb" and not deferred:
        return
    keep, dropped = [], []
    for item in items:
        if deferred and Path(str(item.path)).resolve() in deferred:
            why = "deferred by KUNGFUD_DEFER_FILES (.ci/run runs them in another run)"
        else:
            why = None if mode == "lmdb" else _deselect_because(item, mode)
        (keep if why is None else dropped).append((item, why))
    if dropped:
        config.hook.pytest_deselected(items=[item for item, _ in dropped])
        items[:] = [item for item, _ in keep]
    config._kungfud_deselected = collections.Counter(why for _, why in dropped)
    if hasattr(config, "workeroutput"):  # an xdist worker: the controller prints the summary
        config.workeroutput["kungfud_deselected"] = dict(config._kungfud_deselected)


def _deferred_files() -> set[Path]:
    """``.ci/run`` runs README's test command as it is, with the longest
    default-mode files named in ``KUNGFUD_DEFER_FILES`` (paths from the repo's
    root, separated by spaces) left to a background run that names them (D171):
    they are deselected here, never skipped, and the summary says so."""
    files = {(ROOT / f).resolve() for f in os.environ.get("KUNGFUD_DEFER_FILES", "").split()}
    missing = sorted(str(f) for f in files if not f.is_file())
    if missing:  # a misspelt name would quietly run nothing anywhere
        raise pytest.UsageError(f"KUNGFUD_DEFER_FILES names no such file: {', '.join(missing)}")
    return files


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    why = getattr(config, "_kungfud_deselected", None)
    if why:
        terminalreporter.write_line(
            f"kungfud nodes={mode_of(config)}: {sum(why.values())} tests deselected: "
            + "; ".join(f"{n} {reason}" for reason, n in why.most_common())
        )
    problems = getattr(config, "_kungfud_problems", [])
    if problems:
        terminalreporter.write_line("")
        for line in problems:
            terminalreporter.write_line(line, red=True, bold=not line.startswith("  "))


def pytest_configure(config):
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    for marker in (
        "single_node(why): about one process or one LMDB directory by nature; deselected under --nodes=lmdb2|pg2",
        "lmdb_only(why): about the LMDB store by nature; deselected under --nodes=pg2",
        "long_test(seconds): takes long (a model-based walk, a bench run, a crash loop; seconds: measured on the 2-core machine); handed out first under -n, longest first (tests/parallel.py)",
    ):
        config.addinivalue_line("markers", marker)
    _deferred_files()  # a misspelt name fails at once, in the controller too
    become_subreaper()  # orphans of what the suite started stay ours to find (tests/processes.py)
    config._kungfud_processes = Tracker()
    config._kungfud_workers = {}  # xdist controller: worker pid -> what it found at its end


# --- under pytest-xdist (README's command: ``-n``): each worker collects and runs
# its share and reports at its end what only it can see; the controller prints it.


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    out = getattr(node, "workeroutput", None) or {}
    if "kungfud_pid" in out:
        node.config._kungfud_workers[out["kungfud_pid"]] = out
        if out.get("kungfud_deselected") and not getattr(node.config, "_kungfud_deselected", None):
            node.config._kungfud_deselected = collections.Counter(out["kungfud_deselected"])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    yield
    item.config._kungfud_processes.note(item.nodeid)


def pytest_sessionfinish(session, exitstatus):
    """At the end of every pytest process (each xdist worker, then the controller):
    §12, issue 6.9: no daemon ever logs a key or a token — every log of every
    daemon it started is searched for anything shaped like a secret; and no
    process it started outlives it (tests/processes.py). The controller fails
    the session for what any worker found."""
    config = session.config
    problems = []
    leaks = []
    for path in DAEMON_LOGS:
        if path.exists():
            for m in SECRET_SHAPE.finditer(path.read_bytes()):
                leaks.append(f"  {path}: {m.group()[:8]}…")
    if leaks:
        problems += ["SECRETS FOUND IN DAEMON LOGS (§12):", *leaks[:20]]
    workers = frozenset(config._kungfud_workers)  # their own checks cover what runs below them
    left = config._kungfud_processes.survivors(skip=workers)
    if left:
        problems += ["PROCESSES THE SUITE STARTED OUTLIVED IT (killed now; end them in the test or fixture):",
                     *(f"  {line}" for line in left)]
    for out in config._kungfud_workers.values():
        problems += out.get("kungfud_problems", [])
    if hasattr(config, "workeroutput"):
        config.workeroutput["kungfud_pid"] = os.getpid()
        config.workeroutput["kungfud_problems"] = problems
    config._kungfud_problems = problems
    if problems:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
