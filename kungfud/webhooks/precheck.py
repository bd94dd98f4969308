"""The pre-checks this package answers for the op catalogue (D286): an
action whose row in :data:`kungfud.actors.ops.ACTIONS` names a ``precheck``
is admitted, then awaits the check of that name on the event loop before it
is routed (unless the check finds nothing to look up in its args); a refusal is answered unless a receipt answers first. The daemon
binds them to the operator's ``[webhooks] allow_hosts`` and hands them to the
server (kungfud/daemon.py ``serve``), which knows them only by name.

- ``public_host`` (``webhook.set``, D216): the URL's host resolved, refused
  when it may not be reached (:func:`.guard.set_refusal`).
- ``push_host`` (``a2a.push.set``, and ``a2a.send`` with a push config in its
  ``configuration``; WIRE.md 1.3 "the same URL rules checked at set and at
  each delivery", D411): the push config's URL, checked the same way.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable

from ..actors.a2a_ops import push_url
from ..errors import Rejection
from .guard import set_refusal

__all__ = ["prechecks", "Precheck"]

#: The check of one request's args: None when there is nothing to check (no
#: I/O, routed at once), else what to await: a refusal, or None.
Precheck = Callable[[Any], "Awaitable[Rejection | None] | None"]


def prechecks(allow: tuple[str, ...]) -> dict[str, Precheck]:
    """Every pre-check by the name the catalogue gives it, bound to ``allow``
    (the runner's allow list, so a set and a delivery check alike)."""

    async def refusal(url: str) -> Rejection | None:
        reason = await set_refusal(url, allow)
        return None if reason is None else Rejection("bad_request", reason, "revise")

    def public_host(args: Any) -> Awaitable[Rejection | None]:
        return refusal(args.url)

    def push_host(args: Any) -> Awaitable[Rejection | None] | None:
        url = push_url(args)  # an a2a.send without a push config: nothing to resolve
        return None if url is None else refusal(url)

    return {"public_host": public_host, "push_host": push_host}
