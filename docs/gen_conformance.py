"""Generate docs/conformance.md (§10.3) from the rule ids that tests cite.

Every test carries ``@pytest.mark.rules("R5-6", …)``; this script reads them
with ``ast`` (no imports), joins them with the 321 rules of
``docs/spec/rules.md`` (a copy of the project's ``spec/rules.md``), and writes the
conformance statement. ``tests/test_conformance_doc.py`` fails when the
committed file differs from what this script would write, so the statement never
drifts from the tests.

    python docs/gen_conformance.py          # rewrite docs/conformance.md
    python docs/gen_conformance.py --check  # exit 1 if it is out of date
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path
from generated import write_or_check  # docs/generated.py

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "docs" / "spec" / "rules.md"
OUT = ROOT / "docs" / "conformance.md"
TESTS = ROOT / "tests"

# Rules that no black-box test can evidence, with why (rules.md says so).
NOT_TESTABLE = {
    "R1-1": "scope statement",
    "R1-2": "permission to extend; extensions are checked by R1-3…R1-5",
    "R4-3": "account state is the implementation's; its effects are R4-4…R4-8",
    "R7.6-1": "documentation of the implementation's own Task mechanisms",
    "R7.6-2": "a permission (MAY)",
    "R10.4-1": "a statement about interoperability",
    "R11-1": "versioning of the specification itself",
    "R11-2": "versioning of the specification itself",
    "R11-3": "versioning of the specification itself",
    "R11-4": "versioning of the specification itself",
    "R11-5": "versioning of the specification itself",
    "R11-6": "the specification's change process",
    "R11-7": "the specification's change process",
    "R12-2": "client-side behaviour (agents SHOULD treat content as data)",
    "R10-1": "defines conformance; this statement is its application",
    "R10.1-1": "about how claims are read; this statement names its profiles",
    "R10.1-4": "profile definition (this statement claims it with the evidence below)",
    "R10.1-5": "profile definition (this statement claims it with the evidence below)",
    "R10.1-6": "profile definition (this statement claims it with the evidence below)",
    "R10.2-8": "about what counts as evidence; every test here observes behaviour over the wire or the pure core",
    "R10.3-2": "about reference implementations; kungfud is not one",
    "R10.4-2": "kungfud ships no adapter to another implementation",
    "R11-8": "documentation review: docs/decisions.md records choices only where the spec is silent",
}


def rules() -> list[tuple[str, str, str, str]]:
    """(id, section, paraphrase, kind) for each row of the rules table."""
    out = []
    for line in RULES.read_text().splitlines():
        m = re.match(r"^\| ([RL][0-9.]+-[0-9]+) \| ([^|]+) \| ([^|]+) \| ([^|]+) \|", line)
        if m:
            out.append((m.group(1), m.group(2).strip(), m.group(3).strip(), m.group(4).strip()))
    return out


def _test_files() -> list[Path]:
    """The committed test files (so work in progress never leaks into the
    statement); every test file when git is not available."""
    import subprocess

    try:
        r = subprocess.run(["git", "ls-files", "tests"], cwd=ROOT, capture_output=True, text=True, check=True)
        files = [ROOT / f for f in r.stdout.split() if Path(f).name.startswith("test_") and f.endswith(".py")]
        if files:
            return sorted(files)
    except (OSError, subprocess.CalledProcessError):
        pass
    return sorted(TESTS.rglob("test_*.py"))


def cited() -> dict[str, list[str]]:
    """rule id -> tests citing it (``path::name``), from rules markers."""
    out: dict[str, list[str]] = {}
    for path in _test_files():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            for dec in node.decorator_list:
                if (
                    isinstance(dec, ast.Call)
                    and isinstance(dec.func, ast.Attribute)
                    and dec.func.attr == "rules"
                ):
                    for arg in dec.args:
                        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                            out.setdefault(arg.value, []).append(f"{path.relative_to(ROOT)}::{node.name}")
    return out


def render() -> str:
    from kungfud import SPEC_VERSION, __version__

    rs = rules()
    tests = cited()
    known = {r[0] for r in rs}
    # Decision ids (B…, T…, D…) may be cited too; only R/L ids must exist.
    unknown = sorted(t for t in set(tests) - known if t[0] in "RL")
    met = [r for r in rs if r[0] in tests]
    untestable = [r for r in rs if r[0] not in tests and r[0] in NOT_TESTABLE]
    unmet = [r for r in rs if r[0] not in tests and r[0] not in NOT_TESTABLE]
    lines = [
        "# Conformance statement (§10.3)",
        "",
        "Generated by `python docs/gen_conformance.py` from the rule ids that the tests",
        "cite (`@pytest.mark.rules(…)`); `tests/test_conformance_doc.py` keeps it current.",
        "",
        "| | |",
        "|---|---|",
        f"| Specification | Kungfu protocol {SPEC_VERSION} (v1.0 Release Candidate 1) |",
        f"| Implementation | kungfud {__version__} (commit: see `git log -1` of this file) |",
        (
            "| Profiles claimed | Full (Memory, Thread, Task, restricted Tasks, discovery of opportunities) |"
            if not unmet
            else "| Profiles claimed | Memory, Thread, Task — not Full: the rules listed below have no test yet (R10.1-2, R10.1-3) |"
        ),
        f"| Rules | {len(rs)} in `spec/rules.md`: {len(met)} evidenced by tests, {len(untestable)} not black-box testable, {len(unmet)} without a test yet |",
        "| Evidence | the tests named below, run by `.ci/run` on every submission |",
        "",
        "Known deviations and decisions on what the spec leaves open: [decisions.md](decisions.md).",
        "",
    ]
    if unknown:
        lines += ["Rule ids cited by tests but not in rules.md: " + ", ".join(unknown), ""]
    decisions = sorted(t for t in tests if t[0] not in "RL")
    if decisions:
        lines += [
            "Decisions cited by tests (see decisions.md): "
            + ", ".join(f"{d} ({len(tests[d])})" for d in decisions),
            "",
        ]
    lines += ["## Rules without a test yet", ""]
    if unmet:
        lines += ["| rule | section | kind | paraphrase |", "|---|---|---|---|"]
        lines += [f"| {r[0]} | {r[1]} | {r[3]} | {r[2]} |" for r in unmet]  # kind, paraphrase
    else:
        lines.append("None.")
    lines += ["", "## Not black-box testable", "", "| rule | why |", "|---|---|"]
    lines += [f"| {r[0]} | {NOT_TESTABLE[r[0]]} |" for r in untestable]
    lines += ["", "## Evidence by rule", "", "| rule | kind | tests |", "|---|---|---|"]
    for r in met:
        names = tests[r[0]]
        shown = ", ".join(f"`{n.split('::')[1]}`" for n in names[:3])
        more = f" (+{len(names) - 3} more)" if len(names) > 3 else ""
        lines.append(f"| {r[0]} | {r[3]} | {shown}{more} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    return write_or_check(OUT, render)

if __name__ == "__main__":
    sys.exit(main())
