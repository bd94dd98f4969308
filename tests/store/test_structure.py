"""The store's structure (issue 33 §2, D380–D382), checked on the source (AST):
no import made inside a function in ``kungfud/store/`` or ``kungfud/reads/``
(such imports held a circle of six modules together), and no stored row
encoded or decoded outside ``store/codec.py`` (the one seam of the stored
values' serialization)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from kungfud.core.queries import Live, LiveEngagement
from kungfud.store import codec

PKG = Path(__file__).resolve().parents[2] / "kungfud"
PACKAGES = ("store", "reads")  # store/postgres/ included

# (module, imported name) of the imports allowed inside a function, each with why.
DEFERRED = {
    # The optional extra [postgresql]: psycopg is imported only for a PostgreSQL store.
    ("store/open.py", "postgres"),
    ("store/search_index.py", "postgres.search"),
    # The standard library's ctypes (about 2 MB) only when `kungfud check` lets
    # go of mapped pages (D367): the daemon never loads it (idle RSS, issue 38).
    ("store/lmdb_kv.py", "ctypes"),
    ("store/lmdb_kv.py", "ctypes.util"),
    # sqlite3 (about 2 MB) by the first search, not at start (idle RSS, issue 38 §3).
    ("store/search_index.py", "sqlite3"),
}

# Modules allowed to call msgspec's msgpack, each with why.
MSGPACK = {
    "store/codec.py",  # the seam
    "store/search_docs.py",  # a search document's id: a hash of the fact's msgpack, never stored as a row
}


def _modules() -> list[Path]:
    out = [p for name in PACKAGES for p in sorted((PKG / name).rglob("*.py"))]
    assert len(out) > 30
    return out


def _name(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    return [node.module or ".".join(a.name for a in node.names)]


def _inner_imports(path: Path) -> list[tuple[int, str]]:
    """(line, imported module) of every import inside a function of ``path``."""
    found = []
    for fn in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    found += [(node.lineno, name) for name in _name(node)]
    return found


def test_no_module_of_the_store_or_the_reads_imports_inside_a_function():
    """Every import at module level, so the import graph is the one the page
    draws (docs/architecture.md), with no circle hidden in a function; the
    allowed ones are listed above, each with its reason."""
    bad, used = [], set()
    for path in _modules():
        rel = str(path.relative_to(PKG))
        for line, name in _inner_imports(path):
            if (rel, name) in DEFERRED:
                used.add((rel, name))
            else:
                bad.append(f"{rel}:{line} imports {name} inside a function")
    assert bad == [], "\n".join(bad)
    assert used == DEFERRED, f"allowed but no longer there: {DEFERRED - used}"


def test_the_import_check_finds_an_import_inside_a_function(tmp_path):
    """The check above can fail: a function-level import is found, a
    module-level one and one under TYPE_CHECKING are not."""
    src = tmp_path / "m.py"
    src.write_text(
        "from typing import TYPE_CHECKING\nimport os\nif TYPE_CHECKING:\n    from .kv import Snapshot\n"
        "def f():\n    from .store import View\n    return View\n"
    )
    assert _inner_imports(src) == [(6, "store")]


def _calls_msgpack(path: Path) -> list[int]:
    tree = ast.parse(path.read_text(), str(path))
    return [
        n.lineno for n in ast.walk(tree)
        if isinstance(n, ast.Attribute) and n.attr == "msgpack" and isinstance(n.value, ast.Name) and n.value.id == "msgspec"
    ] + [
        n.lineno for n in ast.walk(tree)
        if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("msgspec") and any(a.name == "msgpack" for a in n.names)
    ]


def test_stored_rows_are_encoded_and_decoded_in_codec_only():
    """A change of the stored values' serialization touches store/codec.py
    alone (D382): no other module of the store, its backends or the reads
    reaches for msgpack (the keys' fixed-width numbers are layout.py's)."""
    bad = []
    for path in _modules():
        rel = str(path.relative_to(PKG))
        if rel not in MSGPACK and (lines := _calls_msgpack(path)):
            bad.append(f"{rel}:{lines}")
    assert bad == [], bad


@pytest.mark.rules("L1-1")
@pytest.mark.parametrize(
    "table, key, value",
    [
        ("live", b"th_1\x00aas_1", Live("ag_a", "ag_b", 3, "taken", "ag_b", 5)),
        ("live", b"tk_1\x00aen_1", LiveEngagement("ag_b", "delivered", 7)),
        ("live", b"th_1\x00pag_a\x00as_1", b""),
        ("agent_keys", b"h" * 32, ("ag_a", None, None, None)),
        ("agent_keys", b"k" * 32, ("ag_a", ["memory.create"], 9, "key_1")),
        ("events", b"*\x00" + bytes(8), codec.Offer(["ag_a"], None, b'{"event":"task_offered"}')),
        ("events", b"ag_a\x00" + bytes(8), b'{"event":"turn"}'),
        ("meta", b"event_kinds", {"turn": 0, "a2a_task": 12}),
        ("meta", b"seq", bytes(8)),
    ],
)
def test_a_row_of_each_shape_round_trips_through_the_codec(table, key, value):
    """The shapes the contract's run may not write (a Thread's live
    assignment, a scoped key): decoded as they were encoded, by table and key."""
    raw = codec.encode_row(table, key, value)
    back = codec.decode_row(table, key, raw)
    assert back == value
    assert codec.encode_row(table, key, back) == raw
