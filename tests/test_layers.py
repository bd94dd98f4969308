"""The layers keep to their floors (issue #13, DESIGN.md "Layers"): checked on
the source, so a shortcut fails here before it becomes a habit."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "kungfud"


def _modules(outside: str) -> list[Path]:
    return [p for p in sorted(PKG.rglob("*.py")) if outside not in p.relative_to(PKG).parts[:1]]


def test_nothing_outside_the_store_opens_lmdb_or_reaches_into_a_view():
    """Only ``kungfud/store/`` knows LMDB: no other module imports ``lmdb`` or
    touches a View's transaction or databases (``.txn``/``.dbs``, public or not);
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
            elif isinstance(node, ast.Attribute) and node.attr in ("txn", "dbs", "_txn", "_dbs"):
                found.append(f"{where}:{node.lineno} uses .{node.attr}")
    assert not found, "LMDB outside kungfud/store/:\n" + "\n".join(found)
