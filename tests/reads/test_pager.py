"""The one pager of the scanned list reads (``reads/pager.py``): a page stops at
``limit`` items or its scan budget, the cursor resumes after the last row
examined so nothing is skipped (R8-10), and a cursor that would name a row the
caller was not shown is sealed (D44, R12-9). Pure: the rows are a list here."""

from __future__ import annotations

import base64

import pytest

from kungfud.errors import Rejection
from kungfud.reads import cursors, pager

ROWS = [(f"{n:02d}".encode(), n) for n in range(20)]  # (position, row), in page order


def _rows(after: bytes | None):
    return [(p, r) for p, r in ROWS if after is None or p > after]


def _all(item, *, limit: int, budget: int, seal: bool = True, caller: str = "ag_01me"):
    got, cursors, cursor = [], [], None
    for _ in range(100):
        page = pager.page("turn", caller, cursor, limit, budget, _rows, item, pager.IDS, seal=seal)
        assert isinstance(page, dict), page
        assert len(page["items"]) <= limit
        got += page["items"]
        cursor = page["cursor"]
        if cursor is None:
            return got, cursors
        cursors.append(cursor)
    raise AssertionError("paging did not end")


@pytest.mark.rules("R8-10", "R8-13")
@pytest.mark.parametrize("limit,budget", [(1, 1), (3, 2), (2, 5), (100, 3), (100, 1000)])
def test_R8_10_pages_skip_nothing_and_each_examines_at_most_its_budget(limit, budget):
    examined = []

    def item(row: int):
        examined.append(row)
        return {"n": row} if row % 3 else None  # every third row is not the caller's to see

    got, _ = _all(item, limit=limit, budget=budget)
    assert [i["n"] for i in got] == [n for _, n in ROWS if n % 3]
    assert examined == [n for _, n in ROWS], "every row examined once, in order"


@pytest.mark.rules("R12-9", "R8-10")
def test_R12_9_a_cursor_that_stops_on_a_hidden_row_is_sealed_and_only_its_caller_resumes_it(monkeypatch):
    # A fixed key and nonce make the sealed bytes the same in every run: the
    # check below looks for the hidden positions in them, which random bytes
    # would hold by chance once in ~30 runs.
    monkeypatch.setattr(cursors, "_KEY", bytes(range(32)))
    monkeypatch.setattr(cursors.os, "urandom", lambda n: bytes(range(1, n + 1)))
    hidden = {3, 4, 5}
    got, cursor_list = _all(lambda n: None if n in hidden else {"n": n}, limit=100, budget=3)
    assert [i["n"] for i in got] == [n for _, n in ROWS if n not in hidden]
    clear = [c for c in cursor_list if not c.startswith("~")]
    assert clear and all(int(c) not in hidden for c in clear), cursor_list  # a position in the clear was shown
    sealed = [c for c in cursor_list if c.startswith("~")]
    raw = [base64.urlsafe_b64decode(c[1:] + "=" * (-len(c[1:]) % 4)) for c in sealed]
    assert sealed and not any(f"{n:02d}".encode() in r or f"{n:02d}" in c for r, c in zip(raw, sealed) for n in hidden)
    assert [cursors.unseal("turn", "ag_01me", c) for c in sealed] == [b"05"]  # the last hidden row examined
    other = pager.page("turn", "ag_01other", sealed[0], 100, 3, _rows, lambda n: {"n": n}, pager.IDS)
    assert isinstance(other, Rejection) and other.code == "bad_request"


@pytest.mark.rules("R8-10")
def test_R8_10_a_read_whose_rows_are_all_readable_never_seals():
    _, cursors = _all(lambda n: None if n % 2 else {"n": n}, limit=100, budget=3, seal=False)
    assert cursors and not any(c.startswith("~") for c in cursors)


@pytest.mark.rules("R8-10")
def test_R8_10_a_position_the_query_could_not_have_returned_is_refused():
    page = pager.page("turn", "ag_01me", "99", 10, 10, _rows, lambda n: {"n": n}, pager.IDS, valid=lambda p: p < b"20")
    assert isinstance(page, Rejection) and page.code == "bad_request"
    assert page.reason == "`cursor` is not a cursor this daemon returned: pass the previous page's `cursor`, or leave it out"
