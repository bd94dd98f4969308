"""Storage format 4 (issue 27, D271): a Task keeps no live engagements.

Format 3 kept, in each Task's snapshot, its live engagements and the open one
of each agent (``TaskState.live``, ``open_by_agent``), so every action on a
Task decoded, folded and encoded them all. Format 4 derives them from the
engagements, as format 2 did a Thread's live assignments (D93): ``live`` rows
under the Task's id (``a`` + engagement → the ``LiveEngagement``; ``p`` +
agent + engagement; ``d`` + due + engagement). :func:`step_3_to_4` is the
whole migration: each Task's snapshot re-encoded without the two fields (its
version unchanged: the facts did not change) and the rows of every engagement
still running. Nothing else differs between the formats.
"""

from __future__ import annotations

from ..core.engagement import EngagementState
from ..core.task import TaskState
from .indexes import state_rows
from .kv import Snapshot, prefix_stop
from .codec import decode_object, encode_object

__all__ = ["step_3_to_4"]


def step_3_to_4(kv: Snapshot) -> dict[str, dict[bytes, bytes]]:
    """The puts (table → key → value) that bring the Tasks of a format-3 (or
    format-2) store in ``kv`` to format 4; nothing is deleted. A format-3
    snapshot decodes as a format-4 ``TaskState`` (the two fields it no longer
    has are skipped) and encodes without them."""
    puts: dict[str, dict[bytes, bytes]] = {"objects": {}, "live": {}}
    for key, raw in kv.scan("objects", b"tk_", prefix_stop(b"tk_")):
        if b"." in key:  # a contract version, tk_….vN: unchanged
            continue
        version, task = decode_object(raw, TaskState)
        puts["objects"][key] = encode_object(version, task)
    for key, raw in kv.scan("objects", b"en_", prefix_stop(b"en_")):
        _, e = decode_object(raw, EngagementState)
        for table, row, value in state_rows(key.decode(), e):
            if table == "live":
                puts[table][row] = value
    return puts
