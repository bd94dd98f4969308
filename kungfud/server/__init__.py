"""The asyncio websockets front end: transport and admission policy only. It
authenticates, decodes frames, enforces frame and rate limits, and hands each
action to :meth:`kungfud.actors.Runtime` (which builds, routes and decides it)
and each read to ``Runtime.read``; it never decides protocol questions and
imports nothing from the core or the store (tests/test_layers.py).

Parts: :mod:`.app` (the front door), :mod:`.connection`, :mod:`.feed`,
:mod:`.limits`, :mod:`.bridge`, :mod:`.metrics`, :mod:`.audit`, :mod:`.console`,
:mod:`.upgrade`, :mod:`.revocation`.
"""

from .app import Server

__all__ = ["Server"]
