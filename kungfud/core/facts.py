"""Facts: the recorded results of actions, deadlines and account changes (§1.1, L1).

Every fact is a frozen msgspec Struct in one tagged union, so the store encodes and
decodes all of them with one codec. A fact never changes once recorded; a
correction is a new fact (L1-3). Participant content travels as opaque JSON bytes
in fields named ``content`` (L6): nothing in the core looks inside them.
"""

from __future__ import annotations

from typing import Literal, Union

import msgspec

__all__ = [
    "Fact",
    "AgentRegistered",
    "AgentStatusSet",
    "MemoryCreated",
    "MemoryUpdated",
    "MemoryVisibilitySet",
    "MemoryWithdrawn",
    "AnyFact",
    "Decision",
    "touches",
]


class Fact(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind"):
    at: int  # ms since epoch: when it was recorded
    by: str | None  # the acting agent; None for deadlines and the daemon itself


# --- §4 Agent -------------------------------------------------------------


class AgentRegistered(Fact, frozen=True, tag="agent.registered"):
    agent: str
    content: bytes  # {"name": …} as JSON
    key_hash: bytes  # sha256 of the agent key; the key itself is never stored
    admin: bool = False


class AgentStatusSet(Fact, frozen=True, tag="agent.status_set"):
    agent: str
    status: Literal["active", "deactivated"]


# --- §5 Memory ------------------------------------------------------------


class MemoryCreated(Fact, frozen=True, tag="memory.created"):
    memory: str
    author: str
    content: bytes  # version 1


class MemoryUpdated(Fact, frozen=True, tag="memory.updated"):
    memory: str
    version: int
    content: bytes


class MemoryVisibilitySet(Fact, frozen=True, tag="memory.visibility_set"):
    memory: str
    visibility: Literal["private", "public"]


class MemoryWithdrawn(Fact, frozen=True, tag="memory.withdrawn"):
    memory: str


AnyFact = Union[
    AgentRegistered,
    AgentStatusSet,
    MemoryCreated,
    MemoryUpdated,
    MemoryVisibilitySet,
    MemoryWithdrawn,
]


def touches(fact: Fact) -> tuple[str, ...]:
    """The objects whose state this fact changes (their streams get the fact)."""
    if isinstance(fact, (AgentRegistered, AgentStatusSet)):
        return (fact.agent,)
    if isinstance(fact, (MemoryCreated, MemoryUpdated, MemoryVisibilitySet, MemoryWithdrawn)):
        return (fact.memory,)
    raise TypeError(f"unknown fact {type(fact).__name__}")


class Decision(msgspec.Struct, frozen=True):
    """What an accepted action records, and its receipt (L3-5).

    ``result`` is the receipt as first returned, secrets included; the store keeps
    it with secret fields nulled (DECISIONS.md B4). ``states`` are the new states of
    every object the facts touch, keyed by id (the store keeps them as snapshots).
    """

    facts: list
    result: dict
    states: dict
