"""The parser's building blocks: the options every subcommand takes
(connection and output; ``--key`` for actions), the argument groups several
commands share (content, paging, ``--save-as``), and :class:`Parsers`, which
adds a subcommand carrying its builder."""

from __future__ import annotations

import argparse
from typing import Callable

from ..handshake import DEFAULT_URL

__all__ = [
    "READ_COMMON", "ACT_COMMON", "Parsers", "add_content_args", "add_page_args", "add_save_as_args", "duration",
]


def _common(action: bool) -> argparse.ArgumentParser:
    """Options every subcommand takes, anywhere on the line. SUPPRESS keeps a
    subcommand's parser from overwriting a value given before the subcommand."""
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("connection and output")
    g.add_argument("--url", default=argparse.SUPPRESS, help=f"daemon URL (env KUNGFU_URL; default {DEFAULT_URL})")
    g.add_argument("--profile", metavar="NAME", default=argparse.SUPPRESS, help="profile with url and key (env KUNGFU_PROFILE)")
    g.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print the exact result or error object as JSON")
    g.add_argument(
        "--ids", action="store_true", default=argparse.SUPPRESS,
        help='show agents by id only (default: by name, as "alice", where you may read it)',
    )
    if action:
        g.add_argument(
            "--key",
            metavar="K",
            default=argparse.SUPPRESS,
            help="idempotency key: send exactly K (retrying with the same K never repeats the action)",
        )
    return p


READ_COMMON = _common(action=False)


ACT_COMMON = _common(action=True)


def add_content_args(p, *, memory: bool = False, text: bool = True, required: bool = False) -> None:
    g = p.add_mutually_exclusive_group(required=required)
    g.add_argument("--content", metavar="JSON", help="content object as JSON (- reads stdin)")
    if text:
        g.add_argument("--text", metavar="TEXT", help='content {"text": TEXT}')
    g.add_argument("--file", metavar="PATH", help="content object from a JSON file (- reads stdin)")
    if memory:
        g.add_argument("--memory", metavar="ID[@VERSION]", help="pin an existing Memory (current version unless given)")


def add_page_args(p) -> None:
    p.add_argument("--all", action="store_true", help="follow cursors to the end")
    p.add_argument("--limit", type=int, help="items per page (1-100)")
    p.add_argument("--cursor", help="continue from a cursor a previous page printed")


def add_save_as_args(p) -> None:
    p.add_argument("--save-as", metavar="PROFILE", help="write the daemon URL and the new key to PROFILE instead of printing the key")
    p.add_argument("--force", action="store_true", help="with --save-as: replace an existing profile")


class Parsers:
    """Adds subcommands; each carries its builder (or runner) as a default."""

    def __init__(self, sub):
        self.sub = sub

    def add(self, name: str, build: Callable | None, help: str, *, action: bool, **kw) -> argparse.ArgumentParser:
        p = self.sub.add_parser(
            name, help=help, description=help, parents=[ACT_COMMON if action else READ_COMMON], **kw
        )
        p.set_defaults(build=build)
        return p

    def group(self, name: str, help: str) -> "Parsers":
        p = self.sub.add_parser(name, help=help, description=help, parents=[READ_COMMON])
        return Parsers(p.add_subparsers(dest=f"{name}_cmd", metavar="COMMAND", required=True))


def duration(text: str) -> int:
    """``3600``, ``90m``, ``12h``, ``30d`` -> seconds."""
    unit = {"s": 1, "m": 60, "h": 3600, "d": 86400}.get(text[-1:].lower())
    try:
        return int(text[:-1]) * unit if unit else int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (seconds, or 90m, 12h, 30d)") from None
