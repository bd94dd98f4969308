"""The layering rules of docs/architecture.md, checked on the source (AST):
every import statement counts, at module level or inside a function, and under
``TYPE_CHECKING`` too."""

from __future__ import annotations

import ast
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

