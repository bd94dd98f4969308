"""§9 Visibility of Memories: the pure predicates every read and every
not-found decision rests on.

Rows about Threads and Tasks (R9-9…R9-18) and pins (R9-10, R5-14, R5-15 in a
thread) are tested with those atoms; here the predicates they will build on.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kungfud.core.memory import MemoryState
from kungfud.core.visibility import may_list_memory, may_read_memory

AUTHOR, OTHER = "ag_author", "ag_other"
STATUSES = ("valid", "withdrawn")
VISIBILITIES = ("private", "public")


def memory(latest: int = 3, status: str = "valid", visibility: str = "private") -> MemoryState:
    return MemoryState("me_000001", AUTHOR, latest, status, visibility, 0)  # type: ignore[arg-type]


def every_memory(latest: int = 3):
    for status, visibility in itertools.product(STATUSES, VISIBILITIES):
        yield memory(latest, status, visibility)


@pytest.mark.rules("R9-7", "R5-10")
def test_R9_7_anyone_reads_the_current_version_of_a_valid_public_memory():
    state = memory(latest=3, visibility="public")
    assert may_read_memory(state, OTHER, None)
    assert may_read_memory(state, OTHER, 3)
    assert not may_read_memory(state, OTHER, 2)  # D10: not an earlier version
    assert not may_read_memory(state, OTHER, 4)


@pytest.mark.rules("R9-7", "R9-4", "R12-9", "R5-2")
@pytest.mark.parametrize(
    "status, visibility", [("valid", "private"), ("withdrawn", "private"), ("withdrawn", "public")]
)
def test_R9_4_others_read_no_version_of_a_private_or_withdrawn_memory(status, visibility):
    state = memory(latest=3, status=status, visibility=visibility)
    assert not any(may_read_memory(state, OTHER, v) for v in (None, 0, 1, 2, 3, 4))


@pytest.mark.rules("R9-8", "R5-14", "R4-2")
def test_R9_8_the_author_reads_every_version_in_every_state():
    for state in every_memory(latest=3):
        assert may_read_memory(state, AUTHOR, None), state
        assert [v for v in range(-1, 6) if may_read_memory(state, AUTHOR, v)] == [1, 2, 3], state


@pytest.mark.rules("R5-11")
def test_R5_11_withdrawn_memories_are_listed_to_nobody_valid_ones_as_read():
    listed = {
        (s.status, s.visibility): (may_list_memory(s, AUTHOR), may_list_memory(s, OTHER)) for s in every_memory()
    }
    assert listed == {
        ("valid", "private"): (True, False),
        ("valid", "public"): (True, True),
        ("withdrawn", "private"): (False, False),
        ("withdrawn", "public"): (False, False),
    }


@pytest.mark.rules("R5-9", "R5-15")
def test_R5_15_visibility_of_another_agents_memory_is_a_property_of_the_whole_memory():
    """The same answer for others whatever the number of versions: visibility is
    the Memory's, not a version's (R5-9)."""
    for latest in (1, 2, 7):
        for state in every_memory(latest):
            expected = state.status == "valid" and state.visibility == "public"
            assert may_read_memory(state, OTHER, latest) is expected


# An oracle written from the §9 table, compared with the predicates on any input.
def oracle_read(state: MemoryState, reader: str, version: int | None) -> bool:
    in_range = version is None or 1 <= version <= state.latest
    if reader == state.author:  # R9-8
        return in_range
    current = version is None or version == state.latest  # R9-7, D10
    return state.status == "valid" and state.visibility == "public" and current


states = st.builds(
    MemoryState,
    memory=st.just("me_000001"),
    author=st.sampled_from([AUTHOR, OTHER, "ag_third"]),
    latest=st.integers(1, 50),
    status=st.sampled_from(STATUSES),
    visibility=st.sampled_from(VISIBILITIES),
    created_at=st.integers(0, 2**48),
)


@pytest.mark.rules("R9-7", "R9-8", "R9-4", "R5-11")
@given(state=states, reader=st.sampled_from([AUTHOR, OTHER, "ag_third"]), version=st.none() | st.integers(-2, 53))
def test_R9_7_R9_8_predicates_agree_with_the_visibility_table(state, reader, version):
    assert may_read_memory(state, reader, version) is oracle_read(state, reader, version)
    assert may_list_memory(state, reader) is (
        state.status == "valid" and (reader == state.author or state.visibility == "public")
    )
