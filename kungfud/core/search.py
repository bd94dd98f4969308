"""Search's pure half (WIRE.md 1.3 "Search"): what text a document is, how a
query reads, and a score that depends on nothing but the document and the
query (R12-9, docs/decisions.md D345–D347). No I/O.

- :func:`content_text`: the text indexed for a content (L6: content is opaque
  JSON; every string value, at any depth, in document order — never keys,
  numbers or booleans).
- :func:`normalize` / :func:`tokens`: case- and accent-blind words (Unicode
  NFKD, combining marks dropped, case folded; a word is a run of letters and
  digits), the same as the engines' tokenizers (SQLite FTS5 ``unicode61
  remove_diacritics 2``; PostgreSQL through a column normalized here).
- :func:`parse`: ``q`` as terms, all of which must match: a word, a prefix
  (``word*``) or a phrase (``"two words"``).
- :func:`score`: BM25's saturation and length normalization with no corpus
  statistics (no IDF, a fixed reference length), so a document's score is the
  same whoever else's documents exist.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any, Iterator

from ..errors import Rejection

__all__ = ["Term", "content_text", "normalize", "tokens", "parse", "score", "snippet", "MAX_TERMS", "KINDS"]

KINDS = ("memory", "entry", "task", "delivery")
MAX_TERMS = 16  # terms in one query: a query's cost is bounded by its terms
_WORD = re.compile(r"[^\W_]+")
_QUERY = re.compile(r'"([^"]*)"?|(\S+)')
_K1 = 1.2
_B = 0.75
_REF_LEN = 64  # words: a fixed reference length, not the corpus average (which would leak)


@dataclass(frozen=True, slots=True)
class Term:
    """One term of a query: its words in order (one unless a phrase), and
    whether the last is a prefix."""

    words: tuple[str, ...]
    prefix: bool = False

    def fts5(self) -> str:
        """The term in FTS5's query syntax (words are letters and digits only)."""
        return '"' + " ".join(self.words) + '"' + ("*" if self.prefix else "")


def content_text(content: Any) -> str:
    """Every string value of ``content`` (decoded JSON), depth first, one per line."""
    out: list[str] = []
    stack = [content]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, dict):
            stack.extend(reversed(list(v.values())))
        elif isinstance(v, list):
            stack.extend(reversed(v))
    return "\n".join(out)


def normalize(text: str) -> str:
    """Case- and accent-blind form of ``text``: NFKD, combining marks dropped, case folded."""
    if text.isascii():  # nothing to decompose; ASCII case folding is lower-casing
        return text.lower()
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


def tokens(text: str) -> list[str]:
    """The words of ``text``, normalized."""
    return _WORD.findall(normalize(text))


def _terms(q: str) -> Iterator[Term]:
    for m in _QUERY.finditer(q):
        phrase, word = m.group(1), m.group(2)
        if phrase is not None:
            words = tokens(phrase)
            if words:
                yield Term(tuple(words))
            continue
        prefix = word.endswith("*")
        words = tokens(word)
        if words:  # "don't" is the phrase "don t"; a lone "*" is nothing
            yield Term(tuple(words), prefix)


def parse(q: str) -> list[Term] | Rejection:
    """The terms of ``q``, or ``bad_request`` when it has none or too many."""
    terms = list(dict.fromkeys(_terms(q)))
    if not terms:
        return Rejection.bad_request(
            "`q` has no words to search for: give words (all must match), a \"phrase in quotes\" or a prefix*"
        )
    if len(terms) > MAX_TERMS:
        return Rejection.bad_request(f"`q` has {len(terms)} terms; at most {MAX_TERMS}: search with fewer words")
    return terms


def _occurrences(words: list[str], term: Term) -> int:
    n = len(term.words)
    if n == 1:
        w = term.words[0]
        return sum(1 for x in words if x.startswith(w)) if term.prefix else words.count(w)
    count = 0
    for i in range(len(words) - n + 1):
        if all(words[i + j] == term.words[j] for j in range(n - 1)):
            last = words[i + n - 1]
            if last == term.words[-1] or (term.prefix and last.startswith(term.words[-1])):
                count += 1
    return count


def score(words: list[str], terms: list[Term]) -> float:
    """How well a text (its :func:`tokens`) matches ``terms``, from the text
    alone (R12-9): the sum over terms of BM25's term-frequency saturation,
    normalized by the text's length against a fixed reference length. Rounded
    to 4 places, so equal documents score exactly equal (then newest first)."""
    norm = _K1 * (1 - _B + _B * len(words) / _REF_LEN)
    total = 0.0
    for term in terms:
        tf = _occurrences(words, term)
        total += tf * (_K1 + 1) / (tf + norm) if tf else 0.0
    return round(total, 4)


SNIPPET_WORDS = 24  # words of context a snippet shows at most


def snippet(text: str, terms: list[Term]) -> str:
    """A short excerpt of ``text`` around the first word any term starts with
    (the start of the text when none is found), at most :data:`SNIPPET_WORDS` words."""
    spans = [(m.start(), m.end(), normalize(m.group())) for m in _WORD.finditer(text)]
    first = {(t.words[0], t.prefix and len(t.words) == 1) for t in terms}
    hit = 0
    for i, (_, _, w) in enumerate(spans):
        if any(w == f or (p and w.startswith(f)) for f, p in first):
            hit = i
            break
    lo = max(0, hit - SNIPPET_WORDS // 3)
    hi = min(len(spans), lo + SNIPPET_WORDS)
    if not spans:
        return ""
    out = " ".join(text[spans[lo][0]:spans[hi - 1][1]].split())
    return ("… " if lo > 0 else "") + out + (" …" if hi < len(spans) else "")
