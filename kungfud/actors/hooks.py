"""What the webhook delivery runner (kungfud/webhooks/) asks of the store, in
one place: the agents with an endpoint, an agent's registration and cursor,
its events after a seq, and writing cursors (WIRE.md 1.2, D212). Every call
blocks (a read or write transaction); the runner makes them off the event loop."""

from __future__ import annotations

from typing import Any

from ..core.a2a import a2a_obj
from ..core.a2a_push import push_obj
from ..core.webhook import WebhookState, webhook_agent, webhook_obj
from ..store.hooks import Cursor, put_cursors

__all__ = ["Hooks", "Cursor", "split_registrations"]


def split_registrations(names: list[str]) -> tuple[list[str], list[str]]:
    """Another node's wake-up names agents with new events and, by the names of
    their registrations (``ag_….webhook``), agents whose webhook registration it
    wrote (D272): (those agents, the other names)."""
    hooked: list[str] = []
    rest: list[str] = []
    for name in names:
        agent = webhook_agent(name)
        if agent is None:
            rest.append(name)
        else:
            hooked.append(agent)
    return hooked, rest


class Hooks:
    def __init__(self, runtime: Any):
        self.rt = runtime
        self.store = runtime.store

    def agents(self) -> tuple[list[str], list[str]]:
        """The agents with an endpoint, and those of them that have something
        to deliver: an event after their cursor (idle endpoints cost a sweep
        one small read each, and no task)."""
        with self.store.read() as view:
            hooked = list(view.hooked_agents())
        out = []
        for agent in hooked:
            reg, cursor = self.state(agent)
            if reg is None or reg.url is None or (cursor is not None and cursor.disabled_at):
                continue
            after = reg.since if cursor is None else cursor.delivered
            page, _, reached = self.events_after(agent, after, 1, reg.events)
            if page or reached > after:  # rows passed over: the runner moves the cursor past them (D331)
                out.append(agent)
        return hooked, out

    def state(self, agent: str) -> tuple[WebhookState | None, Cursor | None]:
        """``agent``'s registration (None or url None: no endpoint) and its
        cursor for that registration (None: nothing recorded yet), from one view."""
        with self.store.read() as view:
            reg = view.state(webhook_obj(agent))
            cursor = view.hook_cursor(agent)
        if reg is not None and cursor is not None and cursor.hook != reg.hook:
            cursor = None
        return reg, cursor

    def events_after(
        self, agent: str, after: int, limit: int, kinds: tuple[str, ...]
    ) -> tuple[list[tuple[int, bytes]], int | None, int]:
        """THE read of "``agent``'s events after seq ``after``" for delivery
        and for the sweep (one function, so the events a webhook hears are
        chosen here; ``kinds``: the kinds its endpoint asked for — the runner
        passes over the others), when the first of them was recorded (ms;
        None: no events), and the seq the read reached: rows of the open-Task
        stream not offered to ``agent`` up to it were read and passed over, so
        the runner's cursor moves past them (D331)."""
        _top, page, _more, reached = self.rt.events_page(agent, after, limit, open_tasks="task_offered" in kinds)
        if not page:
            return page, None, reached
        with self.store.read() as view:
            fact = view.fact_at_or_before(page[0][0])
        return page, getattr(fact, "at", None), reached

    def push_tasks(self) -> list[tuple[str, str]]:
        """(author, task) of every A2A Task with a push config (WIRE.md 1.3)."""
        with self.store.read() as view:
            return list(view.push_tasks())

    def push_state(self, task: str, cursor_key: Any) -> tuple[Any, Any, dict[str, Cursor | None]]:
        """A Task's push configs, its A2A marker, and each config's cursor
        (``cursor_key(task, config)`` names its row), from one view."""
        with self.store.read() as view:
            push = view.state(push_obj(task))
            marker = view.state(a2a_obj(task))
            cursors = {c.id: view.hook_cursor(cursor_key(task, c.id)) for c in (push.configs if push else [])}
        return push, marker, cursors

    def write(self, cursors: dict[str, Cursor]) -> None:
        """Several agents' cursors, durable when this returns."""
        w = self.store.begin_write()
        try:
            put_cursors(w.tx, cursors)
        except BaseException:
            w.abort()
            raise
        w.commit()
