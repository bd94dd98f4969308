"""``thread.assignments`` (docs/wire.md "A Thread's assignments"): a Thread's
assignments, live and ended, newest first, each as ``assignment.get`` shows it
without its ``instruction`` — so an ended assignment's delivery, verdict and
reason stay readable in one place after it left the working set's live list.

Thread history: current members only (§9 R9-9, R9-2); anyone else gets the
``not_found`` of a missing Thread (R9-4, R12-9). Walked from the Thread's
entries, newest first (each entry names the assignment it carries, and entries
are never removed), so no derived table is needed: a page examines at most
SCAN_BUDGET entries and READ_PAGE_BYTES of content (asked and delivered), whichever comes
first (R8-13), and its cursor — the number of the last entry examined — never
skips an assignment (R8-10). A page may hold fewer than ``limit`` items (none,
in a long stretch without assignments) and still have a cursor.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..core.assignment import TERMINAL, AssignmentState, effective
from ..core.facts import entry_obj, member_obj
from ..core.thread import ThreadState, readable_thread
from ..errors import Rejection
from ..store.view import View
from .thread import READ_PAGE_BYTES, assignment_view

__all__ = ["thread_assignments", "SCAN_BUDGET"]

SCAN_BUDGET = 1000  # entries one page may examine (bounded reads, R8-13)


def thread_assignments(
    view: View, me: str, thread: str, state: str | None, cursor: str | None, limit: int, now: int
) -> dict | Rejection:
    t: ThreadState | None = view.state(thread)
    if (r := readable_thread(t, thread, view.state(member_obj(thread, me)))) is not None:
        return r
    assert t is not None
    # `cursor` is an entry number, its format checked at the wire (EntryCursor, D52).
    top = t.entries if cursor is None else min(t.entries, int(cursor) - 1)
    items: list[dict[str, Any]] = []
    budget = READ_PAGE_BYTES
    last = None
    stopped = False
    for n in range(top, 0, -1):
        if len(items) == limit or budget <= 0 or (last is not None and top - last + 1 >= SCAN_BUDGET):
            stopped = True
            break
        last = n
        asg = view.state(entry_obj(thread, n)).assignment
        if asg is None:
            continue
        a: AssignmentState = view.state(asg)
        if state is not None and (effective(a, now) in TERMINAL) != (state == "ended"):
            continue
        item = assignment_view(view, me, asg, a, now, instruction=False)
        items.append(item)
        budget -= _content_bytes(item)
    return {"items": items, "cursor": str(last) if stopped and last is not None else None}


def _content_bytes(item: dict[str, Any]) -> int:
    """The participant content an item carries: what was asked, and the delivery."""
    parts = (item.get("content"), item.get("delivery", {}).get("content"))
    return sum(len(p) for p in parts if isinstance(p, msgspec.Raw))
