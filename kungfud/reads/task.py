"""Task and engagement reads (§8 working sets, §9 Task rows).

R9-13/R9-14: the contract layer (every version) is readable by anyone for an
open Task, by the author, named agents and judges for a restricted one; anyone
else gets ``not_found`` worded as for a missing id. R9-15: bound inputs are
readable by the engaged agent and the judge. R9-16: engagements, deliveries and
judgments by the author, the engaged agent and the judge. R9-17/T3: adopted
content by the contract's declared readers. A reference from a Thread grants
nothing (R7.5-5, B22).
"""

from __future__ import annotations

from itertools import islice
from typing import Any

import msgspec

from ..core.timestamps import rfc3339
from ..core.engagement import EngagementState, closed_to_takes, effective, is_party, take_refusal
from ..core.task_facts import contract_obj
from ..core.shapes import contract_view, delivery, held_obligations, judgment
from ..core.task import ContractState, TaskState, may_read_contract
from ..errors import Rejection
from ..store.view import View
from .thread import READ_PAGE_BYTES

__all__ = ["task_get", "task_list", "engagement_get", "takes_engagements"]

MAX_LISTED = 100  # engagements / adoptions shown in a working set
# Content one working set embeds is bounded like a page of `thread.entries {full}`
# (D29, the same budget): past it the list stops (after at least one item) with a
# cursor to continue (D69).
CONTENT_BUDGET = READ_PAGE_BYTES



def _answers(view: View) -> Any:
    """``Ctx.query`` over ``view``: the answers of a named query, without their sources."""
    return lambda name, key, limit=None, party=None: [a for a, _ in view.query(name, key, limit, party)]

def _engagement_brief(e: EngagementState, state: str) -> dict[str, Any]:
    return {"engagement": e.engagement, "agent": e.agent, "contract_version": e.contract_version, "state": state}


def _obligations(e: EngagementState, me: str, state: str, now: int) -> list[dict[str, Any]]:
    # Only while no deadline decided it (``state`` is the effective one, L4-3).
    return held_obligations(e.engagement, e, me, now) if state == e.state else []


def _may_take(view: View, t: TaskState, me: str) -> bool:
    """The core's rule for taking (audience, author, judge, eligibility) against
    the latest contract version — the version a take would bind."""
    latest: ContractState = view.state(contract_obj(t.task, t.latest))
    return take_refusal(t, latest, me) is None


def takes_engagements(view: View, t: TaskState) -> bool:
    """WIRE.md 1.1 "Offers that can be taken": the test that refuses a take
    (paused, author deactivated, adoption limit reached), applied to the offers."""
    author = view.state(t.author)
    return closed_to_takes(t, author is not None and author.active) is None


def task_get(
    view: View, me: str, task_id: str, version: int | None, now: int, adopted_after: str | None = None
) -> dict | Rejection:
    t: TaskState | None = view.state(task_id)
    if t is None or not may_read_contract(t, me):
        return Rejection.not_found("task", task_id)
    v = t.latest if version is None else version
    if not 1 <= v <= t.latest:
        return Rejection.not_found("task", f"{task_id} contract version {v}")
    c: ContractState = view.state(contract_obj(task_id, v))
    out: dict[str, Any] = {
        "task": task_id,
        "author": t.author,
        "audience": "open" if t.audience is None else {"agents": t.audience},
        "accepting": t.accepting,
        "contract_version": t.latest,
        "contract": contract_view(c),
        "adoptions": t.adoptions,
        "adoption_limit": t.limit,
        "created_at": rfc3339(t.created_at),
    }
    # The caller's own engagements (R9-16); the author and judges see the newest
    # of every engagement of the Task.
    if me == t.author or me in t.judges:
        ids = view.engagements_of(task_id, newest=True, limit=MAX_LISTED)
    else:
        ids = view.engagements_of(task_id, me, limit=MAX_LISTED)
    parties = [e for e in (view.state(i) for i in ids) if is_party(e, me)]
    states = {e.engagement: effective(e, now, t, view.state, _answers(view)) for e in parties}
    out["engagements"] = [_engagement_brief(e, states[e.engagement]) for e in parties]
    if me == t.author:
        # R9-16, R12-9: a count of engagements is about engagements; only the
        # author is a party to every one it counts (D42).
        out["engagement_count"] = t.engagements
    out["obligations"] = [ob for e in parties for ob in _obligations(e, me, states[e.engagement], now)]
    # R9-17, T3: adopted content for the declared readers.
    # Paged by count and by size (D69): the list stops after MAX_LISTED items or
    # CONTENT_BUDGET bytes of content, and `adopted_cursor` (the last item shown)
    # continues it with `adopted_after`.
    adopted = []
    budget = CONTENT_BUDGET
    more = False
    for en in view.adopted(task_id, adopted_after):
        if len(adopted) >= MAX_LISTED or budget <= 0:
            more = True
            break
        e: EngagementState = view.state(en)
        if (e.readers == "public" or is_party(e, me)) and e.pin_memory and e.pin_version:
            item: dict[str, Any] = {"engagement": e.engagement, "pin": {"memory": e.pin_memory, "version": e.pin_version}}
            content = view.memory_content(e.pin_memory, e.pin_version)
            if content is not None:
                item["content"] = msgspec.Raw(content)
                budget -= len(content)
            adopted.append(item)
    out["adopted"] = adopted
    if more and adopted:
        out["adopted_cursor"] = adopted[-1]["engagement"]
    actions = []
    if me == t.author:
        actions += ["task.revise", "task.resume" if not t.accepting else "task.pause"]
    elif not view.query("live", task_id, 1, party=me) and takes_engagements(view, t) and _may_take(view, t, me):
        actions.append("task.take")
    out["actions"] = actions
    return out


def task_list(view: View, me: str, cursor: str | None, limit: int, mine: bool) -> dict | Rejection:
    # `cursor` is a Task id, its format checked at the wire (TaskCursor, D52).
    # The first limit + 1 say whether there is more (R8-13: a page reads no further).
    candidates = list(islice(view.tasks_for(me, mine, cursor), limit + 1))
    items: list[dict[str, Any]] = []
    more = len(candidates) > limit
    for tk in candidates[:limit]:
        t: TaskState = view.state(tk)
        if not mine and not _may_take(view, t, me):
            continue  # not a Task the caller may take
        if not mine and not takes_engagements(view, t):
            continue  # WIRE.md 1.1: it takes no new engagement now
        items.append(
            {
                "task": tk,
                "author": t.author,
                "audience": "open" if t.audience is None else "restricted",
                "accepting": t.accepting,
                "contract_version": t.latest,
                "adoptions": t.adoptions,
                "adoption_limit": t.limit,
            }
        )
    return {"items": items, "cursor": candidates[limit - 1] if more else None}


def engagement_get(view: View, me: str, en: str, now: int, inputs_after: int = 0) -> dict | Rejection:
    e: EngagementState | None = view.state(en)
    if e is None or not is_party(e, me):
        return Rejection.not_found("engagement", en)
    t: TaskState = view.state(e.task)
    state = effective(e, now, t, view.state, _answers(view))
    out: dict[str, Any] = {
        "engagement": en,
        "task": e.task,
        "agent": e.agent,
        "author": e.author,
        "judge": e.judge,
        "contract_version": e.contract_version,
        "state": state,
        "taken_at": rfc3339(e.taken_at),
        "deliver_by": rfc3339(e.deliver_by),
        "on_no_judgment": e.on_no_judgment,
        "readers": e.readers,
    }
    if e.judge_by is not None:
        out["judge_by"] = rfc3339(e.judge_by)
    # WIRE.md 1.1: the bound contract version (R9-13: its parties always read it).
    bound: ContractState = view.state(contract_obj(e.task, e.contract_version))
    out["contract"] = {
        "version": bound.version,
        "content": msgspec.Raw(bound.contract.content),
        "deliver_within_s": bound.contract.deliver_within_s,
        "judge_within_s": bound.contract.judge_within_s,
    }
    if e.delivered_at is not None and e.pin_memory is not None and e.pin_version is not None:
        out["delivery"] = delivery(e.delivered_at, e.pin_memory, e.pin_version, view.memory_content(e.pin_memory, e.pin_version))
    # R9-15: the bound input versions, even after the author withdrew them. Every
    # input is listed; content is given for those after `inputs_after` until
    # CONTENT_BUDGET (less the contract's and the delivery's content) is spent
    # (at least one), and `inputs_cursor` says how many
    # inputs have had their content so far when more remain (D69).
    inputs: list[dict[str, Any]] = []
    budget = CONTENT_BUDGET - len(bound.contract.content) - len(out.get("delivery", {}).get("content", b""))
    given = inputs_after
    for n, (m, v) in enumerate(e.inputs, 1):
        item: dict[str, Any] = {"memory": m, "version": v}
        if n > inputs_after and (budget > 0 or given == inputs_after):  # at least one per page
            content = view.memory_content(m, v)
            item["content"] = _raw(content)
            budget -= len(content) if content is not None else 0
            given = n
        inputs.append(item)
    out["inputs"] = inputs
    if given < len(e.inputs):
        out["inputs_cursor"] = given
    if e.judged_at is not None:
        out["judgment"] = judgment(e.state, e.judged_at, e.reason)
    if e.ended_at is not None:
        out["ended_at"] = rfc3339(e.ended_at)
    out["obligations"] = _obligations(e, me, state, now)
    return out


def _raw(b: bytes | None) -> Any:
    return None if b is None else msgspec.Raw(b)
