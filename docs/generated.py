"""What every generated doc's script does with its text (``gen_conformance.py``,
``gen_reference.py``): write it, or with ``--check`` say whether the file in
the repository is up to date (exit 1, and how to regenerate, when not)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent


def write_or_check(out: Path, render: Callable[[], str]) -> int:
    sys.path.insert(0, str(ROOT))
    text = render()
    script = f"docs/gen_{out.stem}.py"
    if "--check" in sys.argv:
        if not out.exists() or out.read_text() != text:
            print(f"{out.relative_to(ROOT)} is out of date: run python {script}", file=sys.stderr)
            return 1
        return 0
    out.write_text(text)
    print(f"wrote {out.relative_to(ROOT)}")
    return 0
