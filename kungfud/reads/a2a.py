"""A2A reads (WIRE.md 1.3 "A2A"): ``a2a.card.get``, ``a2a.task``,
``a2a.tasks``, ``a2a.push.list``.

Only the Tasks the caller created through A2A are seen; anything else —
another's Task, a Task made over ``/v1``, an id that names nothing — is
``not_found`` with the same bytes (R12-9). What is shown is
:func:`kungfud.core.a2a_view.render` over the Task's facts as of ``now``.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from ..core import a2a_card
from ..core.a2a import A2ATaskState, a2a_obj
from ..core.a2a_push import PushState, push_obj, shown
from ..core.a2a_view import TERMINAL, Seen, render
from ..core.engagement import LIFECYCLE, EngagementState, effective
from ..core.task import TaskState
from ..errors import Rejection
from ..store.view import View

__all__ = ["card_get", "task_get", "task_list", "push_list", "position"]

_TASK_ID = re.compile(r"tk_[0-9a-z_]{1,60}")
MAX_ENGAGEMENTS = 100  # engagements shown of one Task (the newest)
SCANNED = 1000  # Tasks a page of a2a.tasks looks through at most (the caller's, newest first)


def _answers(view: View) -> Any:
    return lambda name, key, limit=None, party=None: [a for a, _ in view.query(name, key, limit, party)]


def card_get(view: View, me: str, agent: str | None, base: str) -> dict | Rejection:
    """The caller's card, or another's while it is published; one answer for
    an agent without a card and one that does not exist."""
    who = agent or me
    card: a2a_card.CardState | None = view.state(a2a_card.card_obj(who))
    agent_state = view.state(who) if who.startswith("ag_") and "." not in who else None
    if not a2a_card.published(card) or agent_state is None or not agent_state.active:
        # A deactivated agent is served nothing: it looks like one without a card.
        return a2a_card.no_card(who)
    assert card is not None and card.content is not None
    return {
        "agent": who,
        "content": msgspec.Raw(card.content),
        "accept": "any" if card.accept is None else {"agents": card.accept},
        "card_url": a2a_card.card_url(base, who),
    }


def _mine(view: View, me: str, task: str, to: str | None) -> A2ATaskState | None:
    a: A2ATaskState | None = view.state(a2a_obj(task)) if _TASK_ID.fullmatch(task) else None
    if a is None or a.author != me or (to is not None and a.to != to):
        return None
    return a


def _seen(view: View, t: TaskState, now: int) -> list[Seen]:
    out = []
    for en in view.engagements_of(t.task, newest=True, limit=MAX_ENGAGEMENTS):
        e: EngagementState = view.state(en)
        state = effective(e, now, t, view.state, _answers(view))
        ended = e.ended_at
        if ended is None and state != e.state:  # a deadline ended it (L4-3)
            ended = LIFECYCLE.due(e)
        content = view.memory_content(e.pin_memory, e.pin_version) if e.pin_memory and e.pin_version else None
        out.append(Seen(en, state, e.taken_at, e.deliver_by, e.delivered_at, e.judge_by, ended, content))
    return out


def _render(view: View, a: A2ATaskState, now: int, history_length: int | None) -> dict:
    t: TaskState = view.state(a.task)
    seen = _seen(view, t, now)
    adopted = t.adoptions > 0 or any(e.state == "adopted" for e in seen)
    return render(
        a.task, a.context, a.created_at, a.messages, seen, a.client_judges, a.canceled_at, adopted, history_length,
        a.generation,
    )


def task_get(view: View, me: str, task: str, history_length: int | None, now: int, to: str | None = None) -> dict | Rejection:
    a = _mine(view, me, task, to)
    if a is None:
        return Rejection.not_found("task", task)
    return _render(view, a, now, history_length)


def task_list(
    view: View, me: str, to: str | None, context: str | None, state: str | None, cursor: str | None, limit: int,
    now: int,
) -> dict | Rejection:
    """The caller's A2A Tasks, newest change first (the ``a2a_changed`` index,
    D410), filtered; ``cursor`` is the position of the last Task the previous
    page looked at, ``<change ms>.<task>`` ("" at the end)."""
    items: list[dict] = []
    last = None
    more = False
    for n, (changed, tk) in enumerate(view.a2a_changed(me, position(cursor))):
        if n >= SCANNED:  # looked far enough for one page: go on from here next time
            more = True
            break
        a = _mine(view, me, tk, to)
        task = None if a is None or (context is not None and a.context != context) else _render(view, a, now, None)
        if task is None or (state is not None and task["status"]["state"] != state):
            last = (changed, tk)
            continue
        if len(items) == limit:
            more = True
            break
        items.append(task)
        last = (changed, tk)
    return {"items": items, "cursor": f"{last[0]}.{last[1]}" if more and last else ""}


def position(cursor: str | None) -> tuple[int, str] | None:
    """The ``(change ms, task)`` an ``a2a.tasks`` cursor names (its shape is
    checked by the args type)."""
    if not cursor:
        return None
    changed, _, task = cursor.partition(".")
    return int(changed), task


def push_list(view: View, me: str, task: str, to: str | None, now: int) -> dict | Rejection:
    a = _mine(view, me, task, to)
    if a is None:
        return Rejection.not_found("task", task)
    p: PushState | None = view.state(push_obj(task))
    if p is None or _render(view, a, now, 0)["status"]["state"] in TERMINAL:
        return {"items": []}  # a config ends with its Task
    return {"items": [shown(c) for c in p.configs]}
