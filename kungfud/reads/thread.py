"""Thread and assignment reads (§8 working sets, §9 visibility).

Every read is one LMDB read transaction (R9-5) and bounded (R8-13): digests first,
pinned content only with ``full``. Only current members read a Thread (R9-9,
R9-2); anyone else gets ``not_found`` worded as for a missing id (R9-4, R12-9).
Assignment states are shown as of ``now``: a passed deadline wins (L4-3).
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..core.assignment import AssignmentState, effective
from ..core.timestamps import rfc3339
from ..core.entry import EntryState
from ..core.facts import entry_obj, member_obj
from ..core.shapes import delivery, held_obligations, judgment
from ..core.task import TaskState, may_read_contract
from ..core.thread import SPEAKING, ThreadState, readable_thread
from ..errors import Rejection
from ..store.view import View

__all__ = [
    "thread_get", "thread_entries", "thread_entry", "thread_list", "assignment_get", "assignment_view", "entry_digest",
    "pin_content", "agent_name",
]

RECENT = 10  # entries in a working set's digest of history
MAX_MEMBERS = 100  # members listed in a working set (the count is always given)
MAX_LIVE = 100  # live assignments listed in a working set


class _Name(msgspec.Struct):
    name: str = ""


_name_dec = msgspec.json.Decoder(_Name)  # reads `name` only: other content fields are skipped in C


def agent_name(view: View, agent: str) -> dict[str, str]:
    """WIRE.md 1.2 "Names beside ids": an agent as ``content: {name}`` — its
    name only, never the rest of its account content (which may be large)."""
    state = view.state(agent)
    if state is None:
        return {"name": ""}
    try:
        return {"name": _name_dec.decode(state.content).name}
    except (msgspec.DecodeError, msgspec.ValidationError):
        return {"name": ""}


def _raw(b: bytes | None) -> Any:
    return None if b is None else msgspec.Raw(b)


def pin_content(view: View, pinner: str, memory: str, version: int) -> bytes | None:
    """R9-10, R5-14, R5-15: a pin of the pinner's own Memory is readable by the
    context's readers always; a pin of another agent's Memory only while that
    Memory is valid and public."""
    state = view.state(memory)
    if state is None:
        return None
    if state.author != pinner and not (state.valid and state.visibility == "public"):
        return None
    return view.memory_content(memory, version)


def _may_see_task(view: View, task: str, reader: str) -> bool:
    """D43, R12-9: an entry shows the Task it references only to a reader who may
    read that Task's contract; to anyone else the field is absent, so a
    restricted Task's id shows through no entry (a reference grants nothing, B22)."""
    t: TaskState | None = view.state(task)
    return t is not None and may_read_contract(t, reader)


def entry_digest(view: View, e: EntryState, reader: str, full: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "entry": e.entry,
        "author": e.author,
        "at": rfc3339(e.at),
        "responders": e.responders,
        "pin": {"memory": e.pin_memory, "version": e.pin_version},
    }
    if e.reply_to is not None:
        out["reply_to"] = e.reply_to
    if e.ask is not None:
        out["ask"] = e.ask
    if e.task is not None and _may_see_task(view, e.task, reader):
        out["task"] = e.task
    if e.assignment is not None:
        out["assignment"] = e.assignment
    responses = []
    for agent in e.responders:
        r = e.responses[agent]
        item: dict[str, Any] = {"agent": agent, "state": r.state}
        # R9-12, R6.3-17: a handle note is readable by the entry's author and the responder.
        if r.note is not None and reader in (e.author, agent):
            item["content"] = msgspec.Raw(r.note)
        responses.append(item)
    out["responses"] = responses
    if full:
        content = pin_content(view, e.author, e.pin_memory, e.pin_version)
        if content is not None:
            out["content"] = msgspec.Raw(content)
    return out


def _my_obligations(view: View, t: ThreadState, me: str, now: int) -> list[dict[str, Any]]:
    """The caller's obligations in this Thread, oldest first: those of the
    entries it owes a response to and of the live assignments it took or created
    (the candidates; what each implies is :func:`~kungfud.core.obligations.of_state`'s)."""
    obs: list[dict[str, Any]] = []
    for (n, _), _src in view.query("pending", t.thread, party=me):
        entry = entry_obj(t.thread, n)
        obs += held_obligations(entry, view.state(entry), me, now)
    for (asg, lv), _src in view.query("live", t.thread, party=me):  # those it took or created
        if lv.state in ("taken", "delivered"):
            obs += held_obligations(asg, view.state(asg), me, now)
    obs.sort(key=lambda o: o["created_at"])
    return obs


def _actions(view: View, t: ThreadState, me: str, role: str) -> list[str]:
    if not t.open:
        return ["thread.leave", "assignment.judge"] if any(
            lv.state == "delivered" and lv.creator == me and not lv.forfeited
            for (_, lv), _src in view.query("live", t.thread, party=me)
        ) else ["thread.leave"]
    acts = ["thread.leave"]
    if role in SPEAKING:
        acts.append("thread.post")
    if view.query("pending", t.thread, 1, party=me):
        acts.append("thread.handle")
    if role == "governor":
        acts += ["thread.admit", "thread.remove", "thread.set_role", "thread.close"]
        if t.grant is not None:
            acts.append("thread.void_admission")
    return acts


def thread_get(view: View, me: str, thread: str, now: int) -> dict | Rejection:
    t: ThreadState | None = view.state(thread)
    mine = view.state(member_obj(thread, me))
    if (r := readable_thread(t, thread, mine)) is not None:
        return r
    assert t is not None
    # R6.2-16: each membership shows the grant it came through (null: the creator) and when;
    # WIRE.md 1.2: and the member's name (one read per member listed, at most MAX_MEMBERS).
    members = [
        {"agent": m.agent, "role": m.role, "joined_at": rfc3339(m.joined_at), "admission": m.admission,
         "content": agent_name(view, m.agent)}
        for m in (view.state(member_obj(thread, a)) for a in view.members_listed(thread, MAX_MEMBERS))
    ]
    role = mine.role
    recent = []
    for n in range(max(1, t.entries - RECENT + 1), t.entries + 1):
        recent.append(entry_digest(view, view.state(entry_obj(thread, n)), me, False))
    live = []
    for (asg, lv), _src in view.query("live", thread, MAX_LIVE):
        a: AssignmentState = view.state(asg)
        live.append({"assignment": asg, "to": lv.to, "creator": lv.creator, "state": effective(a, now), "entry": lv.entry})
    out: dict[str, Any] = {
        "thread": thread,
        "status": t.status,
        "role": role,
        "creator": t.creator,
        "created_at": rfc3339(t.created_at),
        "member_count": t.member_count,
        "members": members,
        "admission": (
            {"admission": t.grant.admission, "role": t.grant.role, "issued_at": rfc3339(t.grant.issued_at)}
            if t.grant is not None
            else None
        ),
        # B8: every grant the state remembers (D45), voided and replaced ones too; never a token.
        "admissions": [
            {"admission": g.admission, "role": g.role, "issued_at": rfc3339(g.issued_at)}
            | ({"voided_at": rfc3339(g.voided_at)} if g.voided_at is not None else {})
            for g in t.admissions
        ],
        "entries": t.entries,
        "recent": recent,
        "assignments": live,
        "obligations": _my_obligations(view, t, me, now),
        "actions": _actions(view, t, me, role),
    }
    if t.content is not None:
        out["content"] = msgspec.Raw(t.content)
    if t.closed_at is not None:
        out["closed_at"] = rfc3339(t.closed_at)
    return out


# The content one page of a list read returns (docs/wire.md "Reads"): a page
# stops after the item that reaches it, so one read is about this size however
# large `limit` is, and always makes progress.
READ_PAGE_BYTES = 1_048_576


def thread_entries(
    view: View, me: str, thread: str, cursor: str | None, limit: int, full: bool, newest_first: bool = False
) -> dict | Rejection:
    """Oldest first, or newest first (WIRE.md 1.1): the cursor is the number of
    the last entry returned, and the next page continues from the one after it
    in the chosen direction. Entries are never removed, so neither direction
    skips one that existed when paging began."""
    t: ThreadState | None = view.state(thread)
    if (r := readable_thread(t, thread, view.state(member_obj(thread, me)))) is not None:
        return r
    assert t is not None
    at = 0 if cursor is None else int(cursor)  # an entry number: its format checked at the wire (EntryCursor, D52)
    if newest_first:
        top = t.entries if cursor is None else min(t.entries, at - 1)
        numbers = range(top, max(0, top - limit), -1)
    else:
        numbers = range(at + 1, min(t.entries, at + limit) + 1)
    # A page stops at READ_PAGE_BYTES of pinned content (after at least one
    # entry), so one small read never returns an unbounded reply (D29).
    items = []
    budget = READ_PAGE_BYTES
    last = None
    for n in numbers:
        if budget <= 0:
            break
        item = entry_digest(view, view.state(entry_obj(thread, n)), me, full)
        items.append(item)
        budget -= _content_bytes(item)
        last = n
    if last is None:
        return {"items": items, "cursor": None}
    more = last > 1 if newest_first else last < t.entries
    return {"items": items, "cursor": str(last) if more else None}


def thread_entry(view: View, me: str, thread: str, entry: int) -> dict | Rejection:
    """WIRE.md 1.1: one entry in the read shape of ``thread.entries``, with its
    pinned content when the caller may read the pin (R9-10)."""
    t: ThreadState | None = view.state(thread)
    if (r := readable_thread(t, thread, view.state(member_obj(thread, me)))) is not None:
        return r
    assert t is not None
    if entry > t.entries:
        return Rejection.not_found("entry", f"{entry} in thread {thread}")
    return entry_digest(view, view.state(entry_obj(thread, entry)), me, True)


def _content_bytes(item: dict) -> int:
    content = item.get("content")
    return len(content) if isinstance(content, msgspec.Raw) else 0


def thread_list(view: View, me: str, cursor: str | None, limit: int) -> dict | Rejection:
    # `cursor` is a Thread id, its format checked at the wire (ThreadCursor, D52).
    items = []
    more = False
    for thread, role in view.memberships(me, cursor):
        if len(items) == limit:
            more = True
            break
        t: ThreadState = view.state(thread)
        items.append({"thread": thread, "role": role, "status": t.status, "entries": t.entries})
    return {"items": items, "cursor": items[-1]["thread"] if more else None}


def assignment_get(view: View, me: str, asg: str, now: int) -> dict | Rejection:
    a: AssignmentState | None = view.state(asg)
    t: ThreadState | None = view.state(a.thread) if a is not None else None
    if a is None or t is None or readable_thread(t, a.thread, view.state(member_obj(a.thread, me))) is not None:
        return Rejection.not_found("assignment", asg)
    return assignment_view(view, me, asg, a, now)


def assignment_view(view: View, me: str, asg: str, a: AssignmentState, now: int, instruction: bool = True) -> dict[str, Any]:
    """An assignment as ``assignment.get`` shows it to a current member of its
    Thread (the caller checked that); ``thread.assignments`` leaves out the
    ``instruction`` (the entry, readable with ``thread.entry``)."""
    state = effective(a, now)
    out: dict[str, Any] = {
        "assignment": asg,
        "thread": a.thread,
        "entry": a.entry,
        "creator": a.creator,
        "to": a.to,
        "state": state,
        "created_at": rfc3339(a.created_at),
        "deliver_within_s": a.deliver_within_s,
        "judge_within_s": a.judge_within_s,
        "content": msgspec.Raw(a.content),
    }
    if instruction:  # WIRE.md 1.1: the entry that carries the assignment, as thread.entry shows it.
        out["instruction"] = entry_digest(view, view.state(entry_obj(a.thread, a.entry)), me, True)
    if a.redoes is not None:
        out["redoes"] = a.redoes
    if a.taker is not None:
        out["taker"] = a.taker
    if a.deliver_by is not None:
        out["deliver_by"] = rfc3339(a.deliver_by)
    if a.judge_by is not None:
        out["judge_by"] = rfc3339(a.judge_by)
    if a.forfeited:
        out["forfeited"] = True
    if a.delivered_at is not None and a.pin_memory is not None and a.pin_version is not None:
        # R9-11: a delivery's pinned versions are readable by current members.
        out["delivery"] = delivery(a.delivered_at, a.pin_memory, a.pin_version, view.memory_content(a.pin_memory, a.pin_version))
    if a.judged_at is not None:
        out["judgment"] = judgment(a.state, a.judged_at, a.reason)
    elif state in ("timed_out", "undecided") and a.ended_at is None:
        out["ended_by"] = "deadline"
    if a.ended_at is not None:
        out["ended_at"] = rfc3339(a.ended_at)
    # The working set's obligations: the turn item without its ref and created_at.
    out["obligations"] = [
        {k: ob[k] for k in ("obligation_id", "obligation", "due", "next")} for ob in held_obligations(asg, a, me, now)
    ]
    return out


