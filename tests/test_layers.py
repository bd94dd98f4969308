"""The layering rules of docs/architecture.md, checked on the source (AST):
every import statement counts, at module level or inside a function, and under
``TYPE_CHECKING`` too."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "kungfud"


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, as absolute dotted names."""
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    package = parts if path.name == "__init__.py" else parts[:-1]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.add(mod)
            out.update(f"{mod}.{a.name}" for a in node.names)  # `from .. import core`
    return out


def _offenders(files: list[Path], forbidden: tuple[str, ...]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for f in files:
        bad = sorted(m for m in _imports(f) if any(m == p or m.startswith(p + ".") for p in forbidden))
        if bad:
            found[str(f.relative_to(PKG.parent))] = bad
    return found


def test_the_server_imports_nothing_from_core_or_store():
    """The server keeps transport and admission policy; everything below it
    goes through ``kungfud.actors`` (Runtime and its reply vocabulary)."""
    files = sorted((PKG / "server").rglob("*.py"))
    assert files
    assert _offenders(files, ("kungfud.core", "kungfud.store")) == {}


def _files(*names: str) -> list[Path]:
    out: list[Path] = []
    for name in names:
        p = PKG / name
        if p.is_dir():  # a package
            out += sorted(p.rglob("*.py"))
        elif p.with_suffix(".py").exists():  # a module
            out.append(p.with_suffix(".py"))
    return out


ABOVE_CORE = ("kungfud.store", "kungfud.actors", "kungfud.reads", "kungfud.server", "kungfud.wire", "kungfud.daemon")


def test_the_core_imports_nothing_above_it():
    """The pure core knows no store, actor, server or wire."""
    assert _offenders(_files("core"), ABOVE_CORE + ("lmdb", "pykka", "websockets")) == {}


def test_webhook_delivery_reaches_the_store_only_through_the_runtime():
    """kungfud/webhooks/ asks kungfud.actors.hooks for everything stored (docs/architecture.md)."""
    assert _offenders(_files("webhooks"), ("kungfud.store", "lmdb", "psycopg")) == {}


def test_each_layer_imports_only_downwards():
    assert _offenders(_files("store"), ("kungfud.actors", "kungfud.reads", "kungfud.server", "kungfud.daemon")) == {}
    assert _offenders(_files("actors"), ("kungfud.server", "kungfud.daemon")) == {}
    # the wire is a leaf: clients import it without the daemon
    wire_may_not = ("kungfud.core", "kungfud.store", "kungfud.actors", "kungfud.reads", "kungfud.server", "kungfud.daemon")
    assert _offenders(_files("wire"), wire_may_not) == {}


def test_the_a2a_endpoint_runs_ops_only():
    """kungfud/a2a/ calls ops by name through the server's front door
    (Server.call) and reads events through the Runtime: no core, store, actor
    internals or reads (A2A-SPLIT.md's seam)."""
    files = _files("a2a")
    assert len(files) >= 5
    assert _offenders(files, ("kungfud.core", "kungfud.store", "kungfud.actors", "kungfud.reads", "kungfud.server")) == {}


def test_the_websocket_daemon_imports_the_a2a_endpoint_only_when_it_serves_it():
    """Without the ``a2a`` extra (a2a-sdk, uvicorn) the daemon and its
    supervisor still run: they import kungfud.a2a.serve inside a function, and
    nothing of kungfud.a2a at module level but the extra-free card module."""
    for name in ("daemon.py", "supervisor.py", "worker.py"):
        tree = ast.parse((PKG / name).read_text())
        top = {n.module for n in tree.body if isinstance(n, ast.ImportFrom) and n.module}
        assert not any(m.startswith("a2a") and m not in ("a2a.card",) for m in top), (name, top)
    assert {"a2a", "uvicorn", "starlette"}.isdisjoint(m.split(".")[0] for m in _imports(PKG / "a2a" / "card.py"))


def test_the_event_kinds_are_a_leaf():
    """kungfud/event_kinds.py (the one definition of the event kinds, D285)
    imports nothing of kungfud's, so every layer may import it: the wire and
    the clients too."""
    assert _offenders(_files("event_kinds"), ("kungfud",)) == {}


def test_clients_know_only_the_wire():
    """The CLI and the MCP bridge talk to a daemon over the wire; they import
    none of its insides (so they run where no daemon is installed)."""
    files = _files("client", "agent_cli", "mcp")
    assert len(files) >= 3
    assert _offenders(files, ("kungfud.core", "kungfud.store", "kungfud.actors", "kungfud.reads", "kungfud.server")) == {}


def _modules(outside: str) -> list[Path]:
    return [p for p in sorted(PKG.rglob("*.py")) if outside not in p.relative_to(PKG).parts[:1]]


def test_nothing_outside_the_store_opens_lmdb_or_reaches_into_a_view():
    """Only ``kungfud/store/`` knows LMDB: no other module imports ``lmdb`` or
    touches a View's transaction, databases or snapshot (``.txn``/``.dbs``/``.kv``,
    public or not);
    it asks the View's named queries (docs/storage.md "Reads"), which a second
    backend can answer too."""
    found = []
    for path in _modules(outside="store"):
        tree = ast.parse(path.read_text(), str(path))
        where = path.relative_to(PKG.parent)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "lmdb" for a in node.names):
                found.append(f"{where}:{node.lineno} imports lmdb")
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "lmdb" and node.level == 0:
                found.append(f"{where}:{node.lineno} imports from lmdb")
            elif isinstance(node, ast.Attribute) and node.attr in ("txn", "dbs", "_txn", "_dbs", "kv"):
                found.append(f"{where}:{node.lineno} uses .{node.attr}")
    assert not found, "LMDB outside kungfud/store/:\n" + "\n".join(found)


STORAGE_LIBRARIES = ("lmdb", "psycopg", "psycopg2", "psycopg_pool")


def test_psycopg_is_imported_only_by_the_postgresql_backend_and_the_node_mechanisms():
    """PostgreSQL is known to ``kungfud/store/postgres/`` (the backend) and
    ``kungfud/nodes/`` (LISTEN/NOTIFY, advisory-lock leases) only."""
    files = [
        p for p in sorted(PKG.rglob("*.py"))
        if p.relative_to(PKG).parts[:2] != ("store", "postgres") and p.relative_to(PKG).parts[:1] != ("nodes",)
    ]
    assert len(files) > 50
    assert _offenders(files, ("psycopg", "psycopg2", "psycopg_pool")) == {}


def test_the_shared_store_modules_import_no_storage_library():
    """The kv layer, the interface, the planner, the write engine, the index
    rows, check/migration and the integrity check are written once for every
    backend (docs/storage.md "The store interface", D101): none imports a
    storage library; LMDB is ``lmdb.py``, ``lmdb_kv.py`` and ``failures.py``'s
    classification. The read view and the rows' encoding are shared too."""
    shared = ("kv", "interface", "plan", "writer", "indexes", "check", "integrity", "events", "layout", "view", "codec")
    files = _files(*(f"store/{m}" for m in shared))
    assert len(files) == len(shared)
    assert _offenders(files, STORAGE_LIBRARIES) == {}


# --- the table of docs/architecture.md ------------------------------------------

PAGE = PKG.parent / "docs" / "architecture.md"


def _unit(name: str) -> str:
    """A name of the page (`server/`, `cli.py`, `__init__.py`) as a unit of kungfud/."""
    return name.rstrip("/").removesuffix(".py")


def _table() -> list[tuple[list[str], set[str] | None]]:
    """The rows of "Packages and layers", top to bottom: (units, may import;
    None: everything below)."""
    text = PAGE.read_text().split("## Packages and layers", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or cells[0] in ("layer", "---"):
            continue
        # The package cell's units end in / or .py (`kungfu`, a command, is not one).
        units = [_unit(n) for n in re.findall(r"`([^`]+)`", cells[1]) if n.endswith(("/", ".py"))]
        may = None if cells[3] == "everything below" else {_unit(n) for n in re.findall(r"`([^`]+)`", cells[3])}
        rows.append((units, may))
    return rows


def _units_on_disk() -> set[str]:
    return {p.name if p.is_dir() else p.stem + ".py" for p in PKG.iterdir()
            if (p.is_dir() and (p / "__init__.py").exists()) or p.suffix == ".py"}


def _depends(unit: str) -> set[str]:
    """The units of kungfud/ that ``unit``'s modules import (the package's
    own ``__version__`` is ``__init__``)."""
    p = PKG / unit
    files = sorted(p.rglob("*.py")) if p.is_dir() else [f for f in [p.with_suffix(".py")] if f.exists()]
    out = set()
    for f in files:
        for m in _imports(f):
            parts = m.split(".")
            if parts[0] == "kungfud" and len(parts) > 1:
                out.add("__init__" if parts[1] == "__version__" else parts[1])
    return out - {unit}


def test_the_architecture_page_names_every_package_and_module_under_kungfud():
    named = {u for units, _ in _table() for u in units}
    missing = sorted(u for u in _units_on_disk() if _unit(u) not in named)
    assert missing == [], f"docs/architecture.md has no row for {missing}"
    assert named <= {_unit(u) for u in _units_on_disk()}, "a row names what is not under kungfud/"


def test_each_layer_imports_only_what_the_architecture_page_says_and_only_downwards():
    """Every direction the page states: a row's code imports only the units its
    "may import" cell names, or its own row's (the entry points: anything below
    them); and every unit a cell names is in a row below (or its own) — so the page itself
    states no arrow up (`webhooks/` ↛ `server/` and `server/` ↛ `webhooks/`
    among them)."""
    rows = _table()
    assert len(rows) >= 10
    wrong = {}
    for i, (units, may) in enumerate(rows):
        below = {u for lower, _ in rows[i + 1 :] for u in lower}
        if may is not None:
            assert may <= below | set(units), f"row {units}: may import {sorted(may - below)}, not below it"
        allowed = (below if may is None else may) | set(units)
        for unit in units:
            extra = _depends(unit) - allowed
            if extra:
                wrong[unit] = sorted(extra)
    assert wrong == {}, f"imports the page does not allow: {wrong}"


def test_the_webhook_runner_and_the_server_import_nothing_of_each_other():
    """The daemon wires the runner to the server (its sink); the event frame is
    built below both (``kungfud.event_kinds.frame``)."""
    assert _offenders(_files("webhooks"), ("kungfud.server",)) == {}
    assert _offenders(_files("server"), ("kungfud.webhooks",)) == {}
