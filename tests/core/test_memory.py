"""§5 Memory in the pure core: create, update, publish, unpublish, withdraw.

Pins (R5-8, R5-12, R5-14, R5-15) are references held by Thread entries; until
Threads exist the core offers only the §9 predicates those pins will use, so
these tests check the predicates. The Thread-level tests come with Threads.
"""

from __future__ import annotations

import msgspec
import pytest

from kungfud.core.kinds import fold
from kungfud.core.context import Limits
from kungfud.core.facts import MemoryCreated, MemoryUpdated, MemoryVisibilitySet, MemoryWithdrawn
from kungfud.core.memory import MemoryState
from kungfud.core.visibility import may_list_memory, may_read_memory

from .helpers import GHOST_MEMORY, World, accepted, rejected, without_id


@pytest.fixture
def w() -> World:
    w = World()
    w.admin = w.register("admin", admin=True)
    w.alice = w.register("alice")
    w.bob = w.register("bob")
    return w


def unchanged(w: World, action, code: str, next: str | None = None):
    """Run a rejected action and check it left every fact and state as it was (L2-3)."""
    before = w.snapshot()
    r = rejected(action(), code, next)
    assert w.snapshot() == before
    return r


# --- R5-1, R5-2 creation -------------------------------------------------------


@pytest.mark.rules("R5-1")
def test_R5_1_any_active_agent_creates_a_memory(w):
    for agent in (w.admin, w.alice, w.bob):
        d = accepted(w.create(agent, b'{"title":"plan"}'))
        mid = d.result["memory"]
        assert mid.startswith("me_")
        assert d.facts == [MemoryCreated(at=w.now, by=agent, memory=mid, author=agent, content=b'{"title":"plan"}')]
        assert w.states[mid].author == agent
    assert len({m for m in w.states if m.startswith("me_")}) == 3


@pytest.mark.rules("R5-1", "R4-1")
def test_R5_1_deactivated_agent_may_not_create(w):
    accepted(w.set_status(w.admin, w.bob, "deactivated"))
    unchanged(w, lambda: w.create(w.bob), "forbidden", "stop")


@pytest.mark.rules("R5-2", "R9-7", "R9-8")
def test_R5_2_creation_makes_version_1_private_and_unreadable_by_others(w):
    d = accepted(w.create(w.alice))
    mid = d.result["memory"]
    assert d.result == {"memory": mid, "version": 1, "visibility": "private"}
    assert d.states[mid] == MemoryState(mid, w.alice, 1, "valid", "private", w.now)
    state = w.states[mid]
    assert may_read_memory(state, w.alice, None) and may_read_memory(state, w.alice, 1)
    for other in (w.bob, w.admin):
        assert not may_read_memory(state, other, None)
        assert not may_read_memory(state, other, 1)
        assert not may_list_memory(state, other)
    assert may_list_memory(state, w.alice)


# --- R5-3 update -------------------------------------------------------------------


@pytest.mark.rules("R5-3")
def test_R5_3_author_update_makes_the_next_version(w):
    mid = w.new_memory(w.alice, b'{"v":1}')
    for version in (2, 3):
        content = b'{"v":%d}' % version
        d = accepted(w.update(w.alice, mid, content))
        assert d.result == {"memory": mid, "version": version}
        assert d.facts == [MemoryUpdated(at=w.now, by=w.alice, memory=mid, version=version, content=content)]
        assert w.states[mid].latest == version


@pytest.mark.rules("R5-3", "L2-3", "L2-4")
def test_R5_3_non_author_update_of_a_public_memory_is_forbidden(w):
    mid = w.new_memory(w.alice, public=True)
    for other in (w.bob, w.admin):  # an admin is no author either
        r = unchanged(w, lambda: w.update(other, mid), "forbidden", "stop")
        assert mid in r.reason and "author" in r.reason
    assert w.states[mid].latest == 1


@pytest.mark.rules("R5-3", "R9-4", "L2-3")
def test_R5_3_non_author_update_of_a_private_memory_is_not_found(w):
    mid = w.new_memory(w.alice)
    r = unchanged(w, lambda: w.update(w.bob, mid), "not_found", "stop")
    assert r.reason == f"memory {mid} was not found, or you may not read it"


# --- R5-4 publish / unpublish -----------------------------------------------------


@pytest.mark.rules("R5-4")
def test_R5_4_author_publishes_and_unpublishes(w):
    mid = w.new_memory(w.alice)
    d = accepted(w.publish(w.alice, mid))
    assert d.result == {"memory": mid, "visibility": "public"}
    assert d.facts == [MemoryVisibilitySet(at=w.now, by=w.alice, memory=mid, visibility="public")]
    assert w.states[mid].visibility == "public"
    d = accepted(w.unpublish(w.alice, mid))
    assert d.result == {"memory": mid, "visibility": "private"}
    assert d.facts == [MemoryVisibilitySet(at=w.now, by=w.alice, memory=mid, visibility="private")]
    assert w.states[mid].visibility == "private"
    accepted(w.publish(w.alice, mid))
    assert w.states[mid].visibility == "public" and w.states[mid].latest == 1


@pytest.mark.rules("R5-4", "R9-4", "L2-3", "L2-4")
def test_R5_4_non_author_may_not_publish_or_unpublish(w):
    public = w.new_memory(w.alice, public=True)
    private = w.new_memory(w.alice)
    for other in (w.bob, w.admin):
        # Readable (valid and public): the caller may know it exists, so forbidden —
        # before the state check, so a no-op publish is still forbidden (D5).
        r = unchanged(w, lambda: w.unpublish(other, public), "forbidden", "stop")
        assert "author" in r.reason and "unpublish" in r.reason
        r = unchanged(w, lambda: w.publish(other, public), "forbidden", "stop")
        assert "author" in r.reason and "publish" in r.reason
        # Not readable: not_found.
        unchanged(w, lambda: w.publish(other, private), "not_found", "stop")
        unchanged(w, lambda: w.unpublish(other, private), "not_found", "stop")
    assert w.states[public].visibility == "public" and w.states[private].visibility == "private"


# --- R5-5 withdraw, R5-6 withdrawal is terminal ---------------------------------------


@pytest.mark.rules("R5-5")
@pytest.mark.parametrize("public", [False, True])
def test_R5_5_author_withdraws(w, public):
    mid = w.new_memory(w.alice, public=public)
    accepted(w.update(w.alice, mid))
    d = accepted(w.withdraw(w.alice, mid))
    assert d.result == {"memory": mid, "status": "withdrawn"}
    assert d.facts == [MemoryWithdrawn(at=w.now, by=w.alice, memory=mid)]
    state = w.states[mid]
    assert state.status == "withdrawn" and not state.valid
    # Withdrawal changes nothing else: author, versions and visibility stay.
    assert (state.author, state.latest, state.visibility) == (w.alice, 2, "public" if public else "private")


@pytest.mark.rules("R5-5", "R9-4", "L2-3", "L2-4")
def test_R5_5_non_author_may_not_withdraw(w):
    public = w.new_memory(w.alice, public=True)
    private = w.new_memory(w.alice)
    for other in (w.bob, w.admin):
        r = unchanged(w, lambda: w.withdraw(other, public), "forbidden", "stop")
        assert "author" in r.reason and "withdraw" in r.reason
        unchanged(w, lambda: w.withdraw(other, private), "not_found", "stop")
    assert w.states[public].valid and w.states[private].valid


@pytest.mark.rules("R5-6", "L2-3", "L2-4")
@pytest.mark.parametrize("public", [False, True])
def test_R5_6_update_after_withdraw_is_conflict(w, public):
    mid = w.new_memory(w.alice, public=public)
    accepted(w.withdraw(w.alice, mid))
    r = unchanged(w, lambda: w.update(w.alice, mid, b'{"v":"late"}'), "conflict", "stop")
    assert mid in r.reason and "withdrawn" in r.reason
    assert w.states[mid].latest == 1 and w.states[mid].status == "withdrawn"
    assert not any(isinstance(f, MemoryUpdated) for f in w.facts[mid])


@pytest.mark.rules("R5-6", "R5-4", "L2-3", "L2-4")
@pytest.mark.parametrize("public", [False, True])
@pytest.mark.parametrize("visibility", ["public", "private"])
def test_R5_6_B15_publish_or_unpublish_of_a_withdrawn_memory_is_conflict(w, public, visibility):
    """DECISIONS.md B15: withdrawal is terminal, so visibility is frozen too."""
    mid = w.new_memory(w.alice, public=public)
    accepted(w.withdraw(w.alice, mid))
    r = unchanged(w, lambda: w.set_visibility(w.alice, mid, visibility), "conflict", "stop")
    assert "withdrawn" in r.reason
    assert w.states[mid].visibility == ("public" if public else "private")


@pytest.mark.rules("R5-6", "L2-7", "L2-3")
def test_R5_6_withdrawing_again_is_conflict_and_the_memory_stays_withdrawn(w):
    mid = w.new_memory(w.alice)
    accepted(w.withdraw(w.alice, mid))
    r = unchanged(w, lambda: w.withdraw(w.alice, mid), "conflict", "stop")
    assert "withdrawn" in r.reason
    assert [type(f) for f in w.facts[mid]] == [MemoryCreated, MemoryWithdrawn]


# --- R5-7, R5-8 versions ---------------------------------------------------------------


@pytest.mark.rules("R5-7", "L1-2")
def test_R5_7_versions_are_immutable(w):
    mid = w.new_memory(w.alice, b'{"v":1}')
    accepted(w.update(w.alice, mid, b'{"v":2}'))
    early = [msgspec.json.encode(f) for f in w.facts[mid]]
    accepted(w.update(w.alice, mid, b'{"v":3}'))
    accepted(w.publish(w.alice, mid))
    accepted(w.withdraw(w.alice, mid))
    # Later actions only append; the facts holding versions 1 and 2 are byte-identical.
    assert [msgspec.json.encode(f) for f in w.facts[mid][:2]] == early
    contents = {1: w.facts[mid][0].content}
    contents.update({f.version: f.content for f in w.facts[mid] if isinstance(f, MemoryUpdated)})
    assert contents == {1: b'{"v":1}', 2: b'{"v":2}', 3: b'{"v":3}'}
    with pytest.raises(AttributeError):
        w.facts[mid][1].content = b'{"v":"rewritten"}'
    with pytest.raises(AttributeError):
        w.states[mid].latest = 1


@pytest.mark.rules("R5-7", "R5-8")
def test_R5_8_each_version_number_names_exactly_one_recorded_version(w):
    """The core side of a pin: a (memory, version) pair names one immutable version,
    and only versions that exist. Pinning itself is tested with Threads."""
    mid = w.new_memory(w.alice, public=True)
    for _ in range(3):
        accepted(w.update(w.alice, mid))
    versions = [1] + [f.version for f in w.facts[mid] if isinstance(f, MemoryUpdated)]
    assert versions == [1, 2, 3, 4]
    state = w.states[mid]
    assert [v for v in range(-1, 7) if may_read_memory(state, w.alice, v)] == [1, 2, 3, 4]
    # Another agent may reference exactly one version of it: the current one (B12, D10).
    assert [v for v in range(-1, 7) if may_read_memory(state, w.bob, v)] == [4]


# --- R5-9, R5-10 visibility belongs to the Memory ---------------------------------------


@pytest.mark.rules("R5-9")
@pytest.mark.parametrize("public", [False, True])
def test_R5_9_updating_does_not_change_visibility(w, public):
    mid = w.new_memory(w.alice, public=public)
    expected = "public" if public else "private"
    for _ in range(2):
        d = accepted(w.update(w.alice, mid))
        assert d.states[mid].visibility == expected
    assert may_read_memory(w.states[mid], w.bob, None) is public


@pytest.mark.rules("R5-10", "R9-7")
def test_R5_10_the_readable_version_of_a_public_memory_follows_the_current_one(w):
    mid = w.new_memory(w.alice, public=True)
    assert may_read_memory(w.states[mid], w.bob, 1)
    accepted(w.update(w.alice, mid))
    state = w.states[mid]
    assert may_read_memory(state, w.bob, None) and may_read_memory(state, w.bob, 2)
    assert not may_read_memory(state, w.bob, 1)  # D10: older versions only via pins
    assert may_read_memory(state, w.alice, 1)


# --- R5-11 … R5-15 withdrawal and pins ----------------------------------------------------


@pytest.mark.rules("R5-11")
@pytest.mark.parametrize("public", [False, True])
def test_R5_11_withdrawal_stops_listing_and_new_references_by_others(w, public):
    mid = w.new_memory(w.alice, public=public)
    assert may_list_memory(w.states[mid], w.alice)
    assert may_list_memory(w.states[mid], w.bob) is public
    accepted(w.withdraw(w.alice, mid))
    state = w.states[mid]
    assert not may_list_memory(state, w.alice) and not may_list_memory(state, w.bob)
    # Another agent may pin only what it may read (B12): nothing of a withdrawn Memory.
    assert not any(may_read_memory(state, w.bob, v) for v in (None, 1))
    # The author's own new pin of a withdrawn Memory is refused by thread.post, which
    # checks `valid`; that test comes with Threads.
    assert not state.valid


@pytest.mark.rules("R5-12", "R5-14", "R9-8", "R9-3")
def test_R5_14_author_still_reads_every_version_after_withdrawal(w):
    """What the core offers for pins to one's own Memory: the author's read of every
    version survives withdrawal. Members reading such a pin is tested with Threads."""
    mid = w.new_memory(w.alice, public=True)
    accepted(w.update(w.alice, mid))
    accepted(w.withdraw(w.alice, mid))
    state = w.states[mid]
    assert may_read_memory(state, w.alice, 1) and may_read_memory(state, w.alice, 2)
    assert may_read_memory(state, w.alice, None)


@pytest.mark.rules("R5-13", "R5-4")
def test_R5_13_publishing_is_not_granting(w):
    mid = w.new_memory(w.alice, public=True)
    assert may_read_memory(w.states[mid], w.bob, None)
    # Reading a public Memory gives no right to change it …
    unchanged(w, lambda: w.update(w.bob, mid), "forbidden")
    unchanged(w, lambda: w.unpublish(w.bob, mid), "forbidden")
    unchanged(w, lambda: w.withdraw(w.bob, mid), "forbidden")
    # … and the author's unpublishing cuts others' access at once.
    accepted(w.unpublish(w.alice, mid))
    assert not may_read_memory(w.states[mid], w.bob, None)
    assert not may_read_memory(w.states[mid], w.bob, 1)
    unchanged(w, lambda: w.update(w.bob, mid), "not_found")


@pytest.mark.rules("R5-15", "R9-7", "R9-10")
def test_R5_15_another_agents_memory_is_readable_only_while_valid_and_public(w):
    """The predicate a pin of another agent's Memory will rest on (Thread test to come)."""
    mid = w.new_memory(w.alice)
    seen = []
    for step in (
        lambda: None,
        lambda: accepted(w.publish(w.alice, mid)),
        lambda: accepted(w.unpublish(w.alice, mid)),
        lambda: accepted(w.publish(w.alice, mid)),
        lambda: accepted(w.withdraw(w.alice, mid)),
    ):
        step()
        seen.append(may_read_memory(w.states[mid], w.bob, w.states[mid].latest))
    assert seen == [False, True, False, True, False]


# --- L4-5, L4-6 content size limit ------------------------------------------------------------


@pytest.mark.rules("L4-5", "L4-6", "L2-3", "L2-4")
def test_L4_6_content_at_the_size_limit_is_accepted_one_byte_over_is_too_large():
    w = World(Limits(max_content_bytes=64))
    alice = w.register("alice")
    at_limit, over = b"x" * 64, b"x" * 65
    r = unchanged(w, lambda: w.create(alice, over), "too_large", "revise")
    assert "65" in r.reason and "64" in r.reason
    mid = accepted(w.create(alice, at_limit)).result["memory"]
    assert w.facts[mid][0].content == at_limit
    unchanged(w, lambda: w.update(alice, mid, over), "too_large", "revise")
    assert w.states[mid].latest == 1
    d = accepted(w.update(alice, mid, at_limit))
    assert d.result["version"] == 2


@pytest.mark.rules("L4-5", "L4-6")
def test_L4_6_default_content_limit_is_256_KiB():
    w = World()
    alice = w.register("alice")
    accepted(w.create(alice, b"x" * 262_144))
    unchanged(w, lambda: w.create(alice, b"x" * 262_145), "too_large", "revise")


# --- R9-4, R12-9 knowing an id grants nothing ---------------------------------------------------

MEMORY_ACTIONS = {
    "update": lambda w, by, mid: w.update(by, mid),
    "update_too_large": lambda w, by, mid: w.update(by, mid, b"x" * (w.limits.max_content_bytes + 1)),
    "publish": lambda w, by, mid: w.publish(by, mid),
    "unpublish": lambda w, by, mid: w.unpublish(by, mid),
    "withdraw": lambda w, by, mid: w.withdraw(by, mid),
}


def _hidden_memory(w: World, kind: str) -> str:
    if kind == "private":
        return w.new_memory(w.alice)
    mid = w.new_memory(w.alice, public=kind == "withdrawn public")
    accepted(w.withdraw(w.alice, mid))
    return mid


@pytest.mark.rules("R9-4", "R12-9", "R12-8", "L2-3", "L2-4")
@pytest.mark.parametrize("kind", ["private", "withdrawn private", "withdrawn public"])
@pytest.mark.parametrize("action", sorted(MEMORY_ACTIONS))
def test_R12_9_unreadable_memory_is_not_found_worded_as_a_missing_id(w, kind, action):
    mid = _hidden_memory(w, kind)
    hidden = unchanged(w, lambda: MEMORY_ACTIONS[action](w, w.bob, mid), "not_found", "stop")
    ghost = unchanged(w, lambda: MEMORY_ACTIONS[action](w, w.bob, GHOST_MEMORY), "not_found", "stop")
    assert ghost.reason == f"memory {GHOST_MEMORY} was not found, or you may not read it"
    assert without_id(hidden, mid) == without_id(ghost, GHOST_MEMORY)
    assert hidden.hint is None


# --- L2-3, L2-4, L2-7 rejections -------------------------------------------------------------------


@pytest.mark.rules("L2-7", "R5-4", "L2-3")
def test_L2_7_publishing_a_public_or_unpublishing_a_private_memory_is_conflict(w):
    mid = w.new_memory(w.alice)
    r = unchanged(w, lambda: w.unpublish(w.alice, mid), "conflict", "stop")
    assert "already private" in r.reason
    accepted(w.publish(w.alice, mid))
    r = unchanged(w, lambda: w.publish(w.alice, mid), "conflict", "stop")
    assert "already public" in r.reason
    assert [type(f) for f in w.facts[mid]] == [MemoryCreated, MemoryVisibilitySet]


@pytest.mark.rules("L2-3", "L2-4")
def test_L2_4_every_memory_rejection_has_a_code_a_reason_and_a_next_step(w):
    """One of each refusal the Memory core makes; each is well formed (B7) and
    writes nothing. Expected codes follow WIRE.md "Which code"."""
    lazarus = w.register("lazarus")  # before the small limit: registration content counts too
    w.limits = Limits(max_content_bytes=16)
    mine = w.new_memory(w.alice, public=True)
    gone = w.new_memory(w.alice)
    accepted(w.withdraw(w.alice, gone))
    accepted(w.set_status(w.admin, lazarus, "deactivated"))
    cases = [
        (lambda: w.create(lazarus), "forbidden"),
        (lambda: w.create(w.bob, b"x" * 17), "too_large"),
        (lambda: w.update(w.bob, mine), "forbidden"),
        (lambda: w.update(w.bob, GHOST_MEMORY), "not_found"),
        (lambda: w.update(w.alice, gone), "conflict"),
        (lambda: w.update(w.alice, mine, b"x" * 17), "too_large"),
        (lambda: w.publish(w.alice, mine), "conflict"),
        (lambda: w.publish(w.alice, gone), "conflict"),
        (lambda: w.unpublish(w.bob, mine), "forbidden"),
        (lambda: w.withdraw(w.alice, gone), "conflict"),
        (lambda: w.withdraw(w.bob, gone), "not_found"),
        (lambda: w.withdraw(lazarus, mine), "forbidden"),
    ]
    for action, code in cases:
        unchanged(w, action, code)


# --- L1-1 state follows from facts -------------------------------------------------------------------


@pytest.mark.rules("L1-1", "L1-2")
def test_L1_1_memory_state_is_the_fold_of_its_facts_after_every_action(w):
    d = accepted(w.create(w.alice))
    mid = d.result["memory"]
    history = [d.states[mid]]
    for action in (
        lambda: w.update(w.alice, mid),
        lambda: w.publish(w.alice, mid),
        lambda: w.update(w.alice, mid),
        lambda: w.unpublish(w.alice, mid),
        lambda: w.withdraw(w.alice, mid),
    ):
        d = accepted(action())
        assert set(d.states) == {mid}
        assert d.states[mid] == fold(mid, w.facts[mid])
        history.append(d.states[mid])
    # Every earlier state is the fold of the facts up to it: the past is not rewritten.
    for n, state in enumerate(history, start=1):
        assert fold(mid, w.facts[mid][:n]) == state
    assert history[-1] == MemoryState(mid, w.alice, 3, "withdrawn", "private", history[0].created_at)
