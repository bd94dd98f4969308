"""What the key a request came with may do (D185; WIRE.md 1.3 "Scoped keys"),
in a read's view: a key no longer its agent's is refused, and a scoped key's
scope bounds its ops. The runtime asks these for reads, replays and
``subscribe``; the actor asks the core (:func:`kungfud.core.agent.key_revoked`)
for actions, from the caller's state."""

from __future__ import annotations

from typing import Any

from ..core import keys
from ..errors import Rejection
from ..reads import READS

__all__ = ["key_refusal", "KEY_READS"]


def key_refusal(view: Any, agent: str | None, key_hash: bytes | None, now: int, op: str, kind: str) -> Rejection | None:
    """D185 and WIRE.md 1.3 in a read's view: whether a request for ``op`` sent
    with the key of hash ``key_hash`` (None: not checked) is refused — a key
    no longer ``agent``'s (rotated, reset, revoked, expired), or a scoped key
    whose scope does not allow ``op``. One index get, no decode of a state."""
    if key_hash is None:
        return None
    return keys.refusal(agent, view.key_holder(key_hash), now, op, kind)


def _whoami(view: Any, caller: str, key_hash: bytes | None, now: int) -> "dict | Rejection":
    """``agent.whoami``, and for a scoped key its ``scope`` (how a client such as
    the MCP bridge learns which ops it may offer)."""
    result = READS["agent.whoami"](view, caller, None, now, {})
    held = view.key_holder(key_hash) if key_hash is not None else None
    if isinstance(result, dict) and held is not None and held[1] is not None:
        result["scope"] = held[1]
    return result


KEY_READS = {"agent.whoami": _whoami}
