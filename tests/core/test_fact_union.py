"""The one tagged union of facts (core/kinds.py ``AnyFact``) holds every fact
the core defines, whichever module defines it (core/facts.py,
core/task_facts.py): a fact left out could be decided but never stored and read
back, so state would not follow from the recorded facts (L1-1, L1-4)."""

from __future__ import annotations

from typing import get_args

import msgspec
import pytest

import kungfud.core  # noqa: F401  (every core module, through the table of kinds)
from kungfud.core.facts import Fact
from kungfud.core.kinds import AnyFact


def _every_fact_type(cls: type) -> set[type]:
    out: set[type] = set()
    for sub in cls.__subclasses__():
        out |= {sub} | _every_fact_type(sub)
    return out


@pytest.mark.rules("L1-1", "L1-4")
def test_every_fact_type_is_in_the_union_the_store_decodes():
    union = set(get_args(AnyFact))
    assert union == {t for t in _every_fact_type(Fact) if t.__module__.startswith("kungfud.")}
    tags = [msgspec.inspect.type_info(t).tag for t in union]
    assert len(tags) == len(set(tags)), "two facts share a tag"
