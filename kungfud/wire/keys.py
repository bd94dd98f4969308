"""The args of the scoped-key ops (WIRE.md 1.3 "Scoped keys"): ``agent.key.create``,
``agent.key.list`` and ``agent.key.revoke``. A scoped key acts as its agent
with fewer ops; which ops each scope allows is :mod:`kungfud.core.keys`."""

from __future__ import annotations

from typing import Annotated

import msgspec

from ..conventions import Scope
from .fields import Args

__all__ = ["KeyScope", "KeyId", "KeyCreateArgs", "KeyListArgs", "KeyRevokeArgs"]

KeyScope = Scope  # one definition (conventions.py), shared with the core and the MCP bridge
KeyId = Annotated[str, msgspec.Meta(pattern=r"^ky_[0-9a-z_]{1,60}$(?!\n)")]
# Up to ten years: an expiry a client can reach is always a time the store can hold.
ExpiresInS = Annotated[int, msgspec.Meta(ge=1, le=315_360_000)]


class KeyCreateArgs(Args, frozen=True):
    scope: KeyScope
    label: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
    expires_in_s: ExpiresInS | None = None


class KeyListArgs(Args, frozen=True):
    pass


class KeyRevokeArgs(Args, frozen=True):
    key_id: KeyId
