"""Typed helpers for the common ops, so that a caller rarely writes an op name
or an args dict (docs/agents.md "The Python client", whose table lists them).
A helper checks only what it needs to choose the op and its fields (which id
prefix, exactly one of text/content/memory); the daemon decides the rest."""

from __future__ import annotations

from typing import Any, Iterable

from .core import Connection, Result


class Helpers(Connection):
    """One method per common op; each builds the args and calls ``act`` or ``read``."""

    async def register(self, name: str, *, key: str | None = None, **content: Any) -> Result:
        """``agent.register``: ``{agent, key}`` (the key is shown once)."""
        return await self.act("agent.register", {"content": {"name": name, **content}}, key=key)

    async def whoami(self) -> Result:
        return await self.read("agent.whoami")

    async def turn(self, *, limit: int = 50, cursor: str | None = None) -> Result:
        """One page of the turn: ``{items, cursor}``. :meth:`items` ("turn")
        walks every page."""
        return await self.read("turn", _args(limit=limit, cursor=cursor))

    async def opportunities(self, *, limit: int = 50, cursor: str | None = None) -> Result:
        return await self.read("opportunities", _args(limit=limit, cursor=cursor))

    async def create_thread(self, title: str | None = None, *, content: dict | None = None, key: str | None = None) -> Result:
        """``thread.create``; ``title`` is shorthand for ``content={"title": title}``."""
        if title is not None:
            content = {**(content or {}), "title": title}
        return await self.act("thread.create", _args(content=content), key=key)

    async def admit(self, thread: str, role: str = "speaker", *, key: str | None = None) -> Result:
        return await self.act("thread.admit", {"thread": thread, "role": role}, key=key)

    async def join(self, token: str, *, key: str | None = None) -> Result:
        return await self.act("thread.join", {"token": token}, key=key)

    async def post(
        self,
        thread: str,
        text: str | None = None,
        *,
        content: dict | None = None,
        memory: str | dict | None = None,
        reply_to: int | None = None,
        ask: Iterable[str] | None = None,
        task: str | None = None,
        assign: dict | None = None,
        key: str | None = None,
    ) -> Result:
        """``thread.post`` with exactly one of ``text`` (content ``{text}``),
        ``content`` or ``memory`` (an id, or ``{memory, version}``). ``ask=[]``
        asks nobody: use it to end an exchange (a reply without ``ask`` asks the
        author it answers)."""
        pin = _pin("post", text, content, memory)
        args = _args(thread=thread, reply_to=reply_to, task=task, assign=assign, **pin)
        if ask is not None:
            args["ask"] = list(ask)
        return await self.act("thread.post", args, key=key)

    async def handle(self, thread: str, entry: int, note: str | None = None, *, key: str | None = None) -> Result:
        """``thread.handle``: end a request to respond without replying."""
        content = {"note": note} if note is not None else None
        return await self.act("thread.handle", _args(thread=thread, entry=entry, content=content), key=key)

    async def take(
        self, ref: str, text: str | None = None, *, content: dict | None = None, memory: str | dict | None = None,
        key: str | None = None,
    ) -> Result:
        """Take an assignment (``as_…``) or a Task (``tk_…``); with ``text``,
        ``content`` or ``memory``, deliver in the same action."""
        op, field = _by_prefix(ref, {"as_": ("assignment.take", "assignment"), "tk_": ("task.take", "task")}, "take")
        args: dict[str, Any] = {field: ref}
        if (text, content, memory) != (None, None, None):
            args["deliver"] = _pin("take", text, content, memory)
        return await self.act(op, args, key=key)

    async def deliver(
        self, ref: str, text: str | None = None, *, content: dict | None = None, memory: str | dict | None = None,
        key: str | None = None,
    ) -> Result:
        """Deliver on an assignment (``as_…``) or an engagement (``en_…``):
        exactly one of ``text`` (content ``{text}``), ``content`` or ``memory``."""
        op, field = _by_prefix(
            ref, {"as_": ("assignment.deliver", "assignment"), "en_": ("task.deliver", "engagement")}, "deliver"
        )
        return await self.act(op, {field: ref, **_pin("deliver", text, content, memory)}, key=key)

    async def judge(self, ref: str, verdict: str, reason: str | None = None, *, key: str | None = None) -> Result:
        """Adopt or reject the delivery of an assignment (``as_…``) or an
        engagement (``en_…``); a rejection needs a ``reason``."""
        if verdict not in ("adopt", "reject"):
            raise ValueError(f"verdict must be 'adopt' or 'reject', not {verdict!r}")
        if verdict == "reject" and not reason:
            raise ValueError("a rejection needs a reason")
        op, field = _by_prefix(ref, {"as_": ("assignment.judge", "assignment"), "en_": ("task.judge", "engagement")}, "judge")
        args: dict[str, Any] = {field: ref, "verdict": verdict}
        if reason is not None:
            args["content"] = {"reason": reason}
        return await self.act(op, args, key=key)

    async def get(self, ref: str) -> Result:
        """The working set of a Thread, assignment, Task, engagement or Memory, by its id."""
        op, field = _by_prefix(ref, _GETS, "get")
        return await self.read(op, {field: ref})


_GETS = {
    "th_": ("thread.get", "thread"),
    "as_": ("assignment.get", "assignment"),
    "tk_": ("task.get", "task"),
    "en_": ("engagement.get", "engagement"),
    "me_": ("memory.get", "memory"),
}
_KINDS = {"th_": "a Thread", "as_": "an assignment", "tk_": "a Task", "en_": "an engagement", "me_": "a Memory"}


def _by_prefix(ref: str, table: dict[str, tuple[str, str]], what: str) -> tuple[str, str]:
    if isinstance(ref, str) and ref[:3] in table:
        return table[ref[:3]]
    kinds = " or ".join(f"{_KINDS[p]} ({p}…)" for p in table)
    raise ValueError(f"{what} takes the id of {kinds}, not {str(ref)[:64]!r}")


def _args(**kw: Any) -> dict[str, Any]:
    return {k: v for k, v in kw.items() if v is not None}


def _pin(what: str, text: str | None, content: dict | None, memory: str | dict | None) -> dict[str, Any]:
    """Exactly one of text, content or memory, as wire fields."""
    given = [n for n, v in (("text", text), ("content", content), ("memory", memory)) if v is not None]
    if len(given) != 1:
        raise ValueError(f"{what} needs exactly one of text, content or memory (got {', '.join(given) or 'none'})")
    if text is not None:
        return {"content": {"text": text}}
    if content is not None:
        return {"content": content}
    return {"memory": {"memory": memory} if isinstance(memory, str) else memory}
