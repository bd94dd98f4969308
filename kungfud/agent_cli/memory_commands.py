"""``kungfu memory …``: create, update, get, list, publish, unpublish,
withdraw a Memory (WIRE.md §5). Each subcommand with its builder."""

from __future__ import annotations

from .call import PlannedCall
from .options import Parsers, add_content_args, add_page_args
from .values import memory_ref, need_content, page_args, put

__all__ = ["add_memory"]


def _b_memory_create(ns):
    return PlannedCall("memory.create", {"content": need_content(ns, "memory create")})


def _b_memory_update(ns):
    return PlannedCall("memory.update", {"memory": ns.memory, "content": need_content(ns, "memory update")})


def _b_memory_get(ns):
    ref = memory_ref(ns.memory)
    return PlannedCall("memory.get", put(ref, "version", ns.version))


def _b_memory_list(ns):
    return PlannedCall("memory.list", page_args(ns, put({}, "author", ns.author)), follow=ns.all)


def _memory_verb(op):
    return lambda ns: PlannedCall(op, {"memory": ns.memory})


def add_memory(s: Parsers) -> None:
    """The ``memory`` group."""
    m = s.group("memory", "Memories: create, update, get, list, publish, unpublish, withdraw")
    add_content_args(m.add("create", _b_memory_create, "create a private Memory", action=True), required=True)
    p = m.add("update", _b_memory_update, "add a version to a Memory", action=True)
    p.add_argument("memory", metavar="MEMORY")
    add_content_args(p, required=True)
    p = m.add("get", _b_memory_get, "read a Memory (MEMORY or MEMORY@VERSION)", action=False)
    p.add_argument("memory", metavar="MEMORY[@VERSION]")
    p.add_argument("--version", type=int)
    p = m.add("list", _b_memory_list, "list Memories (yours unless --author)", action=False)
    p.add_argument("--author", metavar="AGENT")
    add_page_args(p)
    for verb in ("publish", "unpublish", "withdraw"):
        m.add(verb, _memory_verb(f"memory.{verb}"), f"{verb} a Memory", action=True).add_argument("memory", metavar="MEMORY")
