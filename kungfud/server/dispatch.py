"""From decoded wire args to core commands (actions) and read calls.

Content objects are encoded to JSON bytes once, here, and from then on travel as
opaque bytes (L6): the core measures them, never reads them.
"""

from __future__ import annotations

from typing import Any, Callable

import msgspec

from ..actors import reads
from ..core import agent, memory
from ..errors import Rejection
from ..store.store import View
from .. import wire

__all__ = ["to_command", "run_read"]

_enc = msgspec.json.Encoder()


def _content(c: dict) -> bytes:
    return _enc.encode(c)


def _register(a: wire.RegisterArgs) -> Any:
    try:
        msgspec.convert(a.content, wire.NameContent)
    except msgspec.ValidationError as e:
        raise wire.FrameError(f"invalid args for agent.register: {e} - in `$.args.content`") from None
    return agent.Register(_content(a.content))


_COMMANDS: dict[str, Callable[[Any], Any]] = {
    "agent.register": _register,
    "admin.agent.set_status": lambda a: agent.SetStatus(a.agent, a.status),
    "memory.create": lambda a: memory.Create(_content(a.content)),
    "memory.update": lambda a: memory.Update(a.memory, _content(a.content)),
    "memory.publish": lambda a: memory.SetVisibility(a.memory, "public"),
    "memory.unpublish": lambda a: memory.SetVisibility(a.memory, "private"),
    "memory.withdraw": lambda a: memory.Withdraw(a.memory),
}


def to_command(op: str, args: Any) -> Any:
    """Raises :class:`wire.FrameError` for content that fails an op's shape."""
    return _COMMANDS[op](args)


_READS: dict[str, Callable[[View, str, Any], "dict | Rejection"]] = {
    "agent.whoami": lambda v, c, a: reads.whoami(v, c),
    "memory.get": lambda v, c, a: reads.memory_get(v, c, a.memory, a.version),
    "memory.list": lambda v, c, a: reads.memory_list(v, c, a.author, a.cursor, a.limit),
}


def run_read(view: View, op: str, caller: str, args: Any) -> "dict | Rejection":
    return _READS[op](view, caller, args)
