"""Actors: one per live Thread and Task, and a few shared by all agents (by a
stable hash of the agent id), activated on demand, stopped when idle, carried
by a fixed set of pykka threads (D280, registry.py).

An actor serializes the commands of its object (L5), decides them with the pure
core against state read from one consistent LMDB view, and hands the result to
the group-committing writer. Replies cross back to asyncio through the ``reply``
callable each job carries (the server wraps ``loop.call_soon_threadsafe``).
"""

from ..core.agent import KEY_REVOKED
from ..store import Committed, Failed, Outcome, Replayed
from .runtime import OPEN_TASKS, Identity, Job, Runtime

# The outcomes of an action are the actors' reply vocabulary: what a Job's
# ``reply`` receives. Re-exported so the server needs nothing from the store;
# KEY_REVOKED: the refusal of a key rotated or reset (D185), on which the
# server closes the connection (4001). OPEN_TASKS: the agent name under which
# a commit's task_offered events are published (the open-Task stream).
__all__ = ["Runtime", "Job", "Identity", "Outcome", "Committed", "Replayed", "Failed", "KEY_REVOKED", "OPEN_TASKS"]
