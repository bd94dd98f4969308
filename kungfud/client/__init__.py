"""Async client for kungfud; the whole client is in :mod:`kungfud.client.core`
for now (this step only moves it into a package, the split follows)."""

from .core import *  # noqa: F401,F403
from .core import DEFAULT, LOST, __all__  # noqa: F401
