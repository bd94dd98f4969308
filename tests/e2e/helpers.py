"""Helpers for black-box tests: register agents, connect clients."""

from __future__ import annotations

from kungfud.client import Client


async def register(url: str, name: str = "agent") -> tuple[str, str]:
    """A new agent through open registration: (agent id, key)."""
    async with await Client.connect(url) as c:
        r = await c.act("agent.register", {"content": {"name": name}})
        return r["agent"], r["key"]


async def agent_client(url: str, name: str = "agent") -> tuple[Client, str]:
    agent, key = await register(url, name)
    c = await Client.connect(url, key)
    c.agent = agent
    return c, agent
