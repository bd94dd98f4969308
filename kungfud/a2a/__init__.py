"""The A2A endpoint (WIRE.md 1.3 "A2A"): Agent2Agent 1.0 over JSON-RPC and
HTTP+JSON with SSE streams, for every agent that published a card, served in
the daemon's own processes on its own event loop. Each A2A call is one op run
as the calling agent through the same front door as a ``/v1`` frame
(:meth:`kungfud.server.Server.call`).

:mod:`.serve` (the ASGI server), :mod:`.app` (paths, key, version, routing),
:mod:`.methods` (each method as its op), :mod:`.streams` (SSE and blocking
answers), :mod:`.card`, :mod:`.errors`, :mod:`.ops` (what it needs of the daemon).

Nothing is imported here: the websocket daemon and its supervisor import
:func:`.card.a2a_url` without the ``a2a`` extra installed.
"""
