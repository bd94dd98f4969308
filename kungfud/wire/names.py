"""Agent names that cannot pass for each other (security review 4, item 4).

- :func:`normalized` — what a name is stored as when it is set
  (``agent.register``, ``admin.agent.create``): Unicode NFKC (full-width,
  mathematical and other compatibility forms become the plain letters), and
  never an invisible or control character (categories Cc, Cf, Cs, Co, Cn,
  Zl, Zp, and the few letters and marks Unicode lists as default-ignorable,
  such as U+3164 HANGUL FILLER): a name with one is ``bad_request``.
- :func:`skeleton` — Unicode's confusable skeleton (UTS #39 §4): two names
  with one skeleton look alike (``alice`` and ``аlice`` with a Cyrillic а).
  Clients (the CLI, the console) write every agent whose name is confusable
  with another's they show with its id beside the name.

The mapping is a table derived from Unicode's ``confusables.txt`` (UTS #39,
version 14.0.0): the entries whose prototype is ASCII and whose source NFKC
leaves as it is (NFKC, applied first, already folds the rest). 653 entries,
9 KB, in ``kungfud/console/confusables.json``, which the console fetches too:
one table for both clients. ``docs/gen_confusables.py`` derives it. A
dependency (``confusable-homoglyphs``, ``confusables``) would bring the whole
table and an API shaped for other questions (is this string mixed-script?),
not the skeleton; the derived table is the part this question needs.
"""

from __future__ import annotations

import json
import unicodedata
from functools import lru_cache
from importlib import resources
from typing import Mapping

__all__ = ["normalized", "skeleton", "confusable", "invisible"]

_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
# Default-ignorable code points outside those categories (DerivedCoreProperties).
_IGNORABLE = frozenset(
    {0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x3164, 0xFFA0, *range(0x180B, 0x1810), *range(0xFE00, 0xFE10),
     *range(0xE0100, 0xE01F0)}
)


def invisible(ch: str) -> bool:
    """Whether ``ch`` draws nothing or controls the text rather than being a character of it."""
    return unicodedata.category(ch) in _INVISIBLE_CATEGORIES or ord(ch) in _IGNORABLE


def normalized(name: str) -> str:
    """``name`` as stored: NFKC. Raises ValueError naming the first invisible
    or control character, or a name that NFKC leaves empty or too long."""
    out = unicodedata.normalize("NFKC", name)
    for ch in out:
        if invisible(ch):
            raise ValueError(
                f"may not hold an invisible or control character (U+{ord(ch):04X} "
                f"{unicodedata.name(ch, 'unnamed')}): it would let one name pass for another"
            )
    if not out.strip():
        raise ValueError("must hold a visible character")
    if len(out) > 200:
        raise ValueError("is over 200 characters once normalized (NFKC)")
    return out


@lru_cache(maxsize=1)
def _table() -> dict[str, str]:
    raw = resources.files("kungfud.console").joinpath("confusables.json").read_bytes()
    return json.loads(raw)


def skeleton(name: str) -> str:
    """UTS #39 skeleton of ``name`` after NFKC, its invisible characters
    dropped (names stored before they were refused still compare)."""
    table = _table()
    text = unicodedata.normalize("NFD", unicodedata.normalize("NFKC", name))
    mapped = "".join(table.get(ch, ch) for ch in text if not invisible(ch))
    return unicodedata.normalize("NFD", mapped)


def confusable(names: Mapping[str, str]) -> set[str]:
    """The agents (keys of ``names``, agent id -> name) whose name looks like
    another agent's: the same skeleton (equal names included)."""
    by: dict[str, list[str]] = {}
    for agent, name in names.items():
        by.setdefault(skeleton(name), []).append(agent)
    return {agent for group in by.values() if len(group) > 1 for agent in group}
