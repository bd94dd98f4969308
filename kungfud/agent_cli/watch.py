"""``kungfu watch``: subscribe and print events, resuming after the last one
printed (``--state-file``) and after a lost connection (``since``)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .feed import EventFeed, read_state, write_state
from .profiles import ClientSettings
from .names import EventNames
from .render import Out, render_event

__all__ = ["run_watch"]


async def run_watch(st: ClientSettings, ns: argparse.Namespace, out: Out) -> int:
    """``subscribe {since}`` and print events. The seq of each event is saved
    after it is printed, so a restart resumes after the last one printed: no
    gap, and at most the last event twice if killed between the two. A lost
    connection is resubscribed with ``since`` (:class:`EventFeed`). Without
    ``--ids``/``--json``, agents are written by name (:class:`~.names.EventNames`)."""
    state = Path(ns.state_file).expanduser() if ns.state_file else None
    since = ns.since if ns.since is not None else read_state(state)
    feed = EventFeed(st, since, out, name="watch", open_tasks=ns.open_tasks, on_start=lambda seq: write_state(state, seq))
    names = None if out.as_json or out.ids else EventNames(st.url, st.key)
    seen = 0
    try:
        while ns.count is None or seen < ns.count:
            msg = await feed.next(ns.timeout)
            if msg is None:
                return 0  # --timeout: quiet for that long
            if out.as_json:
                print(json.dumps(msg, ensure_ascii=False), flush=True)
            else:
                shown = await names.named(msg) if names is not None else msg
                print("\n".join(render_event(shown)), flush=True)
            write_state(state, msg["seq"])
            seen += 1
        return 0
    finally:
        await feed.close()
        if names is not None:
            await names.close()
