"""`.ci/run` runs README's test command as it is (a rule of the project: what
CI passes is what a newcomer runs), and README says how long it takes."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _readme_test_command() -> str:
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"\*\*Run the tests:\*\*\s*```sh\n(.+?)\n```", readme, re.S)
    assert block, "README has no 'Run the tests' sh block"
    (line,) = block.group(1).strip().splitlines()
    return line


def test_ci_runs_readmes_test_command_as_it_is():
    command = _readme_test_command()
    assert "pytest" in command
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if not line.lstrip().startswith("#")]
    assert any(command in line for line in ci), f".ci/run does not run README's command {command!r}"


def test_readme_says_how_long_the_suite_takes_and_gives_a_one_minute_subset():
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("**Run the tests:**") :][:2000]
    assert re.search(r"\d+.\d* minutes on an idle 2-core machine", section), section
    assert "one-minute subset" in section and "-m \"not long_test\"" in section
