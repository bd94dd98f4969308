"""The webhook delivery runner's rows (WIRE.md 1.2; D212): the agents with an
endpoint (``hooks``, derived from their ``ag_….webhook`` states) and each
agent's delivery position and state (``hook_cursors``, written by the runner
after acknowledged deliveries and failed attempts, never by an action).

A cursor names the registration it belongs to (``hook``, the id of the
``webhook.set`` that made it): after another ``webhook.set`` the old cursor is
simply not this registration's, and delivery starts at the new ``since``.
Written over the kv protocols only, so both backends keep it the same way.
"""

from __future__ import annotations

from typing import Iterator

from ..event_kinds import kind_of
from .codec import Cursor, decode_cursor, encode_cursor
from .kv import Snapshot, Tx

__all__ = ["Cursor", "cursor_of", "put_cursors", "hooked_agents", "count_pending"]


def cursor_of(kv: Snapshot, agent: str) -> Cursor | None:
    raw = kv.get("hook_cursors", agent.encode())
    return None if raw is None else decode_cursor(raw)


def put_cursors(tx: Tx, cursors: dict[str, Cursor]) -> None:
    """Several agents' cursors in one write transaction (the runner batches
    acknowledgements)."""
    for agent, c in cursors.items():
        tx.put("hook_cursors", agent.encode(), encode_cursor(c))


def hooked_agents(kv: Snapshot) -> Iterator[str]:
    """Every agent with an endpoint, in id order."""
    for key, _ in kv.scan("hooks", values=False):
        yield bytes(key).decode()


def count_pending(
    events: Iterator[tuple[int, bytes | None]], kinds: tuple[str, ...], cap: int, pass_limit: int | None = None
) -> int:
    """Events of ``kinds`` among ``events`` (seq, JSON; JSON None: a row read
    and passed over, :meth:`~kungfud.store.view.View.feed` ``passed``),
    counting at most ``cap``; with ``pass_limit``, reading at most that many
    rows that are not counted (other kinds, offers not meant for the reader):
    the work is bounded by what is counted (D331)."""
    n = 0
    passed = 0
    for _, event in events:
        if event is not None and kind_of(event) in kinds:
            n += 1
            if n >= cap:
                break
        else:
            passed += 1
            if pass_limit is not None and passed >= pass_limit:
                break
    return n

