"""Runtime: wires the store, the writer and the actor registry together, and is
the one way in below the server: an action enters by :meth:`Runtime.act` (or its
two steps, :meth:`Runtime.job` and :meth:`Runtime.route`, when the server admits
it in between), a read by :meth:`Runtime.read`. The server holds no store or
core knowledge: authentication, the event feed and receipts are asked here."""

from __future__ import annotations

import os
import secrets
import threading
import time
from typing import Any, Callable

from types import MappingProxyType
from typing import Mapping, NamedTuple

import msgspec

from .. import wire
from ..core.agent import key_hash
from ..core import keys
from .key_check import KEY_READS, key_refusal
from ..core.context import Ctx, Limits
from ..core.ids import time_ordered
from ..core.webhook import webhook_obj
from ..store import Failed, Outcome, Store, Writer
from ..core.events import OPEN as OPEN_TASKS
from ..store.interface import Committer
from ..store.layout import receipt_scope
from ..store.quota import Quota
from ..store.interface import replay
from ..errors import Rejection
from ..nodes import Nodes, single
from ..nodes.link import Link
from .deadline_clock import DeadlineClock
from .event_pages import PASS_LIMIT, EventPages
from ..core.a2a_card import card_url
from .ops import ACTIONS, ROUTE_READS, SERVICE_ACTORS, agent_actor, to_command
from ..reads import READS
from .registry import DEFAULT_THREADS, Registry
from .stats import Stats, stats_of

__all__ = ["Runtime", "Job", "Identity", "wall_ms", "OPEN_TASKS", "PASS_LIMIT"]

def wall_ms() -> int:
    return time.time_ns() // 1_000_000


class Job(msgspec.Struct):
    """One action on its way to the actor that owns it."""

    op: str
    caller: str | None
    scope: bytes | None  # receipt key (agent, op, idempotency key)
    req_hash: bytes
    command: Any
    reply: Callable[[Outcome], None]  # thread-safe; delivers to the event loop
    # The hash of the key the sending connection authenticated with: an action
    # sent with a key that was rotated or reset is refused (D185); None: not checked.
    key_hash: bytes | None = None
    # Its request's span (kungfud/tracing.py RequestSpan); None while tracing is off.
    span: Any = None


class Identity(NamedTuple):
    """Who a key authenticates: the agent, its status, and the key's hash (a
    connection keeps it to notice when the key is rotated or reset); for a
    scoped key (WIRE.md 1.3) its scope and expiry (ms)."""

    agent: str
    status: str
    key_hash: bytes
    scope: str | None = None
    expires_at: int | None = None


class Runtime(EventPages):
    def __init__(
        self,
        store: Store,
        limits: Limits = Limits(),
        *,
        clock: Callable[[], int] = wall_ms,
        idle_stop_s: float = 60.0,
        max_batch: int = 256,
        fault: Callable[[str], None] | None = None,
        nodes: Nodes | None = None,
        quota: Quota | None = None,
        actor_threads: int = DEFAULT_THREADS,
    ):
        self.store = store
        # The other nodes on this store (issue 16): one by default (no work at all).
        self.nodes = nodes or single()
        self._shared = self.nodes.shared
        # The link compares fact seqs (a commit may add a deadline and no event).
        self.link = Link(self.nodes, self.store.last_seq)
        self.limits = limits
        self.clock = clock
        self._id_lock = threading.Lock()
        self._last_id: dict[str, tuple[int, int]] = {}
        self._entropy, self._entropy_at = b"", 0
        self.registry = Registry(self, idle_stop_s=idle_stop_s, may_start=self._may_start, threads=actor_threads)
        self.clock_thread = DeadlineClock(self)
        self.writer: Committer = Writer(
            store,
            max_batch=max_batch,
            clock=clock,
            on_deadline=self._on_deadline,
            on_events=self._publish,
            on_webhooks=self._webhooks_written,
            fault=fault,  # tests only (storage fault injection)
            quota=quota,  # capacity per agent and the reserve (R12-11)
        )
        self.link.clock = self.clock_thread.wake  # another node added a deadline
        # Set by the server: receives each commit's events (writer thread), as
        # (agent, event seq, event JSON); agent OPEN ("*"): a task_offered event.
        self.event_sink: Callable[[list[tuple[str, int, bytes]]], None] | None = None
        # Set by the server: receives the agents whose webhook registration a
        # commit of this node wrote (writer thread; D272).
        self.webhook_sink: Callable[[list[str]], None] | None = None
        # Scoped keys that authenticated and expire: key hash -> expiry (ms);
        # the server closes their connections when the time comes (WIRE.md 1.3).
        self.expiring: dict[bytes, int] = {}
        # Scoped keys that authenticated: key hash -> key id, under which the
        # server notes their last use beside the agents' (agent.key.list).
        self.key_ids: dict[bytes, str] = {}

    @property
    def a2a_public_url(self) -> str:
        """The base A2A cards advertise (WIRE.md 1.3 "A2A"): ``[a2a] public_url``
        by default; the A2A server sets the bound address when its port was 0."""
        return self.limits.a2a_public_url

    @a2a_public_url.setter
    def a2a_public_url(self, url: str) -> None:
        self.limits = msgspec.structs.replace(self.limits, a2a_public_url=url.rstrip("/"))

    def start(self) -> None:
        self.writer.start()
        self.registry.start()
        self.clock_thread.start()  # re-arms every stored deadline (after a restart too)
        self.link.start()

    def stop(self) -> None:
        """Stop the clock and actors (they finish queued jobs), then drain the
        writer; then leave the other nodes (the deadline lease too)."""
        self.clock_thread.stop()
        self.registry.stop()
        self.writer.stop()
        self.link.stop()

    def stats(self) -> Stats:
        """Counts for ``/metrics``: the store's through named View queries."""
        return stats_of(self)

    def _publish(self, events: list[tuple[str, int, bytes]]) -> None:
        """A commit's events (writer thread): to this node's feed, and
        announced to the other nodes."""
        sink = self.event_sink
        if sink is not None:
            sink(events)
        if self._shared:
            # Agents named by fact seq; OPEN ("*") wakes every open-Task subscriber.
            self.link.committed(self.writer.committed_seq, list({agent: None for agent, _, _ in events}), False)

    def _webhooks_written(self, agents: list[str]) -> None:
        """A commit wrote ``agents``' webhook registrations (writer thread): to
        this node's delivery runner, and announced to the other nodes by the
        names of the registrations (``ag_….webhook``, never an agent id), which
        their runners read again (D272)."""
        sink = self.webhook_sink
        if sink is not None:
            sink(agents)
        if self._shared:
            self.link.committed(self.writer.committed_seq, [webhook_obj(a) for a in agents], False)

    def announce_agents(self, agents: list[str]) -> None:
        """Tell the other nodes that something of ``agents`` changed that their
        connections must notice (a key rotated or reset, D156); a no-op on one
        node."""
        if self._shared:
            self.link.committed(self.link.known, agents, False)

    def share_seen(self, seen: dict[str, int]) -> None:
        """What this node's server saw since its last share, ``{agent: ms}``:
        to the other nodes (D175); the server shares only when ``shared``."""
        self.link.share_seen(seen)

    @property
    def shared(self) -> bool:
        """Other nodes may serve this store (issue 16)."""
        return self._shared

    def _on_deadline(self, _due: int) -> None:
        """A commit added a deadline (writer thread): the clock reads the index
        itself; the node that holds the deadline lease may be another."""
        self.clock_thread.wake()
        if self._shared:
            self.link.committed(self.link.known, (), True)

    def new_id(self, prefix: str) -> str:
        """Time-ordered and, within one millisecond, strictly increasing (like a
        monotonic ULID), so listings ordered by id are creation order."""
        now = self.clock()
        with self._id_lock:
            last = self._last_id.get(prefix)
            if last is not None and last[0] >= now:
                now, rand = last[0], last[1] + 1
            else:
                rand = self._random_bits() >> 1  # 79 bits: headroom to count up within a millisecond
            self._last_id[prefix] = (now, rand)
        return time_ordered(prefix, now, rand)

    def _random_bits(self) -> int:
        """80 random bits from the OS, read 4 KiB at a time (one syscall per
        ~400 ids instead of one per id). Caller holds ``_id_lock``."""
        if self._entropy_at + 10 > len(self._entropy):
            self._entropy, self._entropy_at = os.urandom(4000), 0
        at = self._entropy_at
        self._entropy_at = at + 10
        return int.from_bytes(self._entropy[at : at + 10], "big")

    @staticmethod
    def new_secret() -> str:
        return "kf_" + secrets.token_urlsafe(32)

    def ctx(
        self, caller: Any, now: int | None = None, get: Callable[[str], Any] | None = None, query: Any = None
    ) -> Ctx:
        now = self.clock() if now is None else now
        base = dict(now=now, caller=caller, new_id=self.new_id, new_secret=self.new_secret, limits=self.limits,
                    feed_seq=lambda: self.last_seq())  # read only when a decision asks (webhook.set)
        if get is None:
            return Ctx(**base)
        if query is None:
            return Ctx(**base, get=get)
        return Ctx(**base, get=get, query=query)

    def _may_start(self, key: str) -> bool:
        """An actor is started for a service key, or for an object that exists."""
        if key in SERVICE_ACTORS:
            return True
        with self.store.read() as view:
            return view.exists(key)

    def submit(self, job: Job, actor_key: str) -> None:
        told = self.registry.tell(actor_key, job)
        if told is None:
            self._no_object([job])
        elif not told:
            job.reply(Failed(Rejection.unavailable("the daemon is shutting down; retry against the restarted daemon")))

    def submit_many(self, jobs: list[Job], actor_key: str, held: dict | None = None) -> None:
        """Several jobs for one actor in one message (handled in this order);
        ``held``: kept for :meth:`submit_turn` to tell each carrier once."""
        if len(jobs) == 1 and held is None:
            self.submit(jobs[0], actor_key)
            return
        told = self.registry.tell(actor_key, jobs[0] if len(jobs) == 1 else jobs, held)
        if told is None:
            self._no_object(jobs, held)
        elif not told:
            for job in jobs:
                job.reply(Failed(Rejection.unavailable("the daemon is shutting down; retry against the restarted daemon")))

    def submit_turn(self, outgoing: dict[str, list[Job]]) -> None:
        """The jobs of one event-loop turn, by actor: :meth:`submit_many` for
        each, and each carrier told once with its actors' messages."""
        held: dict = {}
        for actor_key, jobs in outgoing.items():
            self.submit_many(jobs, actor_key, held)
        for message in self.registry.tell_held(held):
            for job in message if type(message) is list else (message,):
                job.reply(Failed(Rejection.unavailable("the daemon is shutting down; retry against the restarted daemon")))

    def _no_object(self, jobs: list[Job], held: dict | None = None) -> None:
        """Jobs for an object that does not exist (M5): no actor is started for
        it. Each caller's own agent actor decides them instead, with the same
        core decision over the same store, so the answer (``not_found``) is the
        one the object's actor would give, and an object created meanwhile is
        still serialized by the writer's version check (L5)."""
        by_actor: dict[str, list[Job]] = {}
        for job in jobs:
            if job.caller is None:  # no caller to serialize by (never routed to an object)
                job.reply(Failed(Rejection.not_found("the object", "this action names")))
                continue
            by_actor.setdefault(agent_actor(job.caller), []).append(job)
        for key, mine in by_actor.items():
            self.submit_many(mine, key, held)  # a service actor: always startable

    # --- the one way in ----------------------------------------------------------

    def job(
        self,
        agent: str | None,
        op: str,
        key: str,
        args: Any,
        reply: Callable[[Outcome], None],
        key_hash: bytes | None = None,
    ) -> Job:
        """Action ``op`` sent by ``agent`` with idempotency ``key``, as a Job:
        its receipt scope, request hash (B6) and core command. ``key_hash``:
        of the key the connection authenticated with (D185). Reads nothing.
        Raises :class:`wire.FrameError` for content that fails the op's shape."""
        # WIRE.md: agent.register is scoped (no agent, op, key) across all connections.
        caller = None if op == "agent.register" else agent
        command = to_command(op, args)
        scope = receipt_scope(caller, op, key)
        return Job(op, caller, scope, wire.canonical_hash(op, args), command, reply, key_hash if caller else None)

    @staticmethod
    def precheck(op: str) -> str | None:
        """The name of the I/O action ``op`` needs before it is routed (the
        catalogue's ``precheck`` column; None for most ops)."""
        return ACTIONS[op].precheck

    def route(self, job: Job) -> str:
        """The actor that serializes ``job``. Completes its command from the store
        first where the catalogue says so (a join token -> its Thread). Only the
        ops in ROUTE_READS read the store; a replay is found past it, by the owning
        actor (a refusal) or the writer (a decision to write), from the receipt (L3-2, D281)."""
        action = ACTIONS[job.op]
        if job.op not in ROUTE_READS:
            return action.route(job.command, job.caller, None)  # type: ignore[arg-type]
        with self.store.read() as view:
            if action.resolve is not None:
                job.command = action.resolve(job.command, view)
            return action.route(job.command, job.caller, view)

    def act(
        self, agent: str | None, op: str, key: str, args: Any, reply: Callable[[Outcome], None],
        key_hash: bytes | None = None,
    ) -> str:
        """Enter one action: job, route, submit; ``reply`` gets its outcome (on
        any thread). Returns the actor it went to. ``key_hash``: of the key the
        request came with — pass it for every request a client sent, so a
        revoked key or a scoped key's scope is checked (D185, WIRE.md 1.3).
        The server runs the same two steps with its admission policy between
        them and its jobs batched per loop turn (server/bridge.py)."""
        job = self.job(agent, op, key, args, reply, key_hash)
        actor_key = self.route(job)
        self.submit(job, actor_key)
        return actor_key

    def answered(self, job: Job) -> Outcome | None:
        """What the receipt of ``job``'s scope already answers: its replay, or
        ``idempotency_mismatch`` for another request under the same key; None
        when there is no receipt. For a request refused before it reaches an
        actor (a rate limit), which is still answered from its receipt (L4-5)
        — unless it was sent with a key that was rotated or reset since: that
        gets no replay either (D185)."""
        if job.scope is None:
            return None
        with self.store.read() as view:
            if (refused := key_refusal(view, job.caller, job.key_hash, self.clock(), job.op, "A")) is not None:
                return Failed(refused)
            rec = view.receipt(job.scope)
        if rec is None:
            return None
        return replay(rec, job.req_hash)

    def read(
        self,
        op: str,
        caller: str,
        args: Any,
        seen: Mapping[str, int] = MappingProxyType({}),
        key_hash: bytes | None = None,
    ) -> "dict | Rejection":
        """Answer read ``op`` from one consistent view, now (L4-3). ``seen``:
        agent -> when this daemon last saw it (ms). ``key_hash``: of the key
        the connection authenticated with; a key rotated or reset is refused
        in the same view (D185)."""
        now = self.clock()
        with self.store.read() as view:
            if (refused := key_refusal(view, caller, key_hash, now, op, "R")) is not None:
                return refused
            if op in KEY_READS:  # what only the key knows: its own scope; never another key
                return KEY_READS[op](view, caller, key_hash, now)
            out = READS[op](view, caller, args, now, seen)
        if op == "a2a.card.get" and isinstance(out, dict):  # the base this daemon advertises now
            out["card_url"] = card_url(self.a2a_public_url, out["agent"])
        return out

    # --- what the server asks of the store ------------------------------------------

    def authenticate(self, key: str) -> Identity | None:
        """The agent whose key this is (R4, H1), or None (also for a scoped
        key revoked or expired, WIRE.md 1.3). A key that expires is noted in
        :attr:`expiring` for the server, which closes its connections then."""
        if not key or len(key) > 256:
            return None
        h = key_hash(key)
        with self.store.read() as view:
            held = view.key_holder(h)
            if held is None or keys.refusal(held[0], held, self.clock(), None) is not None:
                return None
            state = view.state(held[0])
        if state is None:
            return None
        if held[2] is not None:
            self.expiring[h] = held[2]
        if held[3] is not None:
            self.key_ids[h] = held[3]
        return Identity(held[0], state.status, h, held[1], held[2])

    def key_check(self, agent: str, key_hash: bytes | None, op: str = "subscribe", kind: str = "R") -> Rejection | None:
        """:data:`KEY_REVOKED` when ``key_hash`` is no longer ``agent``'s key
        (D185), or ``forbidden`` when its scope does not allow ``op`` (of
        ``kind``), for a request the server answers itself (``subscribe``, or
        one whose args do not decode: D375)."""
        with self.store.read() as view:
            return key_refusal(view, agent, key_hash, self.clock(), op, kind)

    def key_hashes_of(self, agents: Any) -> dict[str, set[bytes]]:
        """The hashes of each agent's keys that authenticate now (its main key
        and its live scoped keys), from one snapshot (agents that do not exist
        are left out)."""
        out: dict[str, set[bytes]] = {}
        now = self.clock()
        with self.store.read() as view:
            for agent in agents:
                state = view.state(agent) if isinstance(agent, str) else None
                if state is not None:
                    out[agent] = {state.key_hash, *(k.key_hash for k in keys.live(state, now))}
        return out
