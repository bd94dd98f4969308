"""The push notification configs of an A2A Task (WIRE.md 1.3 "A2A": Push
notifications): at most ``[a2a] push_configs_per_task``, set and cleared by the
Task's author, kept in the sub-object ``tk_….push``. A URL passes the webhook
rules (:func:`kungfud.core.webhook.url_refusal`) at set, and again at each
delivery. Credentials and tokens are kept to send, never shown back
(:func:`shown`). The decisions are :func:`kungfud.core.a2a.decide_push_set`
and ``decide_push_clear``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from ..errors import DecisionRefused, Rejection
from .facts import Fact
from .webhook import url_refusal

if TYPE_CHECKING:
    from .context import Ctx

__all__ = [
    "PushConfig", "PushState", "PushSet", "PushCleared", "SetPush", "ClearPush", "push_obj", "is_push_obj",
    "shown", "configured", "set_result", "apply",
]

_SUB = ".push"


def push_obj(task: str) -> str:
    return task + _SUB


def is_push_obj(obj: str) -> bool:
    return obj.startswith("tk_") and obj.endswith(_SUB)


class PushConfig(msgspec.Struct, frozen=True):
    id: str
    url: str
    token: str | None = None
    scheme: str | None = None
    credentials: str | None = None
    set_at: int = 0
    since: int = 0  # the event feed's newest seq when set: deliveries are of the author's later events


class PushSet(Fact, frozen=True, tag="a2a.push_set"):
    task: str
    config: PushConfig

    def objects(self) -> tuple[str, ...]:
        return (push_obj(self.task),)


class PushCleared(Fact, frozen=True, tag="a2a.push_cleared"):
    task: str
    id: str

    def objects(self) -> tuple[str, ...]:
        return (push_obj(self.task),)


class PushState(msgspec.Struct, frozen=True):
    task: str
    configs: list[PushConfig] = []
    author: str = ""


class SetPush(msgspec.Struct, frozen=True):
    task: str
    id: str | None
    url: str
    token: str | None = None
    scheme: str | None = None
    credentials: str | None = None
    to: str | None = None


class ClearPush(msgspec.Struct, frozen=True):
    task: str
    id: str
    to: str | None = None


def shown(c: PushConfig) -> dict[str, Any]:
    """A config as results show it: never its credentials (nor its token,
    which the receipt nulls anyway)."""
    out: dict[str, Any] = {"id": c.id, "url": c.url}
    if c.scheme is not None:
        out["authentication"] = {"scheme": c.scheme}
    return out


def configured(cmd: SetPush, ctx: "Ctx", me: str) -> PushSet:
    """The fact that sets ``cmd``'s config on its Task (the author acting),
    or :class:`~kungfud.errors.DecisionRefused`: a URL the webhook rules refuse, or
    one config more than ``[a2a] push_configs_per_task``."""
    reason = url_refusal(cmd.url, ctx.limits.webhook_allow_hosts)
    if reason is not None:
        raise DecisionRefused(Rejection("bad_request", reason + " (in `config.url`)", "revise"))
    before: PushState | None = ctx.get(push_obj(cmd.task))
    configs = before.configs if before is not None else []
    replaced = cmd.id is not None and any(c.id == cmd.id for c in configs)
    if not replaced and len(configs) >= ctx.limits.a2a_push_configs_per_task:
        raise DecisionRefused(Rejection.conflict(
            f"task {cmd.task} has {len(configs)} push configs, the most it may have; clear one first"
        ))
    config = PushConfig(
        cmd.id or ctx.new_id("pc_"), cmd.url, cmd.token, cmd.scheme, cmd.credentials, ctx.now, ctx.feed_seq()
    )
    return PushSet(at=ctx.now, by=me, task=cmd.task, config=config)


def set_result(fact: PushSet) -> dict[str, Any]:
    result = shown(fact.config)
    if fact.config.token is not None:
        result["token"] = fact.config.token
    return {"task": fact.task, "config": result}


def apply(state: PushState | None, fact: Fact) -> PushState:
    match fact:
        case PushSet(task=task, config=config):
            kept = [c for c in (state.configs if state else []) if c.id != config.id]
            return PushState(task, [*kept, config], fact.by or "")
        case PushCleared(task=task, id=id):
            return PushState(task, [c for c in (state.configs if state else []) if c.id != id], fact.by or "")
    raise TypeError(f"a2a push cannot apply {type(fact).__name__}")
