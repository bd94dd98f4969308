"""§6.3 entries and responses, the §8 respond obligation (R8-22…R8-28), and the
§9 rows the core decides for entries: pins (R9-10, DECISIONS.md B12) and handle
notes (R9-12).

Cites DECISIONS.md B10 (an ask naming the author, an observer or a non-member is
``bad_request`` naming the ids), B11 (a self-reply falls through to rule 3; an
author who left can no longer speak), B13 (retract after demotion), T2.
"""

from __future__ import annotations

from typing import get_args

import pytest

from kungfud.core import entry as entry_core
from kungfud.core.entry import EntryResponse
from kungfud.core.facts import EntryPosted, MemoryCreated, RequestRetracted, ResponseHandled, entry_obj
from kungfud.core.kinds import AnyFact, of_state
from kungfud.core.obligations import Obligation, ob_id
from kungfud.core.pins import Pin

from .world import HOUR, World, ok, text


@pytest.fixture
def w() -> World:
    w = World()
    w.root = w.register("root", admin=True)
    w.alice = w.register("alice")
    w.bob = w.register("bob")
    w.carol = w.register("carol")
    w.dave = w.register("dave")
    w.t = w.create_thread(w.alice)
    return w


def pair(w: World) -> World:
    """Exactly two members who may speak (alice, bob) and one observer (dave)."""
    w.add(w.t, w.alice, w.bob)
    w.add(w.t, w.alice, w.dave, "observer")
    return w


def crowd(w: World) -> World:
    """Three who may speak (alice, bob, carol) and one observer (dave)."""
    pair(w)
    w.add(w.t, w.alice, w.carol)
    return w


def responders(d) -> list[str]:
    return [f for f in d.facts if isinstance(f, EntryPosted)][0].responders


# --- R6.3-1, R6.3-2 posting ---------------------------------------------------------------


@pytest.mark.rules("R6.3-1", "R4-1", "R6.5-9")
def test_R6_3_1_only_active_speaking_members_post_in_an_open_thread(w):
    pair(w)
    ok(w.post(w.alice, w.t))
    ok(w.post(w.bob, w.t))
    w.refuse("forbidden", lambda: w.post(w.dave, w.t))  # observer
    w.refuse("not_found", lambda: w.post(w.carol, w.t))  # non-member
    ok(w.set_role(w.alice, w.t, w.dave, "speaker"))
    ok(w.deactivate(w.root, w.dave))
    w.refuse("forbidden", lambda: w.post(w.dave, w.t))  # deactivated
    ok(w.close(w.alice, w.t))
    w.refuse("conflict", lambda: w.post(w.alice, w.t))  # closed


@pytest.mark.rules("R6.3-2", "R5-8")
def test_R6_3_2_an_entry_has_a_number_an_author_and_one_pinned_version(w):
    pair(w)
    mid = w.memory(w.bob, versions=3)
    d1 = ok(w.post(w.bob, w.t, pin=Pin(memory=mid)))
    d2 = ok(w.post(w.bob, w.t, pin=Pin(memory=mid, version=2)))
    d3 = ok(w.post(w.alice, w.t, pin=text("inline")))
    assert [d.result["entry"] for d in (d1, d2, d3)] == [1, 2, 3]
    assert d1.result["pin"] == {"memory": mid, "version": 3}  # the current version when omitted
    assert d2.result["pin"] == {"memory": mid, "version": 2}
    e = w.entry(w.t, 2)
    assert (e.thread, e.entry, e.author, e.at, e.pin_memory, e.pin_version) == (w.t, 2, w.bob, w.now, mid, 2)
    # Inline content becomes a private Memory of the poster, version 1, in the same action.
    created, posted = d3.facts
    assert isinstance(created, MemoryCreated) and created.author == w.alice
    assert (posted.pin_memory, posted.pin_version) == (created.memory, 1)
    assert w.states[created.memory].visibility == "private"
    assert w.thread(w.t).entries == 3


@pytest.mark.rules("R6.3-2", "R5-11")
def test_R6_3_2_a_withdrawn_memory_cannot_be_pinned(w):
    pair(w)
    mid = w.memory(w.alice)
    w.withdraw(w.alice, mid)
    r = w.refuse("conflict", lambda: w.post(w.alice, w.t, pin=Pin(memory=mid)))
    assert "withdrawn" in r.reason
    w.refuse("conflict", lambda: w.post(w.alice, w.t, pin=Pin(memory=mid, version=1)))


@pytest.mark.rules("R6.3-2", "R9-10", "R5-13", "R5-15", "R12-9")
def test_B12_pinning_another_agents_memory_only_its_readable_current_version(w):
    pair(w)
    private = w.memory(w.bob)
    public = w.memory(w.bob, public=True, versions=2)
    withdrawn = w.memory(w.bob, public=True)
    w.withdraw(w.bob, withdrawn)
    d = ok(w.post(w.alice, w.t, pin=Pin(memory=public)))
    assert d.result["pin"] == {"memory": public, "version": 2}
    ok(w.post(w.alice, w.t, pin=Pin(memory=public, version=2)))
    missing = w.refuse("not_found", lambda: w.post(w.alice, w.t, pin=Pin(memory="me_999999")))
    for pin in (Pin(memory=private), Pin(memory=public, version=1), Pin(memory=withdrawn), Pin(memory=private, version=1)):
        r = w.refuse("not_found", lambda: w.post(w.alice, w.t, pin=pin))
        assert pin.memory in r.reason
        if pin.version is None:  # worded exactly as for a Memory that never existed (R12-9)
            assert r.reason.replace(pin.memory, "<id>") == missing.reason.replace("me_999999", "<id>")
    # One's own Memory: any version, private included.
    ok(w.post(w.bob, w.t, pin=Pin(memory=private)))
    ok(w.post(w.bob, w.t, pin=Pin(memory=public, version=1)))
    w.refuse("not_found", lambda: w.post(w.bob, w.t, pin=Pin(memory=public, version=3)))


@pytest.mark.rules("R6.3-2", "L2-1")
def test_R6_3_2_a_rejected_post_creates_no_inline_memory(w):
    pair(w)
    before = len([s for s in w.states if s.startswith("me_")])
    w.refuse("not_found", lambda: w.post(w.alice, w.t, pin=text(), reply_to=9))
    w.refuse("bad_request", lambda: w.post(w.alice, w.t, pin=text(), ask=[w.dave]))
    assert len([s for s in w.states if s.startswith("me_")]) == before


@pytest.mark.rules("R6.3-3")
def test_R6_3_3_a_reply_names_an_existing_entry_of_the_thread(w):
    pair(w)
    ok(w.post(w.alice, w.t))
    for n in (0, 2, -1):
        w.refuse("not_found", lambda: w.post(w.bob, w.t, reply_to=n))
    d = ok(w.post(w.bob, w.t, reply_to=1))
    assert w.entry(w.t, 2).reply_to == 1 and d.facts[-1].reply_to == 1


@pytest.mark.rules("R6.3-4", "R6.3-7")
def test_R6_3_4_an_ask_names_other_members_who_may_speak(w):
    crowd(w)
    d = ok(w.post(w.alice, w.t, ask=[w.carol, w.bob]))
    assert responders(d) == [w.carol, w.bob] and w.entry(w.t, 1).ask == [w.carol, w.bob]


@pytest.mark.rules("R6.3-4")
def test_B10_an_ask_naming_the_author_an_observer_or_a_non_member_is_rejected_naming_them(w):
    crowd(w)
    ok(w.leave(w.carol, w.t))
    for ask, bad in (
        ([w.bob, w.alice], [w.alice]),  # the author
        ([w.dave], [w.dave]),  # an observer
        ([w.bob, w.root], [w.root]),  # never a member
        ([w.carol], [w.carol]),  # a former member
        ([w.bob, w.dave, w.root], [w.dave, w.root]),
    ):
        r = w.refuse("bad_request", lambda: w.post(w.alice, w.t, ask=ask), "revise")
        named = r.reason.split("not:")[-1]
        assert all(agent in named for agent in bad) and w.bob not in named, r
    r = w.refuse("bad_request", lambda: w.post(w.alice, w.t, ask=[w.bob, w.bob]))
    assert "more than once" in r.reason


@pytest.mark.rules("R6.3-5")
def test_R6_3_5_entries_are_never_edited_or_deleted(w):
    pair(w)
    ok(w.post(w.alice, w.t))
    first = w.entry(w.t, 1)
    for _ in range(3):
        ok(w.post(w.bob, w.t, reply_to=1))
    ok(w.close(w.alice, w.t))
    after = w.entry(w.t, 1)
    assert (after.author, after.at, after.pin_memory, after.pin_version, after.responders) == (
        first.author, first.at, first.pin_memory, first.pin_version, first.responders,
    )
    assert not [n for n in entry_core.__all__ if any(v in n for v in ("edit", "delete", "update"))]


# --- R6.3-6 … R6.3-11 responders ---------------------------------------------------------


@pytest.mark.rules("R6.3-7", "R6.3-6")
def test_R6_3_7_an_empty_ask_means_nobody_even_between_two_speakers(w):
    pair(w)
    ok(w.post(w.alice, w.t))
    assert responders(ok(w.post(w.bob, w.t, ask=[]))) == []
    assert responders(ok(w.post(w.bob, w.t, reply_to=1, ask=[]))) == []
    assert w.pending(w.t, w.alice) == []


@pytest.mark.rules("R6.3-6", "R6.3-7")
def test_R6_3_6_an_ask_overrides_the_reply_rule(w):
    crowd(w)
    ok(w.post(w.alice, w.t))
    assert responders(ok(w.post(w.bob, w.t, reply_to=1, ask=[w.carol]))) == [w.carol]
    assert w.pending(w.t, w.alice) == []


@pytest.mark.rules("R6.3-8")
def test_R6_3_8_reply_to_other_members_entry_asks_its_author(w):
    crowd(w)
    ok(w.post(w.alice, w.t))
    d = ok(w.post(w.bob, w.t, reply_to=1))
    assert responders(d) == [w.alice]  # three speakers: rule 3 would give nobody
    assert w.pending(w.t, w.alice) == [2]


@pytest.mark.rules("R6.3-8")
@pytest.mark.parametrize("gone", ["demoted", "left", "removed", "deactivated"])
def test_R6_3_8_B11_reply_to_an_author_who_can_no_longer_speak_asks_nobody(w, gone):
    crowd(w)
    ok(w.post(w.carol, w.t))
    if gone == "demoted":
        ok(w.set_role(w.alice, w.t, w.carol, "observer"))
    elif gone == "left":
        ok(w.leave(w.carol, w.t))
    elif gone == "removed":
        ok(w.remove(w.alice, w.t, w.carol))
    else:
        ok(w.deactivate(w.root, w.carol))
    # Only alice and bob may speak now, yet rule 2 applied: nobody (not rule 3's "the other").
    d = ok(w.post(w.bob, w.t, reply_to=1))
    assert responders(d) == []
    assert w.pending(w.t, w.alice) == []


@pytest.mark.rules("R6.3-8", "R6.3-9")
def test_B11_a_self_reply_falls_through_to_rule_3(w):
    pair(w)
    ok(w.post(w.alice, w.t, ask=[]))
    d = ok(w.post(w.alice, w.t, reply_to=1))
    assert responders(d) == [w.bob]


@pytest.mark.rules("R6.3-8", "R6.3-10")
def test_B11_a_self_reply_among_three_speakers_is_a_broadcast(w):
    crowd(w)
    ok(w.post(w.alice, w.t))
    assert responders(ok(w.post(w.alice, w.t, reply_to=1))) == []


@pytest.mark.rules("R6.3-9")
def test_R6_3_9_with_exactly_two_speakers_the_other_one_responds(w):
    pair(w)  # the observer does not count
    assert responders(ok(w.post(w.alice, w.t))) == [w.bob]
    assert responders(ok(w.post(w.bob, w.t))) == [w.alice]
    assert w.pending(w.t, w.bob) == [1] and w.pending(w.t, w.alice) == [2]
    assert w.pending(w.t, w.dave) == []


@pytest.mark.rules("R6.3-10")
def test_R6_3_10_otherwise_an_entry_is_a_broadcast(w):
    assert responders(ok(w.post(w.alice, w.t))) == []  # alone
    crowd(w)
    assert responders(ok(w.post(w.alice, w.t))) == []
    assert w.thread_pending(w.t) == {}
    assert w.entry(w.t, 2).responses == {}


@pytest.mark.rules("R6.3-11")
def test_R6_3_11_responders_are_never_widened_by_later_arrivals(w):
    pair(w)
    ok(w.post(w.alice, w.t))
    w.add(w.t, w.alice, w.carol)
    ok(w.set_role(w.alice, w.t, w.dave, "speaker"))
    assert w.entry(w.t, 1).responders == [w.bob]
    assert w.pending(w.t, w.carol) == [] and w.pending(w.t, w.dave) == []
    # …nor by departures: a broadcast among three stays a broadcast with two left.
    ok(w.post(w.alice, w.t))
    ok(w.leave(w.carol, w.t))
    ok(w.leave(w.dave, w.t))
    assert w.entry(w.t, 2).responders == [] and w.thread_pending(w.t) == {w.bob: [1]}


@pytest.mark.rules("R6.3-12", "R8-22", "R8-23")
def test_R6_3_12_each_responder_owes_one_response_held_by_it_alone(w):
    crowd(w)
    d = ok(w.post(w.alice, w.t, ask=[w.bob, w.carol]))
    obj = entry_obj(w.t, 1)
    e = w.entry(w.t, 1)
    assert e.responses == {w.bob: EntryResponse("pending"), w.carol: EntryResponse("pending")}
    assert of_state(obj, e) == [
        Obligation(ob_id("respond", obj, agent), "respond", agent, {"thread": w.t, "entry": 1}, d.facts[-1].at)
        for agent in (w.bob, w.carol)
    ]
    assert w.obligations_of(w.bob) == {("respond", obj)} == w.obligations_of(w.carol)
    assert w.obligations_of(w.alice) == set() and w.obligations_of(w.dave) == set()


# --- R6.3-13 … R6.3-15 replying -------------------------------------------------------------


@pytest.mark.rules("R6.3-13", "R8-24")
def test_R6_3_13_replying_ends_the_repliers_own_pending_response(w):
    crowd(w)
    ok(w.post(w.alice, w.t, ask=[w.bob, w.carol]))
    d = ok(w.post(w.bob, w.t, reply_to=1))
    posted = d.facts[-1]
    assert posted.replied is True and entry_obj(w.t, 1) in posted.objects()
    assert d.result["ended"] == [ob_id("respond", entry_obj(w.t, 1), w.bob)]
    r = w.entry(w.t, 1).responses
    assert r[w.bob] == EntryResponse("replied", w.now) and r[w.carol].state == "pending"
    assert w.pending(w.t, w.bob) == [] and w.pending(w.t, w.carol) == [1]


@pytest.mark.rules("R6.3-14", "R6.3-13")
def test_R6_3_14_the_replys_own_responders_are_decided_separately(w):
    pair(w)
    ok(w.post(w.alice, w.t))  # bob owes a response
    d = ok(w.post(w.bob, w.t, reply_to=1))
    assert responders(d) == [w.alice]  # rule 2: the author of entry 1
    assert w.pending(w.t, w.bob) == [] and w.pending(w.t, w.alice) == [2]
    d = ok(w.post(w.alice, w.t, reply_to=2, ask=[]))
    assert responders(d) == [] and w.thread_pending(w.t) == {}


@pytest.mark.rules("R6.3-15")
def test_R6_3_15_replying_without_a_pending_response_is_allowed(w):
    crowd(w)
    ok(w.post(w.alice, w.t, ask=[w.bob]))
    before = w.entry(w.t, 1)
    d = ok(w.post(w.carol, w.t, reply_to=1))
    assert d.facts[-1].replied is False and d.result["ended"] == []
    assert entry_obj(w.t, 1) not in d.states
    assert w.entry(w.t, 1) == before


# --- R6.3-16 … R6.3-19 handling and retracting --------------------------------------------------


@pytest.mark.rules("R6.3-16", "R8-25")
def test_R6_3_16_handling_ends_a_pending_response_without_posting(w):
    pair(w)
    ok(w.post(w.alice, w.t))
    d = ok(w.handle(w.bob, w.t, 1, b'{"note":"seen, nothing to add"}'))
    assert d.facts == [ResponseHandled(at=w.now, by=w.bob, thread=w.t, entry=1, agent=w.bob, note=b'{"note":"seen, nothing to add"}')]
    assert d.result == {"thread": w.t, "entry": 1, "ended": [ob_id("respond", entry_obj(w.t, 1), w.bob)]}
    assert w.thread(w.t).entries == 1 and w.pending(w.t, w.bob) == []
    assert w.entry(w.t, 1).responses[w.bob] == EntryResponse("handled", w.now, b'{"note":"seen, nothing to add"}')
    w.refuse("conflict", lambda: w.handle(w.bob, w.t, 1))  # already ended (L5-2)


@pytest.mark.rules("R6.3-16", "L2-7")
def test_R6_3_16_only_a_responder_with_a_pending_response_handles(w):
    crowd(w)
    ok(w.post(w.alice, w.t, ask=[w.bob]))
    ok(w.handle(w.bob, w.t, 1))  # without a note
    assert w.entry(w.t, 1).responses[w.bob].note is None
    for agent in (w.carol, w.alice, w.dave):
        w.refuse("conflict", lambda: w.handle(agent, w.t, 1))
    w.refuse("not_found", lambda: w.handle(w.bob, w.t, 2))
    w.refuse("not_found", lambda: w.handle(w.root, w.t, 1))


@pytest.mark.rules("R6.3-17", "R9-12")
def test_R6_3_17_R9_12_a_handle_note_is_shown_only_to_the_author_and_the_responder(w):
    """The note is kept with the ending (core); who is shown it is decided by the
    pure digest function of the reads (``reads.thread.entry_digest``)."""
    from kungfud.reads.thread import entry_digest

    crowd(w)
    ok(w.post(w.alice, w.t, ask=[w.bob, w.carol]))
    ok(w.handle(w.bob, w.t, 1, b'{"note":"private remark"}'))
    e = w.entry(w.t, 1)
    assert e.responses[w.bob].note == b'{"note":"private remark"}'

    def shown(reader: str) -> list:
        return [r.get("content") for r in entry_digest(None, e, reader, full=False)["responses"]]

    for reader in (w.alice, w.bob):
        assert bytes(shown(reader)[0]) == b'{"note":"private remark"}'
    for reader in (w.carol, w.dave):
        assert shown(reader) == [None, None]


@pytest.mark.rules("R6.3-18", "R8-26")
def test_R6_3_18_the_author_retracts_every_pending_response_of_its_entry(w):
    crowd(w)
    ok(w.post(w.alice, w.t, ask=[w.bob, w.carol]))
    w.refuse("forbidden", lambda: w.retract(w.bob, w.t, 1))
    d = ok(w.retract(w.alice, w.t, 1))
    assert d.facts == [RequestRetracted(at=w.now, by=w.alice, thread=w.t, entry=1, agents=[w.bob, w.carol])]
    assert d.result["ended"] == [ob_id("respond", entry_obj(w.t, 1), a) for a in (w.bob, w.carol)]
    assert {r.state for r in w.entry(w.t, 1).responses.values()} == {"retracted"}
    assert w.thread_pending(w.t) == {} and w.obligations() == {}
    w.refuse("conflict", lambda: w.retract(w.alice, w.t, 1))  # nothing left (L2-7, L5-2)


@pytest.mark.rules("R6.3-18", "R9-2")
def test_R6_3_18_an_author_who_left_cannot_retract(w):
    crowd(w)
    ok(w.post(w.bob, w.t, ask=[w.carol]))
    ok(w.leave(w.bob, w.t))
    w.refuse("not_found", lambda: w.retract(w.bob, w.t, 1))
    assert w.pending(w.t, w.carol) == [1]


@pytest.mark.rules("R6.3-18", "R6.2-24")
def test_B13_an_author_demoted_to_observer_may_still_retract(w):
    crowd(w)
    ok(w.post(w.bob, w.t, ask=[w.carol]))
    ok(w.set_role(w.alice, w.t, w.bob, "observer"))
    ok(w.retract(w.bob, w.t, 1))
    assert w.response(w.t, 1, w.carol) == "retracted"


@pytest.mark.rules("R6.3-19")
def test_R6_3_19_retraction_cannot_undo_responses_already_given(w):
    crowd(w)
    w.add(w.t, w.alice, w.root)
    ok(w.post(w.alice, w.t, ask=[w.bob, w.carol, w.root]))
    ok(w.post(w.bob, w.t, reply_to=1))
    ok(w.handle(w.carol, w.t, 1, b'{"note":"ok"}'))
    replied, handled = w.entry(w.t, 1).responses[w.bob], w.entry(w.t, 1).responses[w.carol]
    w.advance(5)
    d = ok(w.retract(w.alice, w.t, 1))
    assert d.facts[0].agents == [w.root]
    r = w.entry(w.t, 1).responses
    assert r[w.bob] == replied and r[w.carol] == handled and r[w.root].state == "retracted"


# --- R6.3-20 … R6.3-22 what ends a response ---------------------------------------------------------


@pytest.mark.rules("R6.3-20", "R6.3-21", "R6.3-22", "R6.4-20")
def test_R6_3_22_only_the_listed_facts_end_a_response(w):
    """No read-receipt fact exists; the facts an entry accepts are exactly posting
    and the exits of R6.3-22 (reply, handle, retraction, the §6.2 and §6.5 rules)
    plus taking an assignment the entry carries (R6.4-20)."""
    pair(w)
    ok(w.post(w.alice, w.t))
    e = w.entry(w.t, 1)
    accepted = set()
    every_fact = get_args(AnyFact)  # every fact the store can hold (core/facts.py, core/task_facts.py)
    for cls in every_fact:
        name = cls.__name__
        fields = {f: None for f in cls.__struct_fields__}
        fields.update(at=0, by=None)
        try:
            entry_core.apply(e, cls(**fields))
        except TypeError as exc:
            if "entry cannot apply" in str(exc):
                continue  # refused by type: this fact never touches an entry
        except Exception:
            pass  # got past the type dispatch (placeholder fields broke it later)
        accepted.add(name)
    assert accepted == {
        "EntryPosted", "ResponseHandled", "RequestRetracted", "MembershipEnded", "RoleSet", "ThreadClosed", "AssignmentTaken",
    }
    assert not [c.__name__ for c in every_fact if any(word in c.__name__ for word in ("Read", "Seen", "Receipt"))]


@pytest.mark.rules("R6.3-22", "L4-4", "R6.3-21")
def test_R6_3_22_a_pending_response_survives_other_actions_and_time(w):
    crowd(w)
    ok(w.post(w.alice, w.t, ask=[w.bob]))
    _, a = w.assign(w.alice, w.t, w.carol, deliver_within_s=60)
    ok(w.take(w.carol, a))
    ok(w.post(w.carol, w.t))
    ok(w.post(w.bob, w.t, reply_to=2))  # a reply to another entry
    ok(w.set_role(w.alice, w.t, w.bob, "governor"))
    ok(w.admit(w.alice, w.t))
    ok(w.remove(w.alice, w.t, w.dave))
    w.advance(365 * 24 * HOUR)
    ok(w.expire(w.t))
    assert w.pending(w.t, w.bob) == [1] and w.response(w.t, 1, w.bob) == "pending"
    assert ("respond", entry_obj(w.t, 1)) in w.obligations_of(w.bob)


@pytest.mark.rules("R8-23", "R6.3-12")
def test_R8_23_the_turn_lists_each_respond_obligation_once(w):
    crowd(w)
    for _ in range(3):
        ok(w.post(w.alice, w.t, ask=[w.bob]))
    obs = [ob for ob in w.obligations().values() if ob.holder == w.bob]
    assert sorted(ob.ref["entry"] for ob in obs) == [1, 2, 3]
    assert len({ob.obligation_id for ob in obs}) == 3


# --- R9-10 reading entry pins ---------------------------------------------------------------------


class _View:
    """Just enough of a store view for ``pin_content``: states and contents."""

    def __init__(self, w: World):
        self.w = w

    def state(self, obj: str):
        return self.w.states.get(obj)

    def memory_content(self, memory: str, version: int) -> bytes:
        return f"{memory}@{version}".encode()


@pytest.mark.rules("R9-10", "R5-14", "R5-15")
def test_R9_10_own_pins_stay_readable_and_others_only_while_valid_and_public(w):
    """Who reads a pinned version is decided by ``reads.thread.pin_content``
    (a pure function of states); the core decides which pins may be made (B12)."""
    from kungfud.reads.thread import pin_content

    pair(w)
    own = w.memory(w.alice)
    theirs = w.memory(w.bob, public=True)
    ok(w.post(w.alice, w.t, pin=Pin(memory=own)))
    ok(w.post(w.alice, w.t, pin=Pin(memory=theirs)))
    view = _View(w)
    assert pin_content(view, w.alice, own, 1) == f"{own}@1".encode()
    assert pin_content(view, w.alice, theirs, 1) == f"{theirs}@1".encode()
    w.withdraw(w.alice, own)
    assert pin_content(view, w.alice, own, 1) == f"{own}@1".encode()  # one's own pin: always
    w.set_visibility(w.bob, theirs, "private")
    assert pin_content(view, w.alice, theirs, 1) is None
    w.set_visibility(w.bob, theirs, "public")
    assert pin_content(view, w.alice, theirs, 1) is not None
    w.withdraw(w.bob, theirs)
    assert pin_content(view, w.alice, theirs, 1) is None


@pytest.mark.rules("R6.3-6")
@pytest.mark.parametrize(
    ("speakers", "expected"),
    [(["a1", "a2"], ["a2"]), (["a1", "a2", "a3"], []), (["a1"], []), (["a2", "a3"], [])],
)
def test_R6_3_6_the_two_speaker_rule_counts_speakers_among_many_observers(speakers, expected):
    """Rule 3 (exactly two who may speak: the other one responds) holds however
    many observers the Thread has, and wherever the speakers sit among them."""
    import msgspec

    from kungfud.core.members import MemberState
    from kungfud.core.queries import state_query
    from tests.core.helpers import make_ctx

    roles = {f"o{i}": "observer" for i in range(500)}
    roles.update({agent: "speaker" for agent in speakers})
    roles.update({f"p{i}": "observer" for i in range(500)})
    states = {f"th_x/{a}": MemberState("th_x", a, r, 0, None) for a, r in roles.items()}  # type: ignore[arg-type]
    ctx = msgspec.structs.replace(make_ctx(None), get=states.get, query=state_query(states))
    assert entry_core.responders_for(ctx, "th_x", "a1", None, None) == expected
    # an ask and a reply to another speaker still come first
    assert entry_core.responders_for(ctx, "th_x", "a1", None, ["o3"]) == ["o3"]
