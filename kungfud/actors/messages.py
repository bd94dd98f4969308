"""What is told to an object's actor, and what the registry knows of it: the
clock's one message (:class:`SweepDue`), a job being decided (:class:`Run`),
the writer's outcomes (:class:`Done`, delivered in a :class:`DoneBatch`), and
the registry's record of a live actor (:class:`ActorSlot`). Apart from
:mod:`.object_actor`, so the clock tells an actor without importing it."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..store import Outcome
    from .runtime import Job

__all__ = ["SweepDue", "ActorSlot", "Run", "Done", "DoneBatch", "DONE_BATCH"]


class SweepDue:
    """A clock message: record the expiries of this Thread or Task that are due."""

    __slots__ = ()


class ActorSlot:
    """What the registry knows of a live actor, to stop it when idle."""

    __slots__ = ("last_used", "busy")

    def __init__(self) -> None:
        self.last_used = time.monotonic()
        self.busy = False


class Run:
    """A job (or a deadline sweep, ``job is None``) and how often it was decided."""

    __slots__ = ("job", "attempt")

    def __init__(self, job: "Job | None", attempt: int = 0):
        self.job = job
        self.attempt = attempt


class Done:
    """The writer's outcome for one action of this actor (sent back as a message)."""

    __slots__ = ("run", "outcome", "versions")

    def __init__(self, run: Run, outcome: Outcome, versions: dict[str, int]):
        self.run = run
        self.outcome = outcome
        self.versions = versions


class DoneBatch:
    """A wake-up: outcomes are waiting in the actor's done box. The writer
    reports a whole group commit at once; one message per actor per commit,
    not one per action."""

    __slots__ = ()


DONE_BATCH = DoneBatch()
