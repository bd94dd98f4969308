"""The named collection queries (core/queries.py, D90, D93): the actor's
overlay lays its in-flight objects over the store's index rows for a query,
and picks the objects that may answer by their ids alone (``may_answer``).
An object the filter passes over must contribute nothing, or a decision on an
in-flight write would read a collection without it (L5)."""

from __future__ import annotations

import pytest

from kungfud.core.queries import answers, may_answer
from tests.core.world import World, ok

QUERIES = ("governors", "speakers", "memberships", "pending", "live", "due")


def _busy_world() -> World:
    """Two Threads with members in every role, asks pending and answered,
    assignments open, taken (a running deadline) and delivered, a member
    who left."""
    w = World()
    a, b, c, d = (w.register(n) for n in "abcd")
    t1, t2 = w.create_thread(a), w.create_thread(b)
    w.add(t1, a, b)
    w.add(t1, a, c, "observer")
    w.add(t1, a, d)
    w.add(t2, b, a)
    w.add(t2, b, c)
    ok(w.post(a, t1, ask=[b, d]))
    n = ok(w.post(b, t1, ask=[a])).result["entry"]
    ok(w.post(a, t1, reply_to=n))
    w.assign(a, t1, b)
    _, taken = w.assign(a, t1, d)
    ok(w.take(d, taken))
    _, done = w.assign(b, t2, a)
    ok(w.take(a, done))
    ok(w.deliver(a, done))
    ok(w.leave(c, t2))
    return w


@pytest.mark.rules("L5-1")
def test_L5_1_an_object_the_overlay_passes_over_answers_no_query():
    w = _busy_world()
    keys = [o for o in w.states if o.startswith(("th_", "ag_")) and "/" not in o and "." not in o]
    answered = 0
    for obj, state in w.states.items():
        for name in QUERIES:
            for key in keys:
                for party in (None, *[k for k in keys if k.startswith("ag_")]):
                    if answers(name, key, party, state):
                        answered += 1
                        assert may_answer(obj, name, key), (obj, name, key, party)
    assert answered > 20  # the world holds answers to every query
    # And the filter is narrow: an entry never answers for the deadlines of
    # its Thread, nor a membership for its pending responses.
    t = keys[[k.startswith("th_") for k in keys].index(True)]
    assert not may_answer(f"{t}.1", "due", t) and not may_answer(f"{t}/ag_x", "pending", t)
