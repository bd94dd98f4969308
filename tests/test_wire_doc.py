"""The project's own pages are its whole wire contract (issue 37 §2): README.md,
docs/ and examples/ send no reader to a ``WIRE.md`` the repository does not
have, and docs/wire.md keeps the sections they point to."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "examples").rglob("*.md")),
         ROOT / "docs" / "reference_data.py"]


@pytest.mark.rules("L2-4")
def test_no_page_sends_readers_to_a_wire_md_the_repository_does_not_have():
    assert not (ROOT / "WIRE.md").exists()
    found = [f"{p.relative_to(ROOT)}:{i}: {line.strip()}" for p in PAGES
             for i, line in enumerate(p.read_text().splitlines(), 1) if "WIRE.md" in line]
    assert not found, "point these at docs/wire.md (its sections) or docs/reference.md:\n" + "\n".join(found)


@pytest.mark.rules("L2-4")
def test_docs_wire_md_has_the_sections_of_the_whole_contract():
    headings = re.findall(r"^## (.+)$", (ROOT / "docs" / "wire.md").read_text(), flags=re.M)
    for section in ("Transport", "Frames", "Conventions", "Ops", "Precisions", "Events"):
        assert section in headings, (section, headings)
    assert "reference.md" in (ROOT / "docs" / "wire.md").read_text().split("## Transport")[0]
