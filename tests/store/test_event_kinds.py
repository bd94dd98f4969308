"""Adding an event kind moves no event (D285; docs/storage.md "Event kinds"):
a kind a store did not make before is made for the facts written from then on,
so every event already stored keeps its seq — the ``since`` a client saved and
a webhook's delivered position still point at the same events — and
``kungfud check`` agrees with the store without a format step.

The kind is added here as a fixture (``ping``, to the author of every Task
created), over a store an older kungfud wrote (``fixtures/v4``): its events
were made without the kind, its facts include Tasks created."""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec
import pytest

from kungfud import event_kinds
from kungfud.core.events import OPEN, FactEvents
from kungfud.core.task import TaskState
from kungfud.store import Store
from kungfud.store import events as stored_events
from kungfud.store.check import compare, expected_indexes
from kungfud.store.hooks import Cursor, put_cursors
from kungfud.store.layout import FORMAT
from tests.store.helpers import Ids, commit, task_item
from tests.store.test_migration import _unpack


class Pinged(msgspec.Struct, frozen=True):
    task: str


class Ping(event_kinds.Event, frozen=True, tag="ping"):
    """The fixture's new kind: not original, so made only from its first fact on."""

    original: ClassVar[bool] = False
    data: Pinged


@pytest.fixture
def with_ping(monkeypatch):
    """``ping`` added the way docs/architecture.md "Adding an event kind" says:
    one more kind, and a branch of :meth:`FactEvents.observe` that appends it
    to ``later`` (here a wrapper, as a test cannot edit the module)."""
    monkeypatch.setattr(stored_events, "KINDS", (*event_kinds.KINDS, "ping"))
    observe = FactEvents.observe

    def observing(self: FactEvents, obj: str, before: Any, after: Any, fact: Any, *args: Any) -> None:
        observe(self, obj, before, after, fact, *args)
        if isinstance(after, TaskState) and before is None:
            self.later.append((after.author, Ping(Pinged(after.task))))

    monkeypatch.setattr(FactEvents, "observe", observing)


def _feeds(store: Store, agents: list[str]) -> dict[str, list[tuple[int, bytes]]]:
    """Every agent's feed as a subscriber with ``open_tasks`` reads it (its own
    events and the open-Task stream's offered to it), and the stream itself."""
    with store.read() as view:
        out = {agent: list(view.feed(agent, 0, open_tasks=True)) for agent in agents}
        out[OPEN] = list(view.events_for(OPEN, 0))  # the stored Offer rows
    return out


@pytest.mark.rules("R8-20", "L1-1")
def test_R8_20_a_new_event_kind_moves_no_stored_event_and_needs_no_format_step(tmp_path, with_ping):
    store = Store(str(_unpack(tmp_path, "v4")))  # an older kungfud's store, opened at this format
    try:
        with store.read() as view:
            agents = list(view.agents(None))
            last_fact, last_event = view.last_seq(), view.last_event_seq()
            before = {agent: list(view.events_for(agent, 0)) for agent in agents}
        feeds = _feeds(store, agents)
        assert sum(map(len, before.values())) > 20 and feeds[OPEN], "the fixture has events, the open stream too"
        # Positions saved before the kind existed: each agent's `since` halfway
        # through its feed, and one agent's webhook cursor there too.
        saved = {agent: feed[len(feed) // 2][0] for agent, feed in feeds.items() if agent != OPEN and len(feed) > 1}
        hooked = max(saved, key=lambda a: len(before[a]))
        w = store.begin_write()
        put_cursors(w.tx, {hooked: Cursor("wh_fixture", saved[hooked])})
        w.commit()

        # A daemon that knows `ping` writes: a Task created by an agent of the fixture.
        author = next(a for a in agents if before[a])
        assert commit(store, [task_item(store, author, Ids(), "k-ping", None)])[0].__class__.__name__ == "Committed"

        with store.read() as view:
            assert view.last_seq() == last_fact + 1
            new = list(view.events_for(author, last_event))
            after = {agent: [e for e in view.events_for(agent, 0) if e[0] <= last_event] for agent in agents}
            stream = [e for e in view.events_for(OPEN, 0) if e[0] <= last_event]
            made = [seq for seq, _ in view.events_for(OPEN, last_event)]  # the new Task is open: offered
            resumed = {agent: next(iter(view.feed(agent, since, open_tasks=True))) for agent, since in saved.items()}
            cursor = view.hook_cursor(hooked)
            from_cursor = next(iter(view.feed(hooked, cursor.delivered, open_tasks=True)))
            kinds = msgspec.msgpack.decode(view.kv.get("meta", stored_events.KINDS_KEY))
        # Every event stored before keeps its seq and its bytes.
        assert after == before and stream == feeds[OPEN]
        # A saved `since` and the webhook's position resume at the same event as before.
        for agent, since in saved.items():
            was = next(e for e in feeds[agent] if e[0] > since)
            assert resumed[agent] == was, agent
        assert from_cursor == next(e for e in feeds[hooked] if e[0] > cursor.delivered)
        # The new fact makes the new kind after the others (its task_offered),
        # numbered after every event before it.
        assert [event_kinds.kind_of(raw) for _, raw in new] == ["ping"]
        assert made == [max(last_event + 1, last_fact + 1)] and new[0][0] == made[0] + 1
        # Recorded: `ping` from the first fact written by a daemon that knows it.
        # (every later kind is: `ping`, and those added since the fixture, a2a_task)
        later = {k: last_fact + 1 for k in ("ping", *event_kinds.KINDS) if k not in event_kinds.ORIGINAL_KINDS}
        assert kinds == {**{k: 0 for k in event_kinds.ORIGINAL_KINDS}, **later}
        # No format step: the store keeps its format, and check agrees with it.
        with store.read() as view:
            assert view.kv.get("meta", b"format") == FORMAT
        assert compare(store, expected_indexes(store)) == []
        # Were `ping` made for every fact (no record of when it began), the
        # rebuild would give the old facts new events and move later seqs.
        w = store.begin_write()
        w.tx.put("meta", stored_events.KINDS_KEY, msgspec.msgpack.encode({**kinds, "ping": 0}))
        w.commit()
        assert any(line.startswith("events: differs") for line in compare(store, expected_indexes(store)))
    finally:
        store.close()


@pytest.mark.rules("R8-20")
def test_R8_20_a_store_records_each_kind_it_makes_once_and_check_follows_the_record(with_ping):
    """The first batch of a writer records every kind the store lacks (an
    original kind from the start, a later one from that batch's first fact);
    once all are there it records nothing; a rebuild makes a kind only from
    its first fact on."""
    first = stored_events.record_kinds(None, 10)
    assert first is not None
    since = msgspec.msgpack.decode(first)
    later = {k: 10 for k in ("ping", *event_kinds.KINDS) if k not in event_kinds.ORIGINAL_KINDS}  # ping, a2a_task
    assert since == {**{k: 0 for k in event_kinds.ORIGINAL_KINDS}, **later}
    assert stored_events.record_kinds(first, 50) is None
    assert stored_events.enabled(stored_events.kinds_since(first), 9) == frozenset(event_kinds.ORIGINAL_KINDS)
    assert stored_events.enabled(stored_events.kinds_since(first), 10) is None  # every kind: nothing to filter
    # A store from before kinds were recorded made the original kinds for every fact.
    assert stored_events.kinds_since(None) == {k: 0 for k in event_kinds.ORIGINAL_KINDS}
