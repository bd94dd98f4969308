"""Paged reads (docs/wire.md "Conventions"): follow ``cursor`` until it is null."""

from __future__ import annotations

from typing import Any, AsyncIterator

from .core import Connection, Result


class Pages(Connection):
    """Every page, or every item, of a paged read."""

    async def pages(self, op: str, args: dict | None = None) -> AsyncIterator[Result]:
        """Every page of a paged read, following ``cursor`` until it is null."""
        args = dict(args or {})
        while True:
            page = await self.read(op, args)
            yield page
            cursor = page.get("cursor")
            if cursor is None:
                return
            if cursor == args.get("cursor") and not page.get("items"):
                raise RuntimeError(f"{op} returned the same cursor without items: stopping instead of looping")
            args["cursor"] = cursor

    async def items(self, op: str, args: dict | None = None) -> AsyncIterator[Any]:
        """Every item of a paged read (``turn``, ``thread.entries``,
        ``task.list``, …), page after page."""
        async for page in self.pages(op, args):
            for item in page.get("items", []):
                yield item
