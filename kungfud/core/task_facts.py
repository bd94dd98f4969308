"""The facts of Tasks and their engagements (§7), and the id of one contract
version (``tk_….vN``). Like every fact (:mod:`kungfud.core.facts`), each is a
frozen msgspec Struct with its own tag in the one tagged union
(:data:`kungfud.core.kinds.AnyFact`); :class:`Contract` is stored inside
``task.created`` and ``task.revised``.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from .facts import Fact

__all__ = [
    "contract_obj", "Contract", "TaskCreated", "TaskRevised", "TaskAcceptingSet", "EngagementConfirmed",
    "EngagementDelivered", "EngagementJudged", "EngagementDropped", "EngagementExpired",
]


def contract_obj(task: str, version: int) -> str:
    return f"{task}.v{version}"


class Contract(msgspec.Struct, frozen=True):
    """One contract version (§7.1). ``content`` holds the participant text
    (``{"output", "criteria", "references"?}``); everything else is structure."""

    inputs: list[tuple[str, int]]  # required inputs: (memory, version) of the author's own Memories
    deliver_within_s: int
    judge_within_s: int
    content: bytes
    on_no_judgment: Literal["undecided", "adopt"] = "undecided"
    adoption_limit: int | None = None
    judge: str | None = None  # designated judge; None: the author judges
    eligibility: list[str] | None = None  # allow-list for taking (B18)
    readers: Literal["parties", "public"] = "parties"  # who reads adopted content (T3)


class TaskCreated(Fact, frozen=True, tag="task.created"):
    task: str
    author: str
    audience: list[str] | None  # None: open; else the named agents (fixed, R7.2-1)
    contract: Contract

    def objects(self) -> tuple[str, ...]:
        return (self.task, contract_obj(self.task, 1))


class TaskRevised(Fact, frozen=True, tag="task.revised"):
    task: str
    version: int
    contract: Contract

    def objects(self) -> tuple[str, ...]:
        return (self.task, contract_obj(self.task, self.version))


class TaskAcceptingSet(Fact, frozen=True, tag="task.accepting_set"):
    """B20: pause/resume new engagements; existing ones are untouched."""

    task: str
    accepting: bool

    touches = ("task",)


class EngagementConfirmed(Fact, frozen=True, tag="engagement.confirmed"):
    """R7.3-2, R7.3-3: binds the agent, the contract version and the input versions."""

    engagement: str
    task: str
    agent: str
    contract_version: int
    inputs: list[tuple[str, int]]
    deliver_by: int
    # The bound version's terms, so the engagement's state follows from its facts:
    author: str
    judge: str  # who judges: the designated judge, else the author (R7-1, B17)
    judge_within_s: int
    on_no_judgment: Literal["undecided", "adopt"]
    adoption_limit: int | None
    readers: Literal["parties", "public"]

    touches = ("engagement", "task")


class EngagementDelivered(Fact, frozen=True, tag="engagement.delivered"):
    engagement: str
    task: str
    pin_memory: str
    pin_version: int
    judge_by: int

    touches = ("engagement", "task")


class EngagementJudged(Fact, frozen=True, tag="engagement.judged"):
    engagement: str
    task: str
    verdict: Literal["adopt", "reject"]
    reason: bytes | None = None

    touches = ("engagement", "task")


class EngagementDropped(Fact, frozen=True, tag="engagement.dropped"):
    engagement: str
    task: str

    touches = ("engagement", "task")


class EngagementExpired(Fact, frozen=True, tag="engagement.expired"):
    """A deadline passed: delivery → timed_out; judgment → as the contract states
    (undecided, or adopted while the adoption limit allows, B21)."""

    engagement: str
    task: str
    outcome: Literal["timed_out", "undecided", "adopted"]

    touches = ("engagement", "task")
