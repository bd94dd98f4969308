"""The pure core's imports point one way (DESIGN.md "Layers"; the structure
review's §1.1 found one 13-module cycle): facts and obligations at the bottom,
the concept modules above them, the table of kinds on top. Read from the source
(AST), so a cycle held together by an import inside a function is seen too;
imports only for type checking are not edges (they run no code)."""

from __future__ import annotations

import ast
from pathlib import Path

import kungfud.core

CORE = Path(kungfud.core.__file__).parent
NOT_YET: set[str] = set()  # modules still allowed an import inside a function


def _type_checking_only(node: ast.If) -> bool:
    return isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def _imports(tree: ast.Module) -> list[tuple[str, bool]]:
    """(core module imported, whether inside a function) for every runtime import."""
    out: list[tuple[str, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking_only(child):
                continue
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.ImportFrom) and child.level == 1:
                if child.module:
                    out.append((child.module.split(".")[0], in_function))
                else:
                    out.extend((alias.name, in_function) for alias in child.names)
            visit(child, inner)

    visit(tree, False)
    return out


def _graph(*, function_level: bool) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in sorted(CORE.glob("*.py")):
        if path.stem == "__init__":
            continue
        imports = _imports(ast.parse(path.read_text()))
        graph[path.stem] = {m for m, inside in imports if function_level or not inside}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected set of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1 or v in graph.get(v, ()):
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return found


def test_core_module_level_imports_form_no_cycle():
    assert _cycles(_graph(function_level=False)) == []


def test_core_imports_form_no_cycle_even_inside_functions():
    """Deactivation sits above agent and thread (core/deactivation.py), so no
    import inside a function closes a cycle either."""
    assert _cycles(_graph(function_level=True)) == []


def _imports_in_functions(tree: ast.Module) -> list[int]:
    """Lines of every import statement inside a function, of any module."""
    return [
        node.lineno
        for fn in ast.walk(tree)
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
        for node in ast.walk(fn)
        if isinstance(node, (ast.Import, ast.ImportFrom))
    ]


def test_no_imports_inside_functions_in_core():
    """A core module imports at its top; an import inside a function hides a cycle."""
    inside = {
        path.stem: _imports_in_functions(ast.parse(path.read_text()))
        for path in CORE.glob("*.py")
        if path.stem not in NOT_YET
    }
    assert {m: lines for m, lines in inside.items() if lines} == {}


# On top of ``kinds``: the wire shapes the feed and the reads build from states
# (core/shapes.py derives obligations through the table), and above them the
# events a fact makes (core/events.py), built from those shapes; no other core
# module uses either.
ABOVE_KINDS = {"shapes", "events"}


def test_nothing_in_core_imports_the_table_of_kinds():
    """``kinds`` sits on top: it imports every concept module, none imports it
    (decisions get its fold through ``core/__init__``, see core/decision.py) but
    the shapes above it, which no core module imports."""
    graph = _graph(function_level=True)
    assert {m for m, deps in graph.items() if "kinds" in deps} <= ABOVE_KINDS
    assert {m for m, deps in graph.items() if deps & ABOVE_KINDS} == {"events"}
    assert graph["events"] & ABOVE_KINDS == {"shapes"}  # and nothing imports the events
