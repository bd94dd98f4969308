"""What the A2A end-to-end tests share: a published worker over /v1 (kungfud.client),
the STOCK a2a-sdk client (pinned in the test extra) as an A2A caller would
build it, and a worker that takes and delivers."""

from __future__ import annotations

import asyncio
import uuid
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, AsyncIterator

import httpx
from a2a.client import A2ACardResolver, ClientConfig, create_client
from a2a.types import Message, Part, Role, SendMessageRequest

from kungfud.a2a.card import EXTENSION
from tests.e2e.helpers import agent_client

CARD_TAIL = "/.well-known/agent-card.json"


async def published(url: str, name: str = "worker") -> tuple[Any, str, str]:
    """A worker agent over /v1 that published a card: (its client, id, A2A base URL)."""
    c, agent = await agent_client(url, name)
    got = await c.act("a2a.card.set", {"content": {"name": name, "description": "does the work it is given"}})
    assert got["card_url"].endswith(CARD_TAIL), got
    return c, agent, got["card_url"][: -len(CARD_TAIL)]


async def stock(base: str, key: str, *, judges: bool = False, streaming: bool = True, via: str | None = None):
    """The stock client for the agent at ``base`` (its card resolved from there),
    Bearer ``key``, with httpx's default 5 s timeout as a stock client has it;
    (client, its httpx client). ``via``: another node's A2A endpoint, which the
    card's interfaces are pointed at (the same paths)."""
    headers = {"Authorization": f"Bearer {key}"}
    if judges:
        headers["A2A-Extensions"] = EXTENSION
    http = httpx.AsyncClient(headers=headers)
    card = await A2ACardResolver(http, base).get_agent_card()
    if via is not None:
        for i in card.supported_interfaces:
            i.url = via + i.url[i.url.index("/a2a/agents/"):]
    return await create_client(card, ClientConfig(httpx_client=http, streaming=streaming)), http


@dataclass
class Stock:
    """One A2A conversation's parties: the published worker over /v1, the
    caller agent over /v1, and the caller's stock client (and its httpx client)."""

    worker: Any
    agent: str  # the worker's id
    base: str  # its A2A base URL
    caller: Any
    client: Any
    http: httpx.AsyncClient


@asynccontextmanager
async def stock_session(d: Any, caller: str = "caller", **client_kw: Any) -> AsyncIterator[Stock]:
    """A published worker, a caller and its stock client (``client_kw`` as
    :func:`stock` takes them) on daemon ``d``; all closed at the end."""
    worker, agent, base = await published(d.url)
    c, _ = await agent_client(d.url, caller)
    client, http = await stock(base, c.key, **client_kw)
    try:
        yield Stock(worker, agent, base, c, client, http)
    finally:
        await client.close()
        await http.aclose()
        await worker.close()
        await c.close()


def request(text: str = "Summarise the attached notes in three lines", message_id: str | None = None, *,
            task_id: str | None = None, metadata: dict | None = None, return_immediately: bool = False) -> SendMessageRequest:
    m = Message(message_id=message_id or str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)] if text else [])
    if task_id:
        m.task_id = task_id
    if metadata:
        m.metadata.update(metadata)
    req = SendMessageRequest(message=m)
    if return_immediately:
        req.configuration.return_immediately = True
    return req


def state_of(ev: Any) -> str | None:
    """The A2A state a StreamResponse shows (its name, e.g. TASK_STATE_WORKING)."""
    from a2a.types import TaskState

    if ev.HasField("task"):
        return TaskState.Name(ev.task.status.state)
    if ev.HasField("status_update"):
        return TaskState.Name(ev.status_update.status.state)
    return None


def task_id_of(ev: Any) -> str:
    return ev.task.id if ev.HasField("task") else ev.status_update.task_id or ev.artifact_update.task_id


async def take_and_deliver(worker: Any, task: str, text: str = "three lines", *, silent_s: float = 0.0) -> str:
    """The worker takes ``task`` over /v1 and delivers (after ``silent_s`` of quiet); the engagement id."""
    took = await worker.act("task.take", {"task": task})
    if silent_s:
        await asyncio.sleep(silent_s)
    await worker.act("task.deliver", {"engagement": took["engagement"], "content": {"text": text}})
    return took["engagement"]
