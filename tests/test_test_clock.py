"""The test-only daemon clock (``KUNGFUD_TEST_CLOCK``, kungfud/testing/offset_clock.py)
that the deadline e2e tests move instead of sleeping. It guards no spec rule;
it guards the tests that do: time only moves forward, a half-written offset is
never read, and the first call that sees an advance wakes the deadline clock."""

from __future__ import annotations


from kungfud.testing.offset_clock import ENV, OffsetClock


def _clock(tmp_path, wall: list[int]) -> tuple[OffsetClock, list[int]]:
    woken: list[int] = []
    c = OffsetClock(str(tmp_path / "clock"), wall=lambda: wall[0])
    c.on_advance = lambda: woken.append(c.offset_ms)
    return c, woken


def test_the_clock_is_the_wall_clock_plus_the_written_offset_and_never_moves_back(tmp_path):
    wall = [1_000]
    c, woken = _clock(tmp_path, wall)
    assert c() == 1_000 and woken == []  # no file yet: the wall clock
    (tmp_path / "clock").write_text("60500\n")
    assert c() == 61_500 and c() == 61_500
    assert woken == [60_500], "the first call that sees an advance wakes the deadline clock, once"
    wall[0] = 1_010
    assert c() == 61_510
    (tmp_path / "clock").write_text("5")  # smaller: ignored
    assert c() == 61_510 and woken == [60_500]
    for junk in ("", "12a", "-"):  # empty or half-written: the last offset stays
        (tmp_path / "clock").write_text(junk)
        assert c() == 61_510
    (tmp_path / "clock").unlink()
    assert c() == 61_510


def test_it_is_on_only_when_the_variable_names_a_file(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert OffsetClock.from_env() is None
    monkeypatch.setenv(ENV, "")
    assert OffsetClock.from_env() is None
    monkeypatch.setenv(ENV, str(tmp_path / "clock"))
    c = OffsetClock.from_env()
    assert c is not None and c.path == str(tmp_path / "clock")


def test_a_frozen_clock_stands_still_and_never_goes_back(tmp_path):
    """``=T`` holds the clock at T (several actions in one millisecond, D282);
    a later offset moves it on, never below what it returned."""
    wall = [1_000]
    c, woken = _clock(tmp_path, wall)
    (tmp_path / "clock").write_text("=5000")
    wall[0] = 1_200
    assert c() == 5_000 and c() == 5_000 and woken == []
    (tmp_path / "clock").write_text("=4000")  # earlier than returned: it stays
    assert c() == 5_000
    (tmp_path / "clock").write_text("100")  # thawed: the wall plus the offset, but not back
    assert c() == 5_000
    wall[0] = 6_000
    assert c() == 6_100 and woken == [100]
