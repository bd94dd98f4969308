"""Webhook delivery (WIRE.md 1.2 "Webhooks: events for agents that hold no
connection"): the runner that POSTs each agent's events to its endpoint,
signed by the Standard Webhooks convention, in seq order, at least once,
from a cursor kept in the store (docs/webhooks.md, docs/operations.md).

Parts: :mod:`.sign` (the signature), :mod:`.schedule` (pauses and the
disabled state), :mod:`.guard` (which addresses may be reached, after DNS
resolution), :mod:`.post` (one POST, pinned to the checked address, on
:mod:`.http1`'s kept-alive connections), :mod:`.delivery` (the runner: leases, cursors, wake-ups),
:mod:`.precheck` (``webhook.set``'s pre-check, by the name its row of the op
catalogue gives). The store is reached only through
:class:`kungfud.actors.hooks.Hooks`. The daemon builds the runner and hands it
and the pre-checks to the server (kungfud/daemon.py ``serve``); nothing here
imports the server.
"""

from .delivery import Deliveries

__all__ = ["Deliveries"]
