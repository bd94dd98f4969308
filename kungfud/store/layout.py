"""Table names, key shapes and what each row holds, in every backend (the
values' encoding: :mod:`~kungfud.store.codec`).

| db         | key                              | value                                  |
|------------|----------------------------------|----------------------------------------|
| meta       | b"seq", b"format", b"events"     | last fact seq (u64 BE), format version, last event seq (u64 BE; derived) |
|            | b"event_kinds"                   | msgpack {kind: first fact seq it is made for} (not derived; store/events.py, D285) |
| log        | seq (u64 BE)                     | msgpack fact (the truth)               |
| objects    | object id                        | msgpack [version, state snapshot]      |
| receipts   | agent, 0, op, 0, idempotency key | msgpack Receipt                        |
| agent_keys | sha256(agent key)                | agent id; a scoped key's: agent id, 0, msgpack [scope, expires_at, key_id] |
| memories   | author, 0, memory id             | b"" (listing; withdrawn removed)       |
|            | author, 1, memory id             | b"" (the public ones only, D233)       |
| versions   | memory id, 0, version (u32 BE)   | seq of the fact holding that version   |
| memberships| agent, 0, thread id              | role (current memberships)             |
| members    | thread, 0, "j", joined_at (u64), agent | role (current members, in join order) |
|            | thread, 0, "g" or "s", agent     | b"" (governors / members who may speak) |
| pending    | thread, 0, agent, 0, entry (u32) | b"" (responses pending, D93)           |
| live       | thread, 0, "a", assignment       | msgpack Live (non-terminal assignments, D93) |
|            | thread, 0, "p", party, 0, assignment | b"" (its creator's and taker's)    |
|            | thread, 0, "d", due (u64), assignment | b"" (running deadlines)           |
| tokens     | sha256 of a live admission token | thread id                              |
| obligations| holder, 0, arose (u64), order, ob id | msgpack Obligation (open obligations; order: thread + entry (u64), else the work's id, D282) |
| deadlines  | due (u64 ms), object id          | id of the actor that owns the object   |
| opportunities | agent, 0, assignment/task id  | thread id / task id: untaken assignments addressed to it, restricted Tasks naming it |
| tasks      | author or agent or "*", 0, task  | b"author" / b"named" / b"open"         |
| engagements| agent, 0, task, 0, engagement    | b"" (an agent's engagements per Task)  |
| adopted    | task, 0, engagement              | b"" (adopted engagements)              |
| events     | agent, 0, event seq (u64 BE)     | event JSON (the feed; one row per event, D200) |
|            | "*", 0, event seq (u64 BE)       | msgpack Offer: a task_offered event, stored once (D201) |
| outcomes   | party, 0, seq (u64 BE), work id  | msgpack [thread or nil, outcome JSON]: ended assignments and engagements per party |
| usage      | agent id                         | u64 BE: bytes of the facts its actions recorded (capacity limits, quota.py) |
| hooks      | agent                            | b"" (agents with a webhook endpoint; WIRE.md 1.2) |
| a2a_push   | author \0 task                   | b"" (A2A Tasks with push configs; WIRE.md 1.3) |
| a2a_push   | author \0 task                   | b"" (A2A Tasks with push configs; WIRE.md 1.3) |
| a2a_changed| author \0 changed (u64) task     | b"" (an author's A2A Tasks by their last A2A-visible change; a2a.tasks, D410) |

Everything but ``log``, ``meta``, ``receipts`` and ``hook_cursors`` is derived
(rebuildable from the log), and so is ``meta/events``; receipts are the record
of each first success; ``hook_cursors`` is written by the webhook delivery
runner, not by actions (D212). ``hooks``, ``hook_cursors``, ``a2a_push`` and
``a2a_changed`` were added without a format step: a store that lacks them
gets them empty when opened (ADDED_EMPTY).
"""

from __future__ import annotations

import struct

# The stored rows' encoders live in codec.py (the one seam); named here too for
# the modules outside store/ that read a row (actors' overlay, tests, bench).
from .codec import Receipt, decode_fact, decode_object, encode_fact, encode_object

__all__ = [
    "DBS",
    "DERIVED",
    "Receipt",
    "u64",
    "from_u64",
    "receipt_scope",
    "encode_fact",
    "decode_fact",
    "encode_object",
    "decode_object",
    "FORMAT",
    "RETIRED",
    "PUBLIC",
    "ADDED",
    "DERIVED_META",
    "ADDED_EMPTY",
]

# The storage format: 2 moved members, memberships (D90), pending responses and
# live assignments (D93) into objects and rows of their own; 3 dropped the
# per-object ``stream`` rows, which no query read (D186); 4 gave every event
# its own seq, one row each, and added the open-Task stream (D200, D201), the
# rows of each author's public Memories (D233), the ``usage`` table (capacity
# per agent, D242), and moved a Task's live engagements out of its snapshot
# into ``live`` rows (D271); 5 orders the obligations of one millisecond as
# the facts recorded them (D282). An older store is migrated once on start
# (D92); a newer one is refused.
FORMAT = b"5"
DBS = (
    "meta", "log", "objects", "receipts", "agent_keys", "memories", "versions",
    "memberships", "members", "pending", "live", "tokens", "obligations", "deadlines", "opportunities", "tasks", "engagements", "adopted",
    "events", "outcomes", "usage", "hooks", "hook_cursors", "a2a_push",
    "a2a_changed",
)
DERIVED = tuple(d for d in DBS if d not in ("meta", "log", "receipts", "hook_cursors"))
# The ``meta`` rows that are derived (rebuilt by ``kungfud check``): the last event seq.
DERIVED_META = (b"events",)
# Tables added empty to a store that lacks them, with no format step (D212).
ADDED_EMPTY = ("hooks", "hook_cursors", "a2a_push", "a2a_changed")
# Tables of older formats, dropped when a store is migrated (D186).
RETIRED = ("stream",)
# Tables a format step added, by that format: a store of an older format lacks
# them until it is migrated (PostgreSQL creates them then; LMDB on open).
ADDED = {"usage": 4}

# The separator of an author's public-Memory rows in ``memories`` (D233):
# after the author id, where its listing rows have 0.
PUBLIC = b"\x01"

_U64 = struct.Struct(">Q")
_U32 = struct.Struct(">I")


def u64(n: int) -> bytes:
    return _U64.pack(n)


def from_u64(b: bytes) -> int:
    return _U64.unpack(b)[0]


def u32(n: int) -> bytes:
    return _U32.pack(n)


def receipt_scope(agent: str | None, op: str, key: str) -> bytes:
    return (agent or "").encode() + b"\x00" + op.encode() + b"\x00" + key.encode()
