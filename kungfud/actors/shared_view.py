"""One read view shared by the jobs told to an actor in one message (D281)."""

from __future__ import annotations

from typing import Any

__all__ = ["SharedView"]


class SharedView:
    """One read view shared by the jobs of one message (D281). It is a
    snapshot, so what it answered once it answers alike: its objects and
    query answers are kept for the next job (a Thread's running deadline, its
    speakers), with the overlay still answering first (Reads)."""

    __slots__ = ("view", "objs", "queries")

    def __init__(self, view: Any):
        self.view = view
        self.objs: dict[str, tuple[int, Any]] = {}
        self.queries: dict[tuple, list] = {}

    def obj(self, obj: str) -> tuple[int, Any]:
        got = self.objs.get(obj)
        if got is None:
            got = self.objs[obj] = self.view.obj(obj)
        return got

    def query(self, name: str, key: str, limit: int | None = None, party: str | None = None, skip: Any = ()) -> list:
        k = (name, key, limit, party, frozenset(skip) if skip else None)
        got = self.queries.get(k)
        if got is None:
            got = self.queries[k] = self.view.query(name, key, limit, party, skip)
        return got

    def __getattr__(self, name: str) -> Any:  # every other read, as the view answers it
        return getattr(self.view, name)
