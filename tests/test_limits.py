"""The sliding windows behind the rate limits (L4-5, R12-7), on a fake clock."""

from __future__ import annotations

import pytest

from kungfud.server.limits import SlidingWindow, TokenBucket


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.rules("L4-5")
def test_L4_5_a_window_admits_its_limit_then_refuses_until_the_oldest_hit_leaves():
    clock = FakeClock()
    w = SlidingWindow(3, 10.0, clock)
    assert [w.allow("a") for _ in range(4)] == [True, True, True, False]
    assert w.allow("b")  # per caller
    assert w.retry_after("a") == pytest.approx(10.0)
    clock.now += 4
    assert w.retry_after("a") == pytest.approx(6.0)
    clock.now += 6
    assert w.allow("a") and not w.full("a") and w.retry_after("a") == 0.0


@pytest.mark.rules("R12-7")
def test_R12_7_hits_are_counted_unconditionally_and_full_counts_nothing():
    clock = FakeClock()
    w = SlidingWindow(2, 5.0, clock)
    assert not w.full("a")
    w.hit("a")
    assert not w.full("a")
    w.hit("a")
    assert w.full("a") and w.full("a")  # asking does not count
    clock.now += 5.01
    assert not w.full("a")


@pytest.mark.rules("L4-5")
def test_L4_5_callers_without_a_hit_in_the_window_are_forgotten():
    """One key per connection must not make the table grow for ever."""
    clock = FakeClock()
    w = SlidingWindow(5, 60.0, clock)
    for i in range(5000):
        w.allow(f"conn:{i}")
        clock.now += 0.1  # 5000 callers over 500 s; only the last 600 are in the window
    assert len(w) <= 2048
    # a caller still inside the window keeps its count
    for _ in range(4):
        w.allow("conn:4999")
    assert w.full("conn:4999")


@pytest.mark.rules("L4-5", "R12-11")
def test_L4_5_a_read_bucket_admits_its_limit_at_once_then_its_rate_and_forgets_idle_callers():
    clock = FakeClock()
    b = TokenBucket(6, 60.0, clock)  # 6 at once, then one per 10 s
    assert [b.allow("a") for _ in range(7)] == [True] * 6 + [False]
    assert b.allow("b")  # per caller
    assert b.retry_after("a") == pytest.approx(10.0)
    clock.now += 5
    assert not b.allow("a") and b.retry_after("a") == pytest.approx(5.0)
    clock.now += 5
    assert b.allow("a") and not b.allow("a")
    clock.now += 3600  # an hour idle refills to the limit, never beyond
    assert [b.allow("a") for _ in range(7)] == [True] * 6 + [False]
    # Callers whose buckets are full again are forgotten when the table grows.
    b2 = TokenBucket(2, 1.0, clock)
    for i in range(2000):
        b2.allow(f"c{i}")
    clock.now += 10
    for i in range(2000, 4000):
        b2.allow(f"c{i}")
    assert len(b2) < 3000
