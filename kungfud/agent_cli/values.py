"""Parsed arguments → the values of a request: content from ``--content``,
``--text`` or ``--file`` (the one read a command line does), Memory
references, pins, entry references, ids pasted from a printed ref, page
arguments. Shared by every command group."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from .exits import UsageError

__all__ = [
    "json_object", "read_text", "content_of", "need_content", "memory_ref", "pin_of", "entry_ref", "pasted_id",
    "by_prefix", "page_args", "put",
]


def json_object(text: str, where: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"{where}: not valid JSON ({e})") from None
    if not isinstance(value, dict):
        raise UsageError(f"{where}: expected a JSON object, got {type(value).__name__}")
    return value


def read_text(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).expanduser().read_text()
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror or e}") from None


def content_of(ns: argparse.Namespace) -> dict | None:
    """The content object from ``--content JSON``, ``--text TEXT`` or ``--file PATH|-``."""
    if getattr(ns, "content", None) is not None:
        return json_object(read_text("-") if ns.content == "-" else ns.content, "--content")
    if getattr(ns, "text", None) is not None:
        return {"text": ns.text}
    if getattr(ns, "file", None) is not None:
        return json_object(read_text(ns.file), f"--file {ns.file}")
    return None


def need_content(ns, what: str) -> dict:
    content = content_of(ns)
    if content is None:
        raise UsageError(f"{what} needs content: --content JSON, --text TEXT or --file PATH|-")
    return content


def memory_ref(text: str) -> dict:
    """``me_…`` or ``me_…@VERSION`` → a WIRE.md Memory reference."""
    ident, at, version = text.partition("@")
    if not at:
        return {"memory": ident}
    try:
        n = int(version)
    except ValueError:
        raise UsageError(f"{text!r}: expected MEMORY or MEMORY@VERSION") from None
    return {"memory": ident, "version": n}


def pin_of(ns: argparse.Namespace) -> dict:
    """``{memory}`` or ``{content}`` for ops that pin (post, deliver, take)."""
    if getattr(ns, "memory", None) is not None:
        return {"memory": memory_ref(ns.memory)}
    content = content_of(ns)
    return {} if content is None else {"content": content}


def entry_ref(thread: str, entry: int | None) -> tuple[str, int]:
    """``THREAD ENTRY`` or ``THREAD#ENTRY`` (as ``kungfu turn`` prints it)."""
    if entry is None and "#" in thread:
        thread, _, n = thread.partition("#")
        try:
            entry = int(n)
        except ValueError:
            raise UsageError(f"{thread}#{n}: expected THREAD#ENTRY") from None
    if entry is None:
        raise UsageError("name the entry: THREAD ENTRY or THREAD#ENTRY")
    return thread, entry


_REF = re.compile(r"(?:th_[0-9a-z_]+/(?P<a>as_[0-9a-z_]+))|(?:tk_[0-9a-z_]+/(?P<e>en_[0-9a-z_]+))")


def pasted_id(ident: str) -> str:
    """An id as a command takes it, also from a ref as lists print it
    (`th_…/as_…`, `tk_…/en_…`), so every printed ref pastes into the next command."""
    m = _REF.fullmatch(ident)
    return (m.group("a") or m.group("e")) if m else ident


def by_prefix(ident: str, choices: dict[str, str], what: str) -> str:
    for prefix, op in choices.items():
        if ident.startswith(prefix):
            return op
    kinds = " or ".join(f"{p}…" for p in choices)
    raise UsageError(f"{ident!r} is not {what}: expected an id starting with {kinds}")


def page_args(ns: argparse.Namespace, args: dict | None = None) -> dict:
    args = dict(args or {})
    if ns.cursor is not None:
        args["cursor"] = ns.cursor
    if ns.limit is not None:
        args["limit"] = ns.limit
    return args


def put(args: dict, name: str, value: Any) -> dict:
    if value is not None:
        args[name] = value
    return args
