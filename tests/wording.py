"""How a rejection's reason may read (WIRE.md 1.1 "Wording of rejections"): a
sentence for the caller that names no internal reference — no rule id, section
number or decision number. The spec rule, where one applies, is in ``rule``.

Every rejection the suites check (``tests/e2e/helpers.check_error`` for replies on
the wire, the core worlds' ``well_formed``/``assert_well_formed`` for decisions)
goes through :func:`check_wording`, so the hostile, all-ops and scenario suites
together walk every reason the daemon produces."""

from __future__ import annotations

import re

INTERNAL_REF = re.compile(r"R\d|§|\bB\d+\b|\bD\d+\b|DECISIONS")
RULE_ID = re.compile(r"R\d+(\.\d+)?-\d+")


QUOTED = re.compile(r"`.*`", flags=re.S)  # first to last backtick: what the reason quotes


def check_wording(reason: str, rule: object = None, what: object = None) -> None:
    """Client text a reason quotes (an unknown op or field, a path, a type) is in
    backticks and may hold anything, "§" included; the daemon's own words may not."""
    found = INTERNAL_REF.search(QUOTED.sub("``", reason))
    assert found is None, f"a reason names an internal reference {found.group()!r}: {what if what is not None else reason}"
    if rule is not None:
        assert isinstance(rule, str) and RULE_ID.fullmatch(rule), f"`rule` is not a spec rule id: {what or rule}"
