"""Names beside ids (WIRE.md 1.2): a person reads ``by="alice"``, not
``by=ag_01m9…``. Without ``--ids`` (and without ``--json``), the agents a read
shows are written by name where the caller may read it: the members of the
Threads the result refers to (``thread.get``'s ``members`` carry
``content: {name}``) and the caller itself (``agent.whoami``). An agent whose
name the caller cannot read (a Task's author outside any shared Thread) stays
an id.

A name is participant text (L6): it is printed as a JSON string (``"alice"``,
quotes and escapes included), never bare, so it cannot pass for an id or a
protocol field; an invisible or control character in it is written as its
``\\uXXXX`` escape. Two agents whose names look alike — one name, or one
confusable skeleton (UTS #39: ``"alice"`` and ``"аlice"`` with a Cyrillic а;
kungfud/wire/names.py) — are both written ``"alice"(ag_…)``.

Cost: one ``agent.whoami`` and one ``thread.get`` per Thread the result refers
to, at most :data:`MAX_THREADS`, on the connection the read used; ``watch``
reads a Thread's members once (:class:`EventNames`).
"""

from __future__ import annotations

import json
from typing import Any

from ..wire.names import confusable, invisible

__all__ = ["NAMED_READS", "AGENT_FIELDS", "AGENT_LISTS", "MAX_THREADS", "resolve", "label", "with_names"]

#: Reads whose human output names agents by name (``--ids``: by id).
NAMED_READS = frozenset(
    {"thread.get", "thread.entries", "thread.entry", "thread.assignments", "assignment.get", "outcomes", "opportunities", "task.list",
     "task.get", "engagement.get", "memory.list", "memory.get"}
)
#: Fields that hold one agent id; lists of agent ids.
AGENT_FIELDS = frozenset({"agent", "author", "by", "creator", "to", "taker", "judge", "from"})
AGENT_LISTS = frozenset({"ask", "responders"})
MAX_THREADS = 10


def _threads(obj: Any, out: list[str]) -> None:
    """The Thread ids a result refers to, in order, outside content (L6)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == "content":
                continue
            if k == "thread" and isinstance(v, str) and v.startswith("th_") and v not in out:
                out.append(v)
            else:
                _threads(v, out)
    elif isinstance(obj, list):
        for x in obj:
            _threads(x, out)


def _members(thread_get: Any) -> dict[str, str]:
    names: dict[str, str] = {}
    if isinstance(thread_get, dict):
        for m in thread_get.get("members") or []:
            name = (m.get("content") or {}).get("name") if isinstance(m, dict) else None
            if isinstance(name, str) and name and isinstance(m.get("agent"), str):
                names[m["agent"]] = name
    return names


async def resolve(request: Any, op: str, result: Any, args: dict | None = None) -> dict[str, str]:
    """Agent id -> name for the agents of ``result`` (of a read sent with
    ``args``: ``thread.entries`` names its Thread only there), by the reads above.
    ``request(op, args)`` sends a read and returns its reply. A read that fails
    names nobody (the ids are shown): names are a courtesy, never a failure."""
    names: dict[str, str] = {}
    who = await request("agent.whoami", {})
    if who.get("ok"):
        r = who["result"]
        name = (r.get("content") or {}).get("name")
        if isinstance(name, str) and name:
            names[r["agent"]] = name
    threads: list[str] = []
    _threads(args or {}, threads)
    _threads(result, threads)
    if op == "thread.get":
        names.update(_members(result))
        threads = threads[1:]
    for th in threads[:MAX_THREADS]:
        got = await request("thread.get", {"thread": th})
        if got.get("ok"):
            names.update(_members(got["result"]))
    return names


def shown(name: str) -> str:
    """A name as a JSON string, its invisible and control characters escaped."""
    return "".join(_escape(c) for c in json.dumps(name, ensure_ascii=False))


def _escape(c: str) -> str:
    if not invisible(c):
        return c
    if ord(c) <= 0xFFFF:
        return f"\\u{ord(c):04x}"
    high, low = divmod(ord(c) - 0x10000, 0x400)  # JSON's surrogate pair
    return f"\\u{0xD800 + high:04x}\\u{0xDC00 + low:04x}"


def label(agent: Any, names: dict[str, str], twice: set[str]) -> Any:
    """How an agent is written: its name as a JSON string, with its id when
    its name looks like another shown agent's (``twice``: those agents); its
    id when its name is unknown."""
    if not isinstance(agent, str) or agent not in names:
        return agent
    name = shown(names[agent])
    return f"{name}({agent})" if agent in twice else name


def with_names(obj: Any, names: dict[str, str]) -> Any:
    """``obj`` with the agents in :data:`AGENT_FIELDS` / :data:`AGENT_LISTS`
    written by :func:`label`; content objects untouched (L6). A Thread's
    members keep their ids beside their names: that is where a person finds
    the id to ask or assign with."""
    if not names:
        return obj
    twice = confusable(names)

    def walk(o: Any, key: str = "") -> Any:
        if isinstance(o, dict):
            out: dict[str, Any] = {}
            for k, v in o.items():
                if k == "content":
                    out[k] = v
                elif k in AGENT_FIELDS and isinstance(v, str):
                    out[k] = label(v, names, twice)
                elif k in AGENT_LISTS and isinstance(v, list):
                    out[k] = [label(x, names, twice) for x in v]
                elif k == "members" and isinstance(v, list):
                    out[k] = [_member(m) for m in v]
                else:
                    out[k] = walk(v, k)
            return out
        if isinstance(o, list):
            return [walk(x, key) for x in o]
        return o

    def _member(m: Any) -> Any:
        if not isinstance(m, dict) or not isinstance(m.get("agent"), str):
            return m
        rest = {k: v for k, v in m.items() if k not in ("agent", "content")}
        name = shown(names[m["agent"]]) if m["agent"] in names else "-"
        return {"name": name, "agent": m["agent"], **rest}

    return walk(obj)


def _agents(obj: Any, out: set[str]) -> None:
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == "content":
                continue
            if k in AGENT_FIELDS and isinstance(v, str):
                out.add(v)
            elif k in AGENT_LISTS and isinstance(v, list):
                out.update(x for x in v if isinstance(x, str))
            else:
                _agents(v, out)
    elif isinstance(obj, list):
        for x in obj:
            _agents(x, out)


class EventNames:
    """Names for ``kungfu watch``: events carry ids, so the names of a Thread's
    members are read (``thread.get``, on a second connection opened when first
    needed) the first time an event refers to that Thread, and again when an
    event names an agent not known yet. A read that fails leaves the ids."""

    def __init__(self, url: str, key: str):
        self.url, self.key = url, key
        self.client: Any = None
        self.names: dict[str, str] = {}
        self.read: set[str] = set()

    async def _request(self, op: str, args: dict) -> dict:
        import asyncio

        from ..client import Client

        if self.client is None:
            self.client = await Client.connect(self.url, self.key)
        return await asyncio.wait_for(self.client.request(op, args), 10)

    async def named(self, msg: dict) -> dict:
        data = msg.get("data")
        try:
            if self.client is None:
                self.names.update(await resolve(self._request, "", {}))
            threads: list[str] = []
            _threads(data, threads)
            shown: set[str] = set()
            _agents(data, shown)
            unknown = bool(shown - set(self.names))
            for th in threads[:MAX_THREADS]:
                if th not in self.read or unknown:
                    self.read.add(th)
                    got = await self._request("thread.get", {"thread": th})
                    if got.get("ok"):
                        self.names.update(_members(got["result"]))
        except Exception:  # names are a courtesy: the event is printed with ids
            pass
        return {**msg, "data": with_names(data, self.names)}

    async def close(self) -> None:
        if self.client is not None:
            await self.client.close()
