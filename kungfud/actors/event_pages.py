"""An agent's event feed as the server, the webhook runner and the A2A
endpoint page through it (WIRE.md 1.2): one page after a seq from one view,
several agents' pages at once, the newest seq; a page bounded by the
open-stream rows it passes over (D331). :class:`EventPages` is that part of
:class:`~.runtime.Runtime` (a mixin: ``self`` is the runtime)."""

from __future__ import annotations

from typing import Any, Mapping

__all__ = ["EventPages", "page", "PASS_LIMIT"]

# Open-stream rows not offered to the reader that one page of its feed reads
# at most (D331; reviews/security.md round 4 finding 2: ~100k restricted offers
# held the loop 775 ms per subscribe). The page then ends at the seq reached.
PASS_LIMIT = 512


class EventPages:
    """The event feed's reads, on :class:`~.runtime.Runtime` (its ``store``)."""

    store: Any

    def last_seq(self) -> int:
        """The newest event seq (WIRE.md 1.2: one daemon-wide sequence)."""
        with self.store.read() as view:
            return view.last_event_seq()

    def events_page(
        self, agent: str, after: int, limit: int, *, open_tasks: bool = False
    ) -> tuple[int, list[tuple[int, bytes]], bool, int]:
        """(newest event seq, up to ``limit`` of ``agent``'s events after seq
        ``after`` as (seq, event JSON without seq), whether more may follow,
        the seq read up to) from one view. Every event has its own seq, so
        continuing after the seq read up to resumes exactly. ``open_tasks``:
        the open-Task stream's ``task_offered`` events offered to ``agent``
        merged in, in seq order (WIRE.md 1.2 "Open Tasks, announced"); a page
        passes over at most ``PASS_LIMIT`` offers not meant for ``agent``
        (D331: its work is bounded by what it returns)."""
        with self.store.read() as view:
            return view.last_event_seq(), *page(view, agent, after, limit, open_tasks)

    def events_after(
        self, floors: Mapping[tuple[str, bool], int], limit: int
    ) -> tuple[int, dict[tuple[str, bool], tuple[list[tuple[int, bytes]], bool, int]]]:
        """Several pages (as :meth:`events_page`), keyed ``(agent,
        open_tasks)``, each after its own seq, and the newest event seq, from
        one view: the feed's live delivery when other nodes commit too (or for
        open-Task subscribers). The view holds every event seq up to the
        newest (event seqs are allocated in commit order under the writer
        exclusion)."""
        with self.store.read() as view:
            return view.last_event_seq(), {
                key: page(view, key[0], after, limit, key[1]) for key, after in floors.items()
            }


def page(
    view: Any, agent: str, after: int, limit: int, open_tasks: bool = False
) -> tuple[list[tuple[int, bytes]], bool, int]:
    """(events, whether more may follow, the seq read up to): at most
    ``limit`` events and ``PASS_LIMIT`` open-stream rows passed over (D331).
    The feed is in seq order and every event has its own seq, so every row at
    or below the seq read up to was read: the next page starts after it."""
    feed = view.feed(agent, after, open_tasks, passed=True)
    page: list[tuple[int, bytes]] = []
    more = False
    reached = after
    passed = 0
    try:
        for seq, event in feed:
            if len(page) >= limit or passed >= PASS_LIMIT:
                more = True
                break
            reached = seq
            if event is None:
                passed += 1
            else:
                page.append((seq, event))
    finally:
        feed.close()  # its cursors, before the read transaction ends
    return page, more, reached
