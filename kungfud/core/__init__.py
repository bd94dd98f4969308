"""The pure protocol core: no threads, no I/O, no clock reads, no storage.

Each concept module (``agent``, ``memory`` …) holds its ``State``, the facts that
change it, ``decide_*`` functions (command + context → :class:`Decision` or
:class:`~kungfud.errors.Rejection`) and ``apply`` (state + fact → state). Time and
fresh identifiers come in through :class:`~kungfud.core.context.Ctx`.

:mod:`kungfud.core.kinds`, the one table of object kinds, sits above every concept
module; importing it here gives :mod:`kungfud.core.decision` its fold before any
decision is made, whichever core module is imported first.
"""

from . import kinds as kinds

__all__: list[str] = []
