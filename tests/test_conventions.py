"""Conventions. WIRE.md "Conventions": times are RFC 3339 UTC strings with
milliseconds; ``rfc3339`` keeps the last second it formatted, and whatever
order times come in, each must read exactly as the calendar says.

And the code's own (STYLE.md, issue 33 §4), read from the source by AST: no
module imports another module's private (``_name``) names, no module is over
450 lines, and no two classes under ``kungfud/`` share a name, so a name means
one thing wherever a reader meets it. An exception is written in an allowlist
with its reason, and an entry that no longer applies fails too."""

from __future__ import annotations

import ast
import datetime as dt
import random
from collections import defaultdict
from pathlib import Path

from kungfud.conventions import rfc3339

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def _calendar(ms: int) -> str:
    t = _EPOCH + dt.timedelta(milliseconds=ms)
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def test_the_wire_example_and_the_epoch():
    assert rfc3339(1764504000000) == "2025-11-30T12:00:00.000Z"
    assert rfc3339(0) == "1970-01-01T00:00:00.000Z"
    assert rfc3339(1764504000001) == "2025-11-30T12:00:00.001Z"


def test_times_in_any_order_read_as_the_calendar_says():
    rng = random.Random(3339)
    base = 1764504000000
    times = [base - 1, base, base + 999, base + 1000, base - 86_400_000, base + 31_536_000_000 + 999]
    times += [base + rng.randrange(-5_000, 5_000) for _ in range(2_000)]  # runs within one second, and across
    times += [rng.randrange(0, 253_402_300_799_999) for _ in range(2_000)]  # up to 9999-12-31T23:59:59.999Z
    for ms in times:
        assert rfc3339(ms) == _calendar(ms), ms


# --- the code's conventions --------------------------------------------------------

PACKAGE = Path(__file__).resolve().parent.parent / "kungfud"
MAX_LINES = 450

# module (relative to the repository) -> why it may be longer, for now.
LONG_MODULES: dict[str, str] = {}
# class name -> why two classes under kungfud/ may share it.
SHARED_CLASS_NAMES: dict[str, str] = {}


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _rel(path: Path) -> str:
    return path.relative_to(PACKAGE.parent).as_posix()


def test_no_module_imports_a_private_name_of_another():
    """A ``_name`` is its module's own: what another module needs has a public
    name (issue 33 §4: agent_cli/plan.py imported 40 builders by their private names)."""
    found = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        found.append(f"{_rel(path)}:{node.lineno} imports {alias.name} from {'.' * node.level}{node.module or ''}")
    assert not found, "\n".join(found)


def test_no_module_is_over_450_lines():
    over = {}
    for path in _modules():
        n = len(path.read_text().splitlines())
        if n > MAX_LINES and _rel(path) not in LONG_MODULES:
            over[_rel(path)] = n
    assert not over, f"split along the ideas each holds (STYLE.md): {over}"
    stale = [m for m in LONG_MODULES if not (PACKAGE.parent / m).exists()
             or len((PACKAGE.parent / m).read_text().splitlines()) <= MAX_LINES]
    assert not stale, f"no longer over {MAX_LINES} lines (or gone): remove from LONG_MODULES: {stale}"


def test_no_two_classes_share_a_name():
    """Every class under kungfud/, nested ones too: one name, one idea."""
    where: dict[str, list[str]] = defaultdict(list)
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                where[node.name].append(f"{_rel(path)}:{node.lineno}")
    shared = {name: at for name, at in where.items() if len(at) > 1 and name not in SHARED_CLASS_NAMES}
    assert not shared, f"rename one of each (or allow it with a reason in SHARED_CLASS_NAMES): {shared}"
    stale = [name for name in SHARED_CLASS_NAMES if len(where.get(name, ())) < 2]
    assert not stale, f"no longer shared: remove from SHARED_CLASS_NAMES: {stale}"
