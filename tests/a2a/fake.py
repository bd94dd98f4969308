"""A stand-in for the daemon behind the A2A app (kungfud/a2a/ops.py's Ops):
keys, cards, Tasks whose state a test moves, and the a2a_task events of
each move. The ops it answers are those of WIRE.md 1.3 "A2A", in the shapes
of A2A-SPLIT.md's seam; a test can make any op refuse with a rejection."""

from __future__ import annotations

import itertools
from typing import Any

from kungfud.a2a.card import EXTENSION
from kungfud.a2a.ops import Answer

KEYS = {"key-alice": "ag_alice", "key-bob": "ag_bob", "key-worker": "ag_worker"}


class FakeOps:
    def __init__(self) -> None:
        self.cards = {"ag_worker": {"name": "Worker", "description": "does work"}}
        self.tasks: dict[str, dict] = {}
        self.owner: dict[str, str] = {}
        self.to: dict[str, str] = {}  # the agent each Task was sent to
        self.log: list[tuple[int, str, dict]] = []  # the a2a_task events: (seq, agent, data)
        self.calls: list[tuple[str, str, dict, str]] = []  # (agent, op, args, key)
        self.refuse: dict[str, dict] = {}  # op -> rejection
        self.receipts: dict[str, Any] = {}
        self.watching: dict[str, set] = {}  # agent -> the streams' wake-ups (Ops.watch)
        self._seq = itertools.count(1)
        self._ids = itertools.count(1)

    # --- Ops ---------------------------------------------------------------------

    def authenticate(self, key: str):
        agent = KEYS.get(key)
        return None if agent is None else (agent, b"h-" + agent.encode())

    def card(self, agent: str):
        c = self.cards.get(agent)
        if c is None:
            return None
        return {"agent": agent, "content": c, "accept": "any", "card_url": f"http://x/a2a/agents/{agent}/.well-known/agent-card.json"}

    def watch(self, agent: str):
        import asyncio

        woken = asyncio.Event()
        self.watching.setdefault(agent, set()).add(woken)
        return woken

    def unwatch(self, agent: str, woken) -> None:
        self.watching[agent].discard(woken)

    def head(self, agent: str) -> int:
        return max((s for s, _, _ in self.log), default=0)

    def events_of(self, agent: str, after: int):
        return [(s, d) for s, a, d in self.log if a == agent and s > after]

    def events(self, agent: str, after: int, limit: int = 100):
        items = self.events_of(agent, after)[:limit]
        more = len(self.events_of(agent, after)) > limit
        upto = items[-1][0] if more else max(after, self.head(agent))
        return items, upto, more

    async def call(self, agent, key_hash, op, args, key="", peer=""):
        self.calls.append((agent, op, args, key))
        if op in self.refuse:
            return Answer(False, error=self.refuse[op])
        if key and key in self.receipts:
            return Answer(True, self.receipts[key], replayed=True)
        result = getattr(self, "_" + op.replace(".", "_"))(agent, args)
        if isinstance(result, Answer):
            return result
        if key:
            self.receipts[key] = result
        return Answer(True, result)

    # --- the ops ------------------------------------------------------------------------

    def _a2a_send(self, agent, args):
        tid = f"tk_{next(self._ids)}"
        msg = args["message"]
        self.tasks[tid] = {
            "id": tid, "contextId": "cx_1",
            "status": {"state": "TASK_STATE_SUBMITTED", "timestamp": "2026-01-01T00:00:00Z"},
            "history": [msg], "metadata": {EXTENSION: {"state": "offered", "generation": 1}},
        }
        self.owner[tid] = agent
        self.to[tid] = args["to"]
        self.move(tid, "TASK_STATE_SUBMITTED")
        return {"task": tid, "context": "cx_1", "state": "TASK_STATE_SUBMITTED"}

    def _not_found(self, tid):
        return Answer(False, error={"code": "not_found", "reason": f"Task {tid} was not found, or you may not read it", "next": "stop"})

    def _a2a_task(self, agent, args):
        t = self.tasks.get(args["task"])
        if t is None or self.owner[args["task"]] != agent or self.to[args["task"]] != args.get("to"):
            return self._not_found(args["task"])
        return t

    def _a2a_tasks(self, agent, args):
        return {"items": [t for tid, t in self.tasks.items() if self.owner[tid] == agent], "cursor": ""}

    def _a2a_cancel(self, agent, args):
        if args["task"] not in self.tasks:
            return self._not_found(args["task"])
        self.move(args["task"], "TASK_STATE_CANCELED")
        return {"task": args["task"], "state": "TASK_STATE_CANCELED"}

    def _a2a_push_set(self, agent, args):
        c = dict(args["config"])
        c.setdefault("id", "pc_1")
        if "authentication" in c:
            c["authentication"] = {"scheme": c["authentication"]["scheme"]}
        return {"task": args["task"], "config": c}

    def _a2a_push_list(self, agent, args):
        return {"items": [{"id": "pc_1", "url": "https://example.com/hook", "authentication": {"scheme": "Bearer"}}]}

    def _a2a_push_clear(self, agent, args):
        return {"cleared": True}

    # --- what a test does ---------------------------------------------------------------

    def move(self, tid: str, state: str, artifact: dict | None = None) -> int:
        t = self.tasks[tid]
        gen = t["metadata"][EXTENSION]["generation"] + (0 if not self.events_of(self.owner[tid], 0) else 1)
        t["metadata"][EXTENSION]["generation"] = gen
        t["status"] = {"state": state, "timestamp": "2026-01-01T00:00:01Z"}
        if artifact is not None:
            t.setdefault("artifacts", []).append(artifact)
        seq = next(self._seq)
        self.log.append((seq, self.owner[tid], {"task": tid, "state": state, "generation": gen, "at": 1767225601000}))
        for woken in self.watching.get(self.owner[tid], ()):
            woken.set()
        return seq
