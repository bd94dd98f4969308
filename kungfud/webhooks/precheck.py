"""The pre-checks this package answers for the op catalogue (D286): an
action whose row in :data:`kungfud.actors.ops.ACTIONS` names a ``precheck``
is admitted, then awaits the check of that name on the event loop before it
is routed; a refusal is answered unless a receipt answers first. The daemon
binds them to the operator's ``[webhooks] allow_hosts`` and hands them to the
server (kungfud/daemon.py ``serve``), which knows them only by name.

- ``public_host`` (``webhook.set``, D216): the URL's host resolved, refused
  when it may not be reached (:func:`.guard.set_refusal`).
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable

from ..errors import Rejection
from .guard import set_refusal

__all__ = ["prechecks", "Precheck"]

Precheck = Callable[[Any], Awaitable["Rejection | None"]]


def prechecks(allow: tuple[str, ...]) -> dict[str, Precheck]:
    """Every pre-check by the name the catalogue gives it, bound to ``allow``
    (the runner's allow list, so a set and a delivery check alike)."""

    async def public_host(args: Any) -> Rejection | None:
        reason = await set_refusal(args.url, allow)
        return None if reason is None else Rejection("bad_request", reason, "revise")

    return {"public_host": public_host}
