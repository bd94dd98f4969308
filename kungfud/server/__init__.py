"""The asyncio websockets front end. It authenticates, decodes frames, enforces
frame and rate limits, routes actions to actors and reads to the store, and sends
replies. It never decides protocol questions."""

from .app import Server

__all__ = ["Server"]
