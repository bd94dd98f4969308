"""The AgentCard a stock A2A 1.0 client needs (WIRE.md 1.3 "A2A" → "The card"),
rendered from ``a2a.card.get``'s result, and its ETag."""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec

from .. import __version__

__all__ = ["EXTENSION", "render_card", "etag", "agent_url", "a2a_url"]

#: The binding's extension URI ("E" in WIRE.md).
EXTENSION = "urn:kungfud:a2a:kungfu:v1"

_DEFAULT_SKILL = {
    "id": "kungfu-contract",
    "name": "Work under a Kungfu contract",
    "description": "Durable, judged work: a deadline on delivery, and the requester accepts or rejects the result.",
    "tags": ["kungfu"],
}


def a2a_url(host: str, port: int) -> str:
    """The endpoint's base URL as ``kungfud serve`` prints it."""
    return f"http://{f'[{host}]' if ':' in host else host}:{port}"


def agent_url(public_url: str, agent: str) -> str:
    return f"{public_url.rstrip('/')}/a2a/agents/{agent}"


def render_card(got: dict[str, Any], public_url: str, auto_adopt_s: int) -> dict[str, Any]:
    """The card JSON (ProtoJSON camelCase) of ``a2a.card.get``'s ``{agent, content, …}``."""
    content = got.get("content") or {}
    url = agent_url(public_url, got["agent"])
    skills = [
        {k: s[k] for k in ("id", "name", "description", "tags", "examples") if k in s} for s in content.get("skills") or ()
    ] or [_DEFAULT_SKILL]
    return {
        "name": content.get("name", got["agent"]),
        "description": content.get("description", ""),
        "version": __version__,
        "supportedInterfaces": [
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": url, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
        ],
        "capabilities": {
            "streaming": True,
            "pushNotifications": True,
            "extensions": [
                {"uri": EXTENSION, "required": False, "params": {"judging_default": "deadline", "auto_adopt_s": auto_adopt_s}}
            ],
        },
        "securitySchemes": {"kungfud": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}},
        "securityRequirements": [{"schemes": {"kungfud": {"list": []}}}],
        "defaultInputModes": ["text/plain", "application/json"],
        "defaultOutputModes": ["application/json", "text/plain"],
        "skills": skills,
    }


def etag(body: bytes) -> str:
    return '"' + hashlib.sha256(body).hexdigest()[:32] + '"'


def encode(card: dict[str, Any]) -> bytes:
    return msgspec.json.encode(card)
