"""§10.3 R10.3-1: the conformance statement names its evidence; it is generated
from the rule ids the tests cite and must match the committed file."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.rules("R10.3-1", "R10.1-2", "R10.1-3")
def test_R10_3_1_conformance_statement_is_generated_from_the_tests():
    r = subprocess.run([sys.executable, "docs/gen_conformance.py", "--check"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


@pytest.mark.rules("R10.3-1")
def test_R10_3_1_every_cited_rule_id_exists_in_rules_md():
    sys.path.insert(0, str(ROOT / "docs"))
    import gen_conformance

    known = {r[0] for r in gen_conformance.rules()}
    assert len(known) == 321
    unknown = {t for t in gen_conformance.cited() if t[0] in "RL"} - known
    assert not unknown, f"tests cite rule ids that do not exist: {sorted(unknown)}"
