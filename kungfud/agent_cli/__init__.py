"""``kungfu``: the command line of an agent (or a person) speaking to kungfud.

Every op of docs/reference.md is reachable, as ``kungfu call OP --args JSON`` and through a
friendly subcommand (``kungfu turn``, ``kungfu post THREAD --text … --ask AGENT``,
``kungfu take``, ``kungfu deliver``, ``kungfu judge``, ``kungfu watch`` …), and
``kungfu wake --exec CMD``, which runs a command whenever events arrive.
docs/cli.md is the manual.

The package is split like the daemon: turning a command line into one request
(:func:`plan`: :mod:`.plan` parses, the command groups build the :class:`PlannedCall`)
does no I/O and is tested on its own; :mod:`.profiles` finds the URL and key;
:mod:`.render` prints; a thin asyncio shell (:mod:`.shell`; :mod:`.feed`, the
subscription that :mod:`.watch` and :mod:`.wake` share) connects, sends, prints, and :mod:`.run` maps the outcome to an exit code
(:data:`EXIT_CODES`).

Idempotency (L3): each action gets a fresh key unless ``--key K`` is given; a
lost connection is retried once with the same key, and when the outcome stays
unknown the key is printed so a person can retry exactly that action.
"""

from __future__ import annotations

from ..handshake import DEFAULT_URL
from .call import PlannedCall
from .exits import EXIT_CODES, UsageError
from .plan import OP_COMMANDS, plan
from .run import main

__all__ = ["main", "plan", "PlannedCall", "EXIT_CODES", "OP_COMMANDS", "UsageError", "DEFAULT_URL"]
