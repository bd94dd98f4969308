"""Scoped keys (WIRE.md 1.3 "Scoped keys"): a key that acts as its agent with
fewer ops. An agent's main key (from registration, ``agent.rotate_key``,
``admin.agent.reset_key``) keeps every right; a scoped key is one of ``read``
(every read), ``worker`` (reads and doing offered work) or ``a2a`` (the
``a2a.*`` ops). Every scope may call ``agent.whoami``. A scoped key only does
less than its agent: every op it may call is decided exactly as for the main
key (§9), so it never reads more.

The keys live in the agent's state (:class:`ScopedKey`, only their sha256 kept,
like the main key's): at most :data:`MAX_LIVE` live ones; a new main key or a
deactivation drops them all (:func:`kungfud.core.agent.apply`). An expired key
stays in the state until the next ``agent.key.create`` prunes it, but it
authenticates nothing from its expiry on (:func:`refusal`).
"""

from __future__ import annotations

import hashlib
from types import MappingProxyType
from typing import TYPE_CHECKING, Mapping

import msgspec

from ..conventions import SCOPES, Scope, allows
from ..errors import DecisionRefused, Hint, Rejection, rejects
from .timestamps import rfc3339
from .facts import Decision, Fact

if TYPE_CHECKING:
    from .agent import AgentState
    from .context import Ctx

__all__ = [
    "Scope", "SCOPES", "MAX_LIVE", "ScopedKey", "ScopedKeyCreated", "ScopedKeyRevoked", "CreateKey", "RevokeKey",
    "allows", "refusal", "live", "decide_create", "decide_revoke", "KEY_REVOKED", "key_list", "apply", "held_in",
]

MAX_LIVE = 20  # live scoped keys per agent; the next is `conflict`

# WIRE.md agent.rotate_key: "the old key stops working at once" (D185); a
# revoked or expired scoped key is refused the same way (WIRE.md 1.3).
KEY_REVOKED = Rejection(
    "unauthenticated",
    "the key this connection authenticated with was rotated or reset, or it was revoked or has expired; "
    "connect with a current key",
    "stop",
)


class ScopedKey(msgspec.Struct, frozen=True):
    key_id: str
    key_hash: bytes  # sha256 of the key; the key itself is never stored
    scope: Scope
    label: str
    created_at: int
    expires_at: int | None = None


class ScopedKeyCreated(Fact, frozen=True, tag="agent.scoped_key_created"):
    agent: str
    key: ScopedKey

    touches = ("agent",)


class ScopedKeyRevoked(Fact, frozen=True, tag="agent.scoped_key_revoked"):
    agent: str
    key_id: str

    touches = ("agent",)


class CreateKey(msgspec.Struct, frozen=True):
    scope: Scope
    label: str
    expires_in_s: int | None = None


class RevokeKey(msgspec.Struct, frozen=True):
    key_id: str


def expired(key: ScopedKey, now: int) -> bool:
    return key.expires_at is not None and key.expires_at <= now


def live(state: "AgentState", now: int) -> list[ScopedKey]:
    """The agent's scoped keys that still authenticate at ``now``."""
    return [k for k in state.scoped if not expired(k, now)]


def refusal(agent: str | None, held: tuple | None, now: int, op: str | None, kind: str = "A") -> Rejection | None:
    """Whether a request for ``op`` (None: just authenticated use) by ``agent``,
    sent on a connection whose key is ``held`` — (its agent, its scope or None
    for the main key, its expiry or None, …) or None when the key is no
    longer any agent's — is refused: :data:`KEY_REVOKED` for a key no longer
    ``agent``'s (rotated, reset, revoked, expired), ``forbidden`` for an op
    its scope does not allow."""
    if held is None or held[0] != agent or (held[2] is not None and held[2] <= now):
        return KEY_REVOKED
    scope = held[1]
    if scope is None or op is None or allows(scope, op, kind):
        return None
    what = {"read": "reads only", "worker": "reads and doing work offered to its agent", "a2a": "the a2a.* ops only"}
    return Rejection(
        "forbidden",
        f"this key has the {scope!r} scope ({what[scope]}, and agent.whoami), which does not allow {op}; "
        "send it with the agent's main key, or a scoped key whose scope allows it",
        "stop",
    )


def held_in(state: "AgentState | None", key_hash: bytes) -> tuple[str, Scope | None, int | None] | None:
    """What ``state``'s agent holds under ``key_hash``: as :func:`refusal`'s ``held``."""
    if state is None:
        return None
    if state.key_hash == key_hash:
        return (state.agent, None, None)
    for k in state.scoped:
        if k.key_hash == key_hash:
            return (state.agent, k.scope, k.expires_at)
    return None


def _caller(ctx: "Ctx") -> "AgentState | Rejection":
    if ctx.caller is None:
        return Rejection("unauthenticated", "this action needs an authenticated agent", "revise")
    if not ctx.caller.active:
        return Rejection.forbidden(f"agent {ctx.caller.agent} is deactivated and may not act")
    current = ctx.get(ctx.caller.agent)
    assert current is not None, "an authenticated caller's account exists"
    return current


@rejects
def decide_create(cmd: CreateKey, ctx: "Ctx") -> Decision | Rejection:
    """``agent.key.create``: a new scoped key of the caller's; the key is in
    the result once (B4), only its hash kept."""
    current = _caller(ctx)
    if isinstance(current, Rejection):
        raise DecisionRefused(current)
    if len(live(current, ctx.now)) >= MAX_LIVE:
        raise DecisionRefused(Rejection.conflict(
            f"this agent already has {MAX_LIVE} live scoped keys, the most it may hold; revoke one first",
            Hint("agent.key.list", {}),
        ))
    secret = ctx.new_secret()
    expires_at = None if cmd.expires_in_s is None else ctx.now + cmd.expires_in_s * 1000
    key = ScopedKey(ctx.new_id("ky_"), hashlib.sha256(secret.encode()).digest(), cmd.scope, cmd.label, ctx.now, expires_at)
    fact = ScopedKeyCreated(at=ctx.now, by=current.agent, agent=current.agent, key=key)
    result: dict = {"key_id": key.key_id, "key": secret, "scope": key.scope}
    if expires_at is not None:
        result["expires_at"] = rfc3339(expires_at)
    return Decision([fact], result, {current.agent: apply(current, fact)})


@rejects
def decide_revoke(cmd: RevokeKey, ctx: "Ctx") -> Decision | Rejection:
    """``agent.key.revoke``: a live scoped key of the caller's stops working
    at once (its connections are closed on every node)."""
    current = _caller(ctx)
    if isinstance(current, Rejection):
        raise DecisionRefused(current)
    if not any(k.key_id == cmd.key_id for k in live(current, ctx.now)):
        raise DecisionRefused(Rejection.not_found("live scoped key", cmd.key_id))
    fact = ScopedKeyRevoked(at=ctx.now, by=current.agent, agent=current.agent, key_id=cmd.key_id)
    return Decision([fact], {"key_id": cmd.key_id, "revoked": True}, {current.agent: apply(current, fact)})


def apply(state: "AgentState", fact: Fact) -> "AgentState":
    """The agent's state after one of this module's facts (the agent's
    :func:`~kungfud.core.agent.apply` hands them here)."""
    if isinstance(fact, ScopedKeyCreated):  # the expired ones are pruned as a new one comes
        kept = tuple(k for k in state.scoped if k.expires_at is None or k.expires_at > fact.at)
        return msgspec.structs.replace(state, scoped=(*kept, fact.key))
    if isinstance(fact, ScopedKeyRevoked):
        return msgspec.structs.replace(state, scoped=tuple(k for k in state.scoped if k.key_id != fact.key_id))
    raise TypeError(f"scoped keys cannot apply {type(fact).__name__}")


def key_list(state: "AgentState | None", now: int, used: Mapping[str, int] = MappingProxyType({})) -> dict:
    """``agent.key.list``: the live scoped keys, oldest first, never a key;
    ``used``: key id -> when a request last came with it (ms; in memory, as
    an agent's last sighting, D319)."""
    items = []
    for k in live(state, now) if state is not None else []:
        item: dict = {"key_id": k.key_id, "scope": k.scope, "label": k.label, "created_at": rfc3339(k.created_at)}
        if k.expires_at is not None:
            item["expires_at"] = rfc3339(k.expires_at)
        if k.key_id in used:
            item["last_used_at"] = rfc3339(used[k.key_id])
        items.append(item)
    return {"items": items}
