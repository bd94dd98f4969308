"""docs/reference.md, the wire reference shipped with the code (issue 26 item 1),
is generated from the op catalogue and the args types by docs/gen_reference.py
and must match the committed file: every op is in it, and every example request
it shows is one the daemon decodes (its args type, and for an action the content
shapes the op checks)."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kungfud import wire
from kungfud.actors.ops import to_command
from kungfud.errors import CODES

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "docs"))

import gen_reference  # noqa: E402


@pytest.mark.rules("R10.3-1")
def test_reference_md_is_generated_from_the_catalogue_and_up_to_date():
    r = subprocess.run([sys.executable, "docs/gen_reference.py", "--check"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_reference_md_has_every_op_with_its_kind_and_every_error_code():
    text = (ROOT / "docs" / "reference.md").read_text()
    for op, spec in wire.OPS.items():
        assert f"\n### `{op}`\n" in text, op
        assert re.search(rf"\| \[`{re.escape(op)}`\]\(#[a-z0-9_]+\) \| {spec.kind} \|", text), op
    for code in CODES:
        assert f"| `{code}` |" in text, code
    for event in ("turn", "opportunity", "outcome"):
        assert f"| `{event}` |" in text and f'"event": "{event}"' in text, event


@pytest.mark.rules("L2-4")
def test_every_example_request_in_the_reference_decodes_with_its_op():
    text = (ROOT / "docs" / "reference.md").read_text()
    frames = gen_reference.example_requests()
    assert set(frames) == set(wire.OPS)
    for op, frame in frames.items():
        assert json.dumps(frame, ensure_ascii=False) in text, op
        args = wire.decode_args(wire.decode_envelope(json.dumps(frame)))
        if wire.OPS[op].kind == "A":
            to_command(op, args)  # content shapes (criteria, output, reason, note, name) hold
