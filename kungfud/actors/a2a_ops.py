"""The A2A ops' wire args → core commands (WIRE.md 1.3 "A2A"), for the
op catalogue's executable half (:data:`kungfud.actors.ops.ACTIONS`).

Here the A2A message is read once: its parts checked (each exactly one of
``text``, ``raw``, ``url``, ``data``; a ``url`` is stored, never fetched), its
text parts joined into the contract's criteria (or a rejection's reason),
``metadata[E]`` read for deadlines and a verdict, the judging mode taken from
``E in message.extensions``. What the core then carries is opaque JSON bytes.
"""

from __future__ import annotations

from typing import Any

import msgspec

from .. import wire
from ..core import a2a, a2a_card, a2a_push
from ..core.a2a_view import E

__all__ = ["card_set", "send", "cancel", "push_set", "push_clear", "push_url"]

_enc = msgspec.json.Encoder()
_KINDS = ("text", "raw", "url", "data")
_MAX_WITHIN = 31_536_000


def card_set(a: wire.A2ACardSetArgs) -> a2a_card.SetCard:
    return a2a_card.SetCard(_enc.encode(a.content), None if a.accept == "any" else list(a.accept.agents))


def _bad(reason: str) -> wire.FrameError:
    return wire.FrameError(f"invalid args for a2a.send: {reason}")


def _within(meta: dict, name: str) -> int | None:
    v = meta.get(name)
    if v is None:
        return None
    if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= _MAX_WITHIN:
        raise _bad(f"metadata[{E}].{name} must be a whole number of seconds from 1 to {_MAX_WITHIN}")
    return v


def _push(configuration: dict | None) -> a2a_push.SetPush | None:
    """``configuration.taskPushNotificationConfig`` (flat, or holding
    ``pushNotificationConfig`` as older clients nest it), as ``a2a.push.set``
    would take it; the Task is filled in when it is made."""
    if not configuration:
        return None
    pc = configuration.get("taskPushNotificationConfig") or configuration.get("pushNotificationConfig")
    if pc is None:
        return None
    if isinstance(pc, dict) and isinstance(pc.get("pushNotificationConfig"), dict):
        pc = pc["pushNotificationConfig"]
    try:
        c = msgspec.convert(
            {k: v for k, v in pc.items() if k in ("id", "url", "token", "authentication")}, wire.A2APushConfig
        )
    except (msgspec.ValidationError, AttributeError) as e:
        raise _bad(f"configuration.taskPushNotificationConfig: {e}") from None
    auth = c.authentication
    return a2a_push.SetPush("", c.id, c.url, c.token, auth.scheme if auth else None, auth.credentials if auth else None)


def send(a: wire.A2ASendArgs) -> a2a.Send:
    m = a.message
    texts: list[str] = []
    for n, part in enumerate(m.parts):
        kinds = [k for k in _KINDS if k in part]
        if len(kinds) != 1:
            raise _bad(f"message.parts[{n}] must hold exactly one of text, raw, url, data")
        if kinds[0] in ("text", "raw", "url") and not isinstance(part[kinds[0]], str):
            raise _bad(f"message.parts[{n}].{kinds[0]} must be a string")
        if kinds[0] == "text":
            texts.append(part["text"])
    meta = (m.metadata or {}).get(E) or {}
    if not isinstance(meta, dict):
        raise _bad(f"message.metadata[{E}] must be an object")
    verdict = meta.get("verdict")
    if verdict is not None and not isinstance(verdict, str):
        raise _bad(f'metadata[{E}].verdict must be "adopt" or "reject"')
    text = "\n".join(texts)
    content = {"criteria": text, "a2a": {"parts": m.parts, "reference_tasks": m.reference_task_ids}}
    return a2a.Send(
        to=a.to,
        message=_enc.encode(m),
        role=m.role,
        contract_content=_enc.encode(content),
        client_judges=E in m.extensions,
        task=m.task_id,
        context=m.context_id,
        verdict=verdict,
        reason=_enc.encode({"reason": text}) if text.strip() else None,
        deliver_within_s=_within(meta, "deliver_within_s"),
        judge_within_s=_within(meta, "judge_within_s"),
        push=_push(a.configuration) if m.task_id is None else None,
    )


def cancel(a: wire.A2ATaskRefArgs) -> a2a.Cancel:
    return a2a.Cancel(a.task, a.to)


def push_set(a: wire.A2APushSetArgs) -> a2a_push.SetPush:
    c = a.config
    auth = c.authentication
    return a2a_push.SetPush(
        a.task, c.id, c.url, c.token, auth.scheme if auth else None, auth.credentials if auth else None, a.to
    )


def push_clear(a: wire.A2APushClearArgs) -> a2a_push.ClearPush:
    return a2a_push.ClearPush(a.task, a.config, a.to)


def push_url(a: Any) -> str | None:
    """The push config URL that ``a2a.send`` (its ``configuration``) or
    ``a2a.push.set`` sets; None when it sets none. The args were already
    turned into a command, so a malformed configuration never gets here."""
    if isinstance(a, wire.A2APushSetArgs):
        return a.config.url
    push = _push(a.configuration) if isinstance(a, wire.A2ASendArgs) else None
    return None if push is None else push.url


def routed_task(cmd: Any) -> str | None:
    """The Task an A2A action names (None: a new one)."""
    return getattr(cmd, "task", None)
