"""Search's pure half (kungfud/core/search.py; WIRE.md 1.3 "Search"): how ``q``
reads, what text a content is, and a score that depends on the document alone
(R12-9)."""

from __future__ import annotations

import pytest

from kungfud.core.search import MAX_TERMS, Term, content_text, normalize, parse, score, snippet, tokens
from kungfud.errors import Rejection


@pytest.mark.rules("L6-2")
def test_every_string_value_of_content_is_text_and_nothing_else_is():
    content = {"title": "Plan", "n": 3, "ok": True, "none": None, "tags": ["a", {"deep": "Zèbre"}], "key_only": {}}
    assert content_text(content) == "Plan\na\nZèbre"
    assert content_text("just a string") == "just a string" and content_text(42) == ""


def test_matching_ignores_case_and_accents():
    assert normalize("Ünïcödé ÉTÉ ﬁne") == "unicode ete fine"
    assert tokens("Déjà-vu, l'été_2026!") == ["deja", "vu", "l", "ete", "2026"]
    assert tokens("STRASSE Straße") == ["strasse", "strasse"]  # case folding, not just lower-casing


def test_q_is_words_phrases_and_prefixes():
    assert parse('Deploy "Breaking  Change" upgr* ') == [
        Term(("deploy",)), Term(("breaking", "change")), Term(("upgr",), prefix=True)
    ]
    assert parse("don't") == [Term(("don", "t"))]  # one word that is two tokens: a phrase
    assert parse('"unclosed phrase') == [Term(("unclosed", "phrase"))]
    assert parse("a a A") == [Term(("a",))]  # the same term once
    assert Term(("x", "y"), prefix=True).fts5() == '"x y"*'


@pytest.mark.parametrize("q", ["", "   ", "*", '""', "!!! ---"])
def test_a_query_without_words_is_refused_saying_why(q):
    r = parse(q)
    assert isinstance(r, Rejection) and r.code == "bad_request" and "`q`" in r.reason


def test_too_many_terms_are_refused():
    r = parse(" ".join(f"w{i}" for i in range(MAX_TERMS + 1)))
    assert isinstance(r, Rejection) and r.code == "bad_request" and str(MAX_TERMS) in r.reason
    assert not isinstance(parse(" ".join(f"w{i}" for i in range(MAX_TERMS))), Rejection)


@pytest.mark.rules("R12-9")
def test_the_score_is_a_function_of_the_document_and_the_query_alone():
    terms = parse("kiwi fruit*")

    def of(text: str, terms=terms) -> float:
        return score(tokens(text), terms)

    assert of("Kiwi fruits") == of("kiwi FRUITS")
    assert of("kiwi kiwi fruits") > of("kiwi fruits")  # more occurrences
    assert of("kiwi fruits " + "filler " * 200) < of("kiwi fruits")  # longer text
    assert of("nothing here") == 0.0
    phrase = parse('"kiwi fruit"')
    assert of("fruit kiwi", phrase) == 0.0 and of("a kiwi fruit", phrase) > 0


def test_the_snippet_shows_the_first_match_in_its_context():
    text = " ".join(f"w{i}" for i in range(100)) + " the Wombat decision " + " ".join(f"v{i}" for i in range(100))
    s = snippet(text, parse("wombat"))
    assert "Wombat decision" in s and s.startswith("… ") and s.endswith(" …") and len(s.split()) <= 26
    assert snippet("short text", parse("absent")) == "short text"
    assert snippet("", parse("x")) == ""
