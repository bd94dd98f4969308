"""Async client for kungfud: one websocket connection, pipelined requests.

    async with Client.connect(url, key) as c:
        thread = (await c.create_thread(title="design review"))["thread"]
        await c.post(thread, "ready for review?", ask=[bob])
        for item in (await c.turn())["items"]:
            ...

Every result is a :class:`Result` (a dict) whose ``replayed`` tells whether it
is the first receipt of its idempotency key returned again. Actions get an
idempotency key automatically; after a lost connection, a timeout or a
rejection with ``next: "retry"`` the call is sent again with the **same** key
(``retries`` times, default 3), so it is done at most once (L3, docs/agents.md).
Reads are retried the same way (they change nothing). Rejections raise
:class:`Rejected` with ``code``, ``reason``, ``next``, ``hint``.

Also: typed helpers for the common ops (:meth:`Client.turn`, :meth:`Client.post`,
:meth:`Client.take`, :meth:`Client.deliver`, :meth:`Client.judge`, …), a page
iterator (:meth:`Client.items`), and a subscription that resumes with ``since``
after a reconnect (:meth:`Client.subscribe`). ``async with await
Client.connect(...)`` and ``c = await Client.connect(...)`` work as before.

The package, along its seams: ``core`` (the connection, requests, keys and
retries), ``helpers`` (the typed helpers), ``pages`` (paged reads),
``subscription`` (the resumed event stream). Import everything from here.
"""

from __future__ import annotations

# DEFAULT, LOST and Connection: module-level names of the one-module client, still importable from here.
from .core import DEFAULT, LOST, Connection, Rejected, Response, Result, new_key  # noqa: F401
from .helpers import Helpers
from .pages import Pages
from .subscription import Subscribing, Subscription

__all__ = ["Client", "Rejected", "Response", "Result", "Subscription", "new_key"]


class Client(Helpers, Pages, Subscribing):
    """The whole client: the connection and its retrying calls (``act``,
    ``read``, ``call``, ``request``, ``send_raw``, ``events``), the typed
    helpers, paging (``pages``, ``items``) and ``subscribe``."""

