"""Reads over the open-Task stream are bounded by what they return (D331;
issue 35 item 2, reviews/security.md round 4 finding 2: with ~100k offers
restricted to other agents, one ``subscribe {since: 0, open_tasks: true}``
decoded every one of them on the event loop — 775 ms —, and ``webhook.get``'s
``pending`` and the webhook runner did the same). A page of the feed passes
over at most ``PASS_LIMIT`` offers not meant for its reader and says the seq it
read up to, where the next page, the live floor or the runner's cursor
continues; ``pending`` reads at most ``PENDING_PASS`` rows it does not count."""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from kungfud.actors.event_pages import PASS_LIMIT, page as feed_page
from kungfud.store import Store
from kungfud.store.events import OPEN, Offer, event_key
from kungfud.store.hooks import count_pending

ME, OTHER, AUTHOR = "ag_me", "ag_other", "ag_author"
N = 3 * PASS_LIMIT + 100  # offers restricted to OTHER


def _event(seq: int) -> bytes:
    return b'{"event":"task_offered","data":{"task":"tk_%d"}}' % seq


@pytest.fixture
def store(tmp_path):
    s = Store(str(tmp_path / "data"))
    enc = msgspec.msgpack.Encoder()
    w = s.begin_write()
    for seq in range(1, N + 1):
        w.tx.put("events", event_key(OPEN, seq), enc.encode(Offer([AUTHOR], [OTHER], _event(seq))))
    for seq in range(N + 1, N + 4):  # the three offers meant for ME come last
        w.tx.put("events", event_key(OPEN, seq), enc.encode(Offer([AUTHOR], [ME, OTHER], _event(seq))))
    w.commit()
    yield s
    s.close()


class _Counting:
    """A view whose store scans are counted, row by row."""

    def __init__(self, view):
        self.view, self.rows = view, 0
        kv = view.kv
        scan = kv.scan

        def counted(*a, **k):
            for row in scan(*a, **k):
                self.rows += 1
                yield row

        view.kv = type("KV", (), {"scan": staticmethod(counted), "__getattr__": lambda _, n: getattr(kv, n)})()


@pytest.mark.rules("R8-13")
def test_R8_13_a_feed_page_reads_a_bounded_number_of_offers_not_meant_for_its_reader(store):
    pages = []
    with store.read() as view:
        counting = _Counting(view)
        after = 0
        while True:
            before = counting.rows
            page, more, reached = feed_page(view, ME, after, 128, True)
            # Its own events (none) and the open stream: at most PASS_LIMIT rows passed over, +1 looked at.
            assert counting.rows - before <= PASS_LIMIT + 2, counting.rows - before
            assert reached >= after
            pages.append(page)
            if not more:
                break
            assert reached > after  # every page moves on
            after = reached
    got = [seq for page in pages for seq, _ in page]
    assert got == [N + 1, N + 2, N + 3]  # nothing offered to ME is skipped
    assert len(pages) >= N // PASS_LIMIT  # paged, not one scan of the whole stream


@pytest.mark.rules("R8-13")
def test_R8_13_pending_reads_a_bounded_number_of_rows_it_does_not_count(store):
    with store.read() as view:
        counting = _Counting(view)
        feed = view.feed(ME, 0, open_tasks=True, passed=True)
        try:
            n = count_pending(feed, ("task_offered",), 10_000, 1024)
        finally:
            feed.close()
        assert counting.rows <= 1024 + 2 and n == 0
        feed = view.feed(OTHER, 0, open_tasks=True, passed=True)  # the counted ones are not limited by it
        try:
            assert count_pending(feed, ("task_offered",), 10_000, 1024) == N + 3
        finally:
            feed.close()


@pytest.mark.rules("R8-13", "R8-20")
def test_R8_13_the_webhook_runner_moves_its_cursor_past_offers_not_meant_for_it():
    """An agent whose webhook takes ``task_offered`` and who is offered none of
    the new offers: its cursor used to stay put (an empty page advanced
    nothing), so every open-Task commit and every sweep re-read everything
    since. Now the read's reached seq moves it."""
    from kungfud.config import WebhooksConfig
    from kungfud.core.webhook import WebhookState
    from kungfud.webhooks.delivery import SHARDS, Deliveries
    from tests.webhooks.test_endpoints import _Hooks, _Runtime, _settle

    reads: list[int] = []

    class Hooks(_Hooks):
        def events_after(self, agent, after, limit, kinds):
            reads.append(after)
            return [], None, min(after + PASS_LIMIT, 2000)

        def due(self, wanted, limit):  # a pass cut at PASS_LIMIT says more may follow, as the feed's does
            return {a: due._replace(more=due.cursor is not None and due.reached < 2000)
                    for a, due in super().due(wanted, limit).items()}

    async def go():
        d = Deliveries(_Runtime(), WebhooksConfig())
        d.hooks = Hooks({ME: WebhookState(ME, "https://example.com/h", ("task_offered",), b"k" * 32, 0, "wh_1")})
        d.held = [True] * SHARDS
        d._write = _no_write  # type: ignore[method-assign]
        d.wake([ME])
        await _settle(d)  # the read round, then the delivery task it starts (D392)
        d._pool.shutdown()
        return d

    async def _no_write(cursors):
        pass

    d = asyncio.run(go())
    # each read resumes where the last one reached; the last one reached the end, so no read after it (D392)
    assert reads == list(range(0, 2000, PASS_LIMIT))
    assert d.acked[ME].delivered == 2000  # the next wake-up reads from here


@pytest.mark.rules("R8-13", "R8-21")
def test_R8_13_the_sweep_runs_an_agent_whose_read_passed_over_offers_only():
    """The 15 s sweep is the runner's safety net for a lost wake-up: an agent
    whose next page is all offers not meant for it has nothing to deliver yet,
    but its cursor must move or a later event behind those rows is never found."""
    from contextlib import contextmanager

    from kungfud.actors.hooks import Hooks
    from kungfud.core.webhook import WebhookState

    class View:
        def hooked_agents(self):
            return iter([ME])

    class Store:
        @contextmanager
        def read(self):
            yield View()

    class Sweep(Hooks):
        def __init__(self, reached):
            self.store, self.reached = Store(), reached

        def state(self, agent):
            return WebhookState(ME, "https://example.com/h", ("task_offered",), b"k" * 32, 0, "wh_1"), None

        def events_after(self, agent, after, limit, kinds):
            return [], None, self.reached

    assert Sweep(PASS_LIMIT).agents() == ([ME], [ME])
    assert Sweep(0).agents() == ([ME], [])
