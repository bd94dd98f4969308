"""The seeded client workload of the simulation: several agents registering,
writing Memories, running Threads (admit, join, post with ask and assign,
handle, leave, close), working assignments (take, deliver, judge, drop, void)
and Tasks (create, take, deliver, judge, drop), an admin deactivating and
reactivating agents, and clients misbehaving on purpose: the same request twice
under one key, another request under a used key, retries after ``unavailable``.

It learns ids only from the replies it gets (as a client does), and aims most
requests at what it believes is valid, so the interesting paths (pipelined
decisions, races, deadlines) are taken; what it believes may be out of date,
which makes the rest of the requests races and rejections.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any, Callable

import msgspec

from kungfud import wire

if TYPE_CHECKING:
    from .harness import Request, Sim

__all__ = ["Workload"]


class Workload:
    def __init__(self, sim: "Sim", rng: random.Random, *, agents: int | None = None):
        self.sim = sim
        self.rng = rng
        self.n_agents = agents if agents is not None else rng.randint(4, 6)
        self.keys = 0
        self.agents: list[str] = []
        self.status: dict[str, str] = {}
        self.memories: dict[str, list[str]] = {}
        self.threads: list[str] = []
        self.members: dict[str, dict[str, str]] = {}  # thread -> agent -> role (as replies told)
        self.closed: set[str] = set()
        self.tokens: list[tuple[str, str]] = []  # (thread, token)
        self.entries: list[tuple[str, int, str, list[str]]] = []  # (thread, entry, author, responders)
        self.assignments: dict[str, dict[str, Any]] = {}
        self.tasks: dict[str, dict[str, Any]] = {}
        self.engagements: dict[str, dict[str, Any]] = {}
        self.sent: list["Request"] = []
        self.retry: list["Request"] = []
        self.ops: list[tuple[int, Callable[[], tuple[str, str, Any] | None]]] = [
            (4, self._memory_create),
            (2, self._memory_update),
            (3, self._thread_create),
            (2, self._thread_admit),
            (6, self._thread_join),
            (10, self._thread_post),
            (3, self._thread_handle),
            (1, self._thread_retract),
            (8, self._assignment_take),
            (7, self._assignment_deliver),
            (5, self._assignment_judge),
            (2, self._assignment_drop),
            (2, self._assignment_void),
            (1, self._thread_leave),
            (1, self._thread_set_role),
            (1, self._thread_close),
            (1, self._task_create),
            (5, self._task_take),
            (3, self._task_deliver),
            (3, self._task_judge),
            (1, self._task_drop),
            (2, self._set_status),
        ]

    # --- sending ------------------------------------------------------------------

    def _key(self) -> str:
        self.keys += 1
        return f"k{self.keys}"

    def start(self) -> None:
        for i in range(self.n_agents):
            self._send(None, "agent.register", wire.RegisterArgs(content={"name": f"agent{i}"}))

    def _send(self, agent: str | None, op: str, args: Any, key: str | None = None, kind: str = "new") -> "Request":
        req = self.sim.send(agent, op, key or self._key(), args, kind)
        self.sent.append(req)
        return req

    def act(self) -> None:
        rng = self.rng
        r = rng.random()
        if self.retry and r < 0.10:
            # A client retries a request that failed with `unavailable`: same key, same args.
            req = self.retry.pop(rng.randrange(len(self.retry)))
            self._send(req.agent, req.op, req.args, req.key, "retry")
            return
        if self.sent and r < 0.20:
            # The same request again (a resend, or a second connection racing the first).
            req = rng.choice(self.sent[-30:])
            self._send(req.agent, req.op, req.args, req.key, "dup")
            return
        if self.sent and r < 0.25:
            # Another request under a used key.
            req = rng.choice(self.sent[-30:])
            args = self._other_args(req)
            if args is not None:
                self._send(req.agent, req.op, args, req.key, "other")
                return
        if len(self.agents) < 2:
            if self.retry:
                req = self.retry.pop(0)
                self._send(req.agent, req.op, req.args, req.key, "retry")
            return
        if rng.random() < 0.25 and (made := self._grow_thread()) is not None:
            self._send(*made)
            return
        for _ in range(12):
            gen = rng.choices([g for _, g in self.ops], [w for w, _ in self.ops])[0]
            made = gen()
            if made is not None:
                agent, op, args = made
                self._send(agent, op, args)
                return

    def _other_args(self, req: "Request") -> Any:
        args = req.args
        fields = msgspec.structs.fields(type(args))
        names = {f.name for f in fields}
        if "content" in names and getattr(args, "content") is not None:
            # Same shape (the op's structural keys stay), other values.
            content = {k: (v + "!" if isinstance(v, str) else v) for k, v in args.content.items()}
            if content == args.content:
                content["other"] = True
            return msgspec.structs.replace(args, content=content)
        if "verdict" in names:
            return msgspec.structs.replace(args, verdict="reject" if args.verdict == "adopt" else "adopt")
        if "role" in names:
            return msgspec.structs.replace(args, role="observer" if args.role != "observer" else "speaker")
        if "status" in names:
            return msgspec.structs.replace(args, status="active" if args.status == "deactivated" else "deactivated")
        if "thread" in names and self.threads:
            return msgspec.structs.replace(args, thread=self.rng.choice(self.threads))
        return None

    # --- learning from replies ------------------------------------------------------

    def failed_transiently(self, req: "Request") -> None:
        if self.rng.random() < 0.7:
            self.retry.append(req)

    def observe(self, req: "Request", result: dict) -> None:
        op, me, a = req.op, req.agent, req.args
        if op == "agent.register":
            agent = result["agent"]
            if agent not in self.agents:
                self.agents.append(agent)
                self.status[agent] = "active"
        elif op == "admin.agent.set_status":
            self.status[result["agent"]] = result["status"]
            if result["status"] == "deactivated":
                for members in self.members.values():
                    members.pop(result["agent"], None)
        elif op == "memory.create":
            self._memory(me, result["memory"])
        elif op == "thread.create":
            t = result["thread"]
            if t not in self.threads:
                self.threads.append(t)
                self.members[t] = {me: "governor"}
        elif op == "thread.admit":
            if result.get("token"):
                self.tokens.append((result["thread"], result["token"]))
        elif op == "thread.join":
            self.members.setdefault(result["thread"], {})[me] = result["role"]
        elif op == "thread.leave":
            self.members.get(result["thread"], {}).pop(me, None)
        elif op == "thread.set_role":
            self.members.setdefault(result["thread"], {})[result["agent"]] = result["role"]
        elif op == "thread.close":
            self.closed.add(result["thread"])
        elif op == "thread.post":
            t, e = result["thread"], result["entry"]
            if not any(x[0] == t and x[1] == e for x in self.entries):
                self.entries.append((t, e, me, list(result["responders"])))
            self._memory(me, result["pin"]["memory"])
            if "assignment" in result and a.assign is not None:
                self.assignments.setdefault(
                    result["assignment"], {"thread": t, "creator": me, "to": a.assign.to, "taker": None, "state": "open"}
                )
        elif op.startswith("assignment."):
            got = self.assignments.get(result.get("assignment", ""))
            if got is not None:
                got["state"] = result["state"]
                if op == "assignment.take":
                    got["taker"] = me
        elif op == "task.create":
            c = a.contract
            self.tasks.setdefault(result["task"], {"author": me, "judge": c.judge or me})
        elif op == "task.take":
            t = self.tasks.get(result["task"])
            if t is not None:
                e = self.engagements.setdefault(
                    result["engagement"], {"task": result["task"], "agent": me, "judge": t["judge"], "state": "taken"}
                )
                e["state"] = result["state"]
        elif op in ("task.deliver", "task.judge", "task.drop"):
            e = self.engagements.get(result.get("engagement", ""))
            if e is not None:
                e["state"] = result["state"]

    def _memory(self, agent: str | None, memory: str) -> None:
        if agent is not None and memory not in self.memories.setdefault(agent, []):
            self.memories[agent].append(memory)

    # --- choosing ------------------------------------------------------------------------

    def _agent(self, *, active: float = 0.95) -> str:
        act = [a for a in self.agents if self.status.get(a) == "active"]
        if act and self.rng.random() < active:
            return self.rng.choice(act)
        return self.rng.choice(self.agents)

    def _member(self, thread: str, roles: tuple[str, ...] = ("observer", "speaker", "governor")) -> str | None:
        ms = [a for a, r in self.members.get(thread, {}).items() if r in roles]
        if ms and self.rng.random() < 0.9:
            return self.rng.choice(ms)
        return self._agent() if self.rng.random() < 0.5 else None

    def _thread(self) -> str | None:
        if not self.threads:
            return None
        open_ = [t for t in self.threads if t not in self.closed]
        return self.rng.choice(open_ if open_ and self.rng.random() < 0.9 else self.threads)

    def _content(self) -> dict:
        return {"text": f"c{self.rng.randrange(10**6)}"}

    def _within(self) -> int | None:
        return self.rng.choice((1, 2, 3, 5, 10, 20, None))

    # --- op generators: (agent, op, args) or None ----------------------------------------

    def _memory_create(self):
        return self._agent(), "memory.create", wire.MemoryCreateArgs(content=self._content())

    def _memory_update(self):
        me = self._agent()
        mine = self.memories.get(me)
        if not mine:
            return None
        return me, "memory.update", wire.MemoryUpdateArgs(memory=self.rng.choice(mine), content=self._content())

    def _thread_create(self):
        if len(self.threads) >= 3 and self.rng.random() < 0.9:
            return None
        return self._agent(), "thread.create", wire.ThreadCreateArgs(content=self._content() if self.rng.random() < 0.5 else None)

    def _thread_admit(self):
        t = self._thread()
        if t is None:
            return None
        if any(x == t for x, _ in self.tokens) and self.rng.random() < 0.6:
            return None  # a grant is out for this thread; a new one would void it
        me = self._member(t, ("governor",))
        if me is None:
            return None
        role = self.rng.choice(("speaker", "speaker", "speaker", "observer", "governor"))
        return me, "thread.admit", wire.AdmitArgs(thread=t, role=role)

    def _grow_thread(self):
        """Bring members into a small open Thread: a grant if none is out, else a join."""
        small = [t for t in self.threads if t not in self.closed and len(self.members.get(t, {})) < 4]
        if not small:
            return None
        t = self.rng.choice(small)
        tokens = [tok for x, tok in self.tokens if x == t]
        if not tokens:
            govs = [a for a, r in self.members.get(t, {}).items() if r == "governor"]
            if not govs:
                return None
            role = self.rng.choice(("speaker", "speaker", "speaker", "governor"))
            return self.rng.choice(govs), "thread.admit", wire.AdmitArgs(thread=t, role=role)
        outside = [a for a in self.agents if a not in self.members.get(t, {}) and self.status.get(a) == "active"]
        if not outside:
            return None
        return self.rng.choice(outside), "thread.join", wire.JoinArgs(token=tokens[-1])

    def _thread_join(self):
        if not self.tokens:
            return None
        latest = {t: tok for t, tok in self.tokens}  # the grant most likely still live
        t, token = self.rng.choice(list(latest.items()) if self.rng.random() < 0.85 else self.tokens[-6:])
        outside = [a for a in self.agents if a not in self.members.get(t, {}) and self.status.get(a) == "active"]
        me = self.rng.choice(outside) if outside and self.rng.random() < 0.85 else self._agent()
        return me, "thread.join", wire.JoinArgs(token=token)

    def _thread_post(self):
        t = self._thread()
        if t is None:
            return None
        me = self._member(t, ("speaker", "governor"))
        if me is None:
            return None
        others = [a for a, r in self.members.get(t, {}).items() if a != me and r in ("speaker", "governor")]
        rng = self.rng
        ask = None
        if others and rng.random() < 0.4:
            ask = rng.sample(others, rng.randint(1, min(2, len(others))))
        assign = None
        if others and rng.random() < 0.6:
            assign = wire.AssignArgs(
                to=rng.choice(others), content={"criteria": "done"}, deliver_within_s=self._within(),
                judge_within_s=self._within(),
            )
        reply_to = None
        mine = [e for e in self.entries if e[0] == t]
        if mine and rng.random() < 0.3:
            pending = [e for e in mine if me in e[3]]
            reply_to = rng.choice(pending or mine)[1]
        memory = None
        content: dict | None = self._content()
        if self.memories.get(me) and rng.random() < 0.3:
            memory, content = wire.MemoryRef(memory=rng.choice(self.memories[me])), None
        return me, "thread.post", wire.PostArgs(thread=t, memory=memory, content=content, reply_to=reply_to, ask=ask, assign=assign)

    def _thread_handle(self):
        pend = [(t, e, r) for t, e, _, rs in self.entries for r in rs]
        if not pend:
            return None
        t, e, me = self.rng.choice(pend)
        return me, "thread.handle", wire.HandleArgs(thread=t, entry=e, content={"note": "seen"} if self.rng.random() < 0.5 else None)

    def _thread_retract(self):
        asks = [(t, e, a) for t, e, a, rs in self.entries if rs]
        if not asks:
            return None
        t, e, me = self.rng.choice(asks)
        return me, "thread.retract", wire.EntryRefArgs(thread=t, entry=e)

    def _pick_assignment(self, who: str, state: str) -> tuple[str, str] | None:
        if not self.assignments:
            return None
        likely = [a for a, x in self.assignments.items() if x["state"] == state]
        asg = self.rng.choice(likely if likely and self.rng.random() < 0.85 else list(self.assignments)[-12:])
        me = self.assignments[asg][who] or self.assignments[asg]["to"]
        if self.rng.random() < 0.08:
            me = self._agent()
        return asg, me

    def _assignment_take(self):
        got = self._pick_assignment("to", "open")
        if got is None:
            return None
        asg, me = got
        deliver = wire.PinArgs(content=self._content()) if self.rng.random() < 0.25 else None
        return me, "assignment.take", wire.TakeArgs(assignment=asg, deliver=deliver)

    def _assignment_deliver(self):
        got = self._pick_assignment("taker", "taken")
        if got is None:
            return None
        asg, me = got
        mine = self.memories.get(me)
        if mine and self.rng.random() < 0.3:
            return me, "assignment.deliver", wire.DeliverArgs(assignment=asg, memory=wire.MemoryRef(memory=self.rng.choice(mine)))
        return me, "assignment.deliver", wire.DeliverArgs(assignment=asg, content=self._content())

    def _assignment_judge(self):
        got = self._pick_assignment("creator", "delivered")
        if got is None:
            return None
        asg, me = got
        verdict = self.rng.choice(("adopt", "reject"))
        reason = {"reason": "not yet"} if verdict == "reject" and self.rng.random() < 0.9 else None
        return me, "assignment.judge", wire.JudgeArgs(assignment=asg, verdict=verdict, content=reason)

    def _assignment_drop(self):
        got = self._pick_assignment("taker", "taken")
        if got is None:
            return None
        asg, me = got
        return me, "assignment.drop", wire.AssignmentRefArgs(assignment=asg)

    def _assignment_void(self):
        got = self._pick_assignment(self.rng.choice(("creator", "creator", "to")), self.rng.choice(("open", "taken")))
        if got is None:
            return None
        asg, me = got
        me = self.assignments[asg]["creator"] if self.rng.random() < 0.9 else me
        return me, "assignment.void", wire.AssignmentRefArgs(assignment=asg)

    def _thread_leave(self):
        t = self._thread()
        if t is None:
            return None
        me = self._member(t)
        if me is None:
            return None
        return me, "thread.leave", wire.ThreadRefArgs(thread=t)

    def _thread_set_role(self):
        t = self._thread()
        if t is None:
            return None
        me = self._member(t, ("governor",))
        others = [a for a in self.members.get(t, {}) if a != me]
        if me is None or not others:
            return None
        role = self.rng.choice(("observer", "speaker", "governor"))
        return me, "thread.set_role", wire.SetRoleArgs(thread=t, agent=self.rng.choice(others), role=role)

    def _thread_close(self):
        t = self._thread()
        if t is None or self.rng.random() < 0.7:
            return None
        me = self._member(t, ("governor",))
        if me is None:
            return None
        return me, "thread.close", wire.ThreadRefArgs(thread=t)

    def _task_create(self):
        if len(self.tasks) >= 5 and self.rng.random() < 0.8:
            return None
        rng = self.rng
        me = self._agent()
        others = [a for a in self.agents if a != me]
        judge = rng.choice(others) if others and rng.random() < 0.25 else None
        audience: Any = "open"
        if others and rng.random() < 0.3:
            audience = wire.AgentList(agents=rng.sample(others, rng.randint(1, len(others))))
        contract = wire.ContractArgs(
            content={"output": "o", "criteria": "c"},
            deliver_within_s=self._within(),
            judge_within_s=self._within(),
            on_no_judgment=rng.choice(("undecided", "adopt")),
            adoption_limit=rng.choice((None, 1, 2)),
            judge=judge,
        )
        return me, "task.create", wire.TaskCreateArgs(audience=audience, contract=contract)

    def _task_take(self):
        if not self.tasks:
            return None
        tk = self.rng.choice(list(self.tasks)[-6:])
        t = self.tasks[tk]
        cands = [a for a in self.agents if a not in (t["author"], t["judge"])]
        me = self.rng.choice(cands) if cands and self.rng.random() < 0.92 else self._agent()
        deliver = wire.PinArgs(content=self._content()) if self.rng.random() < 0.25 else None
        return me, "task.take", wire.TaskTakeArgs(task=tk, deliver=deliver)

    def _pick_engagement(self, who: str, state: str) -> tuple[str, str] | None:
        if not self.engagements:
            return None
        likely = [e for e, x in self.engagements.items() if x["state"] == state][-10:]
        en = self.rng.choice(likely if likely and self.rng.random() < 0.85 else list(self.engagements)[-10:])
        me = self.engagements[en][who]
        if self.rng.random() < 0.08:
            me = self._agent()
        return en, me

    def _task_deliver(self):
        got = self._pick_engagement("agent", "taken")
        if got is None:
            return None
        en, me = got
        return me, "task.deliver", wire.TaskDeliverArgs(engagement=en, content=self._content())

    def _task_judge(self):
        got = self._pick_engagement("judge", "delivered")
        if got is None:
            return None
        en, me = got
        verdict = self.rng.choice(("adopt", "adopt", "reject"))
        reason = {"reason": "no"} if verdict == "reject" else None
        return me, "task.judge", wire.TaskJudgeArgs(engagement=en, verdict=verdict, content=reason)

    def _task_drop(self):
        got = self._pick_engagement("agent", "taken")
        if got is None:
            return None
        en, me = got
        return me, "task.drop", wire.EngagementRefArgs(engagement=en)

    def _set_status(self):
        if self.rng.random() < 0.6:
            return None
        deact = [a for a in self.agents if self.status.get(a) == "deactivated"]
        act = [a for a in self.agents if self.status.get(a) == "active"]
        if deact and (self.rng.random() < 0.6 or len(act) <= 2):
            target, status = self.rng.choice(deact), "active"
        elif len(act) > 2:
            target, status = self.rng.choice(act), "deactivated"
        else:
            return None
        return self.sim.admin, "admin.agent.set_status", wire.SetStatusArgs(agent=target, status=status)
