"""§7 Task in the pure core: contract and versions (§7.1), audience (§7.2), the
adoption limit (§7.4), Tasks referenced from Thread entries (§7.5), and the
project decisions on Tasks (DECISIONS.md B3, B17, B18, B20, B21, T3).

Engagements (§7.3), the §8 deliver/judge rows and the deactivation effects on
Tasks (R4-7, B1, B2) are in ``test_engagement.py``; both use :class:`TaskWorld`
below: a fake clock that moves only when a test says so, deterministic ids, and a
ledger that records accepted decisions the way the store does.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any, Callable

import pytest

from kungfud.core import agent as agent_core
from kungfud.core import deactivation
from kungfud.core.queries import state_query
from kungfud.core import engagement as eng_core
from kungfud.core import entry as entry_core
from kungfud.core import memory as memory_core
from kungfud.core import task as task_core
from kungfud.core import thread as thread_core
from kungfud.core import work
from kungfud.core.agent import Register, SetStatus
from kungfud.core.kinds import fold, of_state
from kungfud.core.context import Ctx, Limits, counting_ids
from kungfud.core.engagement import EngagementState
from kungfud.core.facts import Decision, EntryPosted
from kungfud.core.task_facts import (
    Contract,
    EngagementExpired,
    TaskAcceptingSet,
    TaskCreated,
    TaskRevised,
    contract_obj,
)
from kungfud.core.obligations import Obligation
from kungfud.core.pins import Pin
from kungfud.core.task import ContractSpec, ContractState, TaskState
from kungfud.errors import Hint, Rejection

from .helpers import T0, assert_well_formed, without_id

HOUR = 3600  # seconds: the test worlds' default delivery and judgment windows
CONTENT = b'{"output":"a haiku","criteria":"5-7-5 syllables"}'
REASON = b'{"reason":"the second line has 8 syllables"}'
GHOST_TASK = "tk_999999"
GHOST_ENGAGEMENT = "en_999999"
GHOST_AGENT = "ag_999999"


def contract(**kw: Any) -> ContractSpec:
    kw.setdefault("content", CONTENT)
    return ContractSpec(**kw)


def output(text: str = "an old silent pond") -> Pin:
    """A delivery pin that creates a private Memory of the taker from inline content."""
    return Pin(content=json.dumps({"text": text}).encode())


def ok(result: Decision | Rejection) -> Decision:
    assert isinstance(result, Decision), f"expected an accepted action, got {result}"
    return result


class TaskWorld:
    """Agents, Memories, Threads and Tasks decided one action at a time.

    ``now`` moves only through :meth:`advance`; every accepted decision is
    recorded (facts per object, in order; states as snapshots); a rejection is
    checked by :meth:`refuse` to leave the world exactly as it was (L2-3).
    """

    def __init__(self, limits: Limits | None = None) -> None:
        self.now = T0
        self.limits = limits or Limits(deliver_within_s=HOUR, judge_within_s=HOUR)
        self.ids = counting_ids()
        self.states: dict[str, Any] = {}
        self.log: list[Any] = []
        self.streams: dict[str, list[Any]] = defaultdict(list)
        self.tokens: dict[str, str] = {}
        self.admin = self.register("root", admin=True)

    # -- plumbing --------------------------------------------------------------
    def ctx(self, caller: str | None) -> Ctx:
        return Ctx(
            now=self.now,
            caller=None if caller is None else self.states[caller],
            new_id=self.ids,
            new_secret=lambda: "kf_secret",
            limits=self.limits,
            get=self.states.get,
            query=state_query(self.states),
        )

    def record(self, result: Decision | Rejection) -> Decision | Rejection:
        if isinstance(result, Decision):
            touched = {o for f in result.facts for o in f.objects()}
            assert set(result.states) == touched, (set(result.states), touched)
            for fact in result.facts:
                self.log.append(fact)
                for obj in fact.objects():
                    self.streams[obj].append(fact)
            self.states.update(result.states)
        return result

    def act(self, caller: str | None, decide: Callable[[Any, Ctx], Any], cmd: Any) -> Decision | Rejection:
        return self.record(decide(cmd, self.ctx(caller)))

    def advance(self, seconds: float) -> int:
        self.now += int(seconds * 1000)
        return self.now

    def snapshot(self) -> tuple[Any, ...]:
        return dict(self.states), len(self.log), {k: len(v) for k, v in self.streams.items()}

    def refuse(self, code: str, action: Callable[[], Any], next: str | None = None) -> Rejection:
        before = self.snapshot()
        r = action()
        assert isinstance(r, Rejection), f"expected {code}, got an accepted action {r}"
        assert_well_formed(r)
        assert r.code == code, f"expected {code}, got {r}"
        if next is not None:
            assert r.next == next, r
        assert self.snapshot() == before, "a rejected action changed the world (L2-3)"
        return r

    def fold(self, obj: str) -> Any:
        return fold(obj, self.streams[obj])

    def assert_folds(self) -> None:
        """L1-1: every state is the fold of its recorded facts."""
        assert set(self.streams) == set(self.states)
        for obj, facts in self.streams.items():
            assert fold(obj, facts) == self.states[obj], obj

    # -- reading ----------------------------------------------------------------
    def task(self, t: str) -> TaskState:
        return self.states[t]

    def eng(self, e: str) -> EngagementState:
        return self.states[e]

    def contract(self, t: str, v: int) -> ContractState:
        return self.states[contract_obj(t, v)]

    def obligations(self) -> dict[str, Obligation]:
        out: dict[str, Obligation] = {}
        for obj, state in self.states.items():
            for ob in of_state(obj, state):
                assert ob.obligation_id not in out, ob
                out[ob.obligation_id] = ob
        return out

    def obligations_of(self, agent: str) -> set[tuple[str, str]]:
        """(kind, engagement) of every open Task obligation ``agent`` holds."""
        return {
            (ob.obligation, ob.ref["engagement"])
            for ob in self.obligations().values()
            if ob.holder == agent and "engagement" in ob.ref
        }

    def terminal_facts(self, e: str) -> list[Any]:
        from kungfud.core.task_facts import EngagementDropped, EngagementJudged

        return [f for f in self.streams[e] if isinstance(f, (EngagementJudged, EngagementDropped, EngagementExpired))]

    # -- §4 ------------------------------------------------------------------------
    def register(self, name: str, *, admin: bool = False) -> str:
        content = json.dumps({"name": name}).encode()
        d = ok(self.record(agent_core.decide_register(Register(content, admin=admin), self.ctx(None), bootstrap=admin)))
        return d.result["agent"]

    def set_status(self, target: str, status: str) -> Decision | Rejection:
        cmd = SetStatus(target, status)  # type: ignore[arg-type]
        return self.record(deactivation.decide_set_status(self.states.get(target), cmd, self.ctx(self.admin)))

    def deactivate(self, target: str) -> Decision:
        return ok(self.set_status(target, "deactivated"))

    def reactivate(self, target: str) -> Decision:
        return ok(self.set_status(target, "active"))

    # -- §5 ------------------------------------------------------------------------
    def memory(self, by: str, *, versions: int = 1, public: bool = False) -> str:
        d = ok(self.record(memory_core.decide_create(memory_core.CreateMemory(b'{"v":1}'), self.ctx(by))))
        mid = d.result["memory"]
        for v in range(2, versions + 1):
            self.update(by, mid, json.dumps({"v": v}).encode())
        if public:
            cmd = memory_core.SetVisibility(mid, "public")
            ok(self.record(memory_core.decide_set_visibility(self.states[mid], cmd, self.ctx(by))))
        return mid

    def update(self, by: str, mid: str, content: bytes = b'{"v":"next"}') -> Decision:
        cmd = memory_core.Update(mid, content)
        return ok(self.record(memory_core.decide_update(self.states[mid], cmd, self.ctx(by))))

    def withdraw(self, by: str, mid: str) -> Decision:
        cmd = memory_core.Withdraw(mid)
        return ok(self.record(memory_core.decide_withdraw(self.states[mid], cmd, self.ctx(by))))

    # -- §6 (only what §7.5 needs) ------------------------------------------------
    def thread(self, governor: str, *members: str) -> str:
        t = ok(self.act(governor, thread_core.decide_create, thread_core.CreateThread())).result["thread"]
        for m in members:
            token = ok(self.act(governor, thread_core.decide_admit, thread_core.Admit(t, "speaker"))).result["token"]
            ok(self.act(m, thread_core.decide_join, thread_core.Join(token, t)))
        return t

    def post(self, by: str, t: str, *, task: str | None = None) -> Decision | Rejection:
        cmd = entry_core.Post(t, Pin(content=b'{"text":"see this task"}'), task=task)
        return self.act(by, entry_core.decide_post, cmd)

    # -- §7 ------------------------------------------------------------------------
    def create(self, by: str, audience: list[str] | None = None, **kw: Any) -> Decision | Rejection:
        return self.act(by, task_core.decide_create, task_core.CreateTask(audience, contract(**kw)))

    def new_task(self, by: str, audience: list[str] | None = None, **kw: Any) -> str:
        return ok(self.create(by, audience, **kw)).result["task"]

    def revise(self, by: str, t: str, **kw: Any) -> Decision | Rejection:
        return self.act(by, task_core.decide_revise, task_core.Revise(t, contract(**kw)))

    def pause(self, by: str, t: str) -> Decision | Rejection:
        return self.act(by, task_core.decide_set_accepting, task_core.SetAccepting(t, False))

    def resume(self, by: str, t: str) -> Decision | Rejection:
        return self.act(by, task_core.decide_set_accepting, task_core.SetAccepting(t, True))

    def take(self, by: str, t: str, deliver: Pin | None = None) -> Decision | Rejection:
        return self.act(by, eng_core.decide_take, work.Take(t, deliver))

    def engage(self, by: str, t: str, *, deliver: bool = False) -> str:
        """A new engagement of ``by`` on ``t`` (delivered too, when asked)."""
        d = ok(self.take(by, t, output() if deliver else None))
        assert d.result["existing"] is False
        return d.result["engagement"]

    def deliver(self, by: str, e: str, pin: Pin | None = None) -> Decision | Rejection:
        return self.act(by, eng_core.decide_deliver, work.Deliver(e, pin or output()))

    def drop(self, by: str, e: str) -> Decision | Rejection:
        return self.act(by, eng_core.decide_drop, work.Drop(e))

    def judge(self, by: str, e: str, verdict: str = "adopt", reason: bytes | None = None) -> Decision | Rejection:
        return self.act(by, eng_core.decide_judge, work.Judge(e, verdict, reason))  # type: ignore[arg-type]

    def reject(self, by: str, e: str, reason: bytes = REASON) -> Decision | Rejection:
        return self.judge(by, e, "reject", reason)

    def expire(self, t: str) -> Decision | Rejection:
        return self.act(None, eng_core.decide_expire, work.Expire(t))

    def live(self, t: str) -> dict[str, Any]:
        """Engagement -> LiveEngagement of ``t``'s non-terminal engagements (the ``live`` query, D271)."""
        return dict(state_query(self.states)("live", t))

    def open_by_agent(self, t: str) -> dict[str, str]:
        """Agent -> its open engagement on ``t`` (R7.3-8), from the ``live`` query."""
        return {le.agent: e for e, le in self.live(t).items()}

    def tick(self, seconds: float, *tasks: str) -> None:
        """Move the clock and record the expiries then due, as the actor does
        before any action on a Task (DECISIONS.md B5)."""
        self.advance(seconds)
        for t in tasks:
            if eng_core.due_expiries(state_query(self.states), t, self.now):
                ok(self.expire(t))


class Cast:
    """The agents of most tests."""

    def __init__(self, w: TaskWorld) -> None:
        self.alice = w.register("alice")  # author
        self.jude = w.register("jude")  # designated judge, when there is one
        self.bob = w.register("bob")  # takers
        self.carol = w.register("carol")
        self.dave = w.register("dave")
        self.eve = w.register("eve")  # an outsider


@pytest.fixture
def w() -> TaskWorld:
    return TaskWorld()


@pytest.fixture
def a(w: TaskWorld) -> Cast:
    return Cast(w)


def same_wording_as_ghost(r: Rejection, ident: str, ghost: Rejection, ghost_id: str) -> None:
    """R9-4, R12-9: worded exactly as for an id that never existed."""
    assert without_id(r, ident) == without_id(ghost, ghost_id)


# --- R7-1, R7-2: the requester ----------------------------------------------------


@pytest.mark.rules("R7-1", "R7.3-16")
def test_R7_1_without_a_designated_judge_the_author_judges(w, a):
    t = w.new_task(a.alice)
    e = w.engage(a.bob, t, deliver=True)
    assert w.eng(e).judge == a.alice
    for other in (a.bob, a.jude):
        w.refuse("forbidden" if other == a.bob else "not_found", lambda o=other: w.judge(o, e))
    d = ok(w.judge(a.alice, e))
    assert d.result["state"] == "adopted"


@pytest.mark.rules("R7-1", "B17", "R8-36")
def test_R7_1_B17_only_the_designated_judge_judges_not_the_author(w, a):
    t = w.new_task(a.alice, judge=a.jude)
    e = w.engage(a.bob, t, deliver=True)
    assert w.eng(e).judge == a.jude
    w.refuse("forbidden", lambda: w.judge(a.alice, e, "adopt"), "stop")  # the author cannot (B17)
    w.refuse("forbidden", lambda: w.reject(a.alice, e))
    w.refuse("forbidden", lambda: w.judge(a.bob, e))  # nor the engaged agent
    w.refuse("not_found", lambda: w.judge(a.eve, e))  # a stranger cannot even read it (R9-16)
    ok(w.judge(a.jude, e))
    assert w.eng(e).state == "adopted"


@pytest.mark.rules("R7-2")
def test_R7_2_the_designated_judge_must_be_an_existing_active_agent(w, a):
    w.refuse("bad_request", lambda: w.create(a.alice, judge=GHOST_AGENT), "revise")
    w.deactivate(a.jude)
    w.refuse("bad_request", lambda: w.create(a.alice, judge=a.jude))
    t = w.new_task(a.alice)
    w.refuse("bad_request", lambda: w.revise(a.alice, t, judge=GHOST_AGENT))
    w.refuse("bad_request", lambda: w.revise(a.alice, t, judge=a.jude))


@pytest.mark.rules("B17", "R7.2-6")
def test_B17_the_designated_judge_may_not_take_the_task(w, a):
    t = w.new_task(a.alice, judge=a.jude)
    r = w.refuse("forbidden", lambda: w.take(a.jude, t), "stop")
    assert "judge" in r.reason
    w.refuse("forbidden", lambda: w.take(a.jude, t, output()))
    # A restricted Task naming its own judge: still not takeable by it.
    t2 = w.new_task(a.alice, [a.jude, a.bob], judge=a.jude)
    w.refuse("forbidden", lambda: w.take(a.jude, t2))
    ok(w.take(a.bob, t2))


# --- R7.1 contract ---------------------------------------------------------------


@pytest.mark.rules("R7.1-1", "R7.1-4", "B3", "R7.1-12")
def test_R7_1_1_B3_missing_terms_take_defaults_and_both_deadlines_always_exist():
    w = TaskWorld(Limits())  # the daemon's built-in defaults
    a = Cast(w)
    d = ok(w.create(a.alice))
    t = d.result["task"]
    assert d.result == {"task": t, "contract_version": 1}
    c = w.contract(t, 1).contract
    assert (c.deliver_within_s, c.judge_within_s) == (86_400, 86_400)  # B3
    assert c.on_no_judgment == "undecided"  # R7.1-4: undecided if not stated
    assert (c.adoption_limit, c.judge, c.eligibility, c.readers, c.inputs) == (None, None, None, "parties", [])
    assert c.content == CONTENT
    taken = w.now
    e = w.engage(a.bob, t)
    assert w.eng(e).deliver_by == taken + 86_400_000
    w.advance(10)
    ok(w.deliver(a.bob, e))
    assert w.eng(e).judge_by == w.now + 86_400_000


@pytest.mark.rules("R7.1-1", "R7.1-7")
def test_R7_1_1_creation_records_every_term_in_one_fact(w, a):
    mid = w.memory(a.alice, versions=2)
    d = ok(
        w.create(
            a.alice,
            [a.bob, a.carol],
            inputs=[(mid, 1), (mid, 2)],
            deliver_within_s=60,
            judge_within_s=120,
            on_no_judgment="adopt",
            adoption_limit=2,
            judge=a.jude,
            eligibility=[a.bob],
            readers="public",
        )
    )
    t = d.result["task"]
    assert d.facts == [
        TaskCreated(
            at=w.now,
            by=a.alice,
            task=t,
            author=a.alice,
            audience=[a.bob, a.carol],
            contract=Contract(
                inputs=[(mid, 1), (mid, 2)],
                deliver_within_s=60,
                judge_within_s=120,
                content=CONTENT,
                on_no_judgment="adopt",
                adoption_limit=2,
                judge=a.jude,
                eligibility=[a.bob],
                readers="public",
            ),
        )
    ]
    s = w.task(t)
    assert (s.author, s.audience, s.latest, s.accepting, s.adoptions, s.limit) == (a.alice, [a.bob, a.carol], 1, True, 0, 2)
    assert s.judges == [a.jude]
    assert w.contract(t, 1) == ContractState(t, 1, d.facts[0].contract, w.now)
    w.assert_folds()


@pytest.mark.rules("R7.1-1")
def test_R7_1_1_oversized_contract_content_is_rejected():
    w = TaskWorld(Limits(max_content_bytes=len(CONTENT)))
    a = Cast(w)
    ok(w.create(a.alice))  # exactly the limit is fine
    w.refuse("too_large", lambda: w.create(a.alice, content=CONTENT + b" "), "revise")


@pytest.mark.rules("R7.1-2")
def test_R7_1_2_required_inputs_are_versions_of_the_authors_own_valid_memories(w, a):
    mine = w.memory(a.alice, versions=2)
    theirs_public = w.memory(a.bob, public=True)
    theirs_private = w.memory(a.bob)
    ok(w.create(a.alice, inputs=[(mine, 1), (mine, 2)]))
    # Another agent's Memory, even a public one: the author cannot guarantee it.
    r1 = w.refuse("bad_request", lambda: w.create(a.alice, inputs=[(theirs_public, 1)]), "revise")
    r2 = w.refuse("bad_request", lambda: w.create(a.alice, inputs=[(theirs_private, 1)]))
    r3 = w.refuse("bad_request", lambda: w.create(a.alice, inputs=[("me_999999", 1)]))
    # R12-9: a private Memory of another agent is worded as one that never existed.
    assert without_id(r2, theirs_private) == without_id(r3, "me_999999")
    assert without_id(r1, theirs_public) == without_id(r3, "me_999999")
    # Versions that do not exist.
    w.refuse("bad_request", lambda: w.create(a.alice, inputs=[(mine, 3)]))
    w.refuse("bad_request", lambda: w.create(a.alice, inputs=[(mine, 0)]))
    # A withdrawn Memory stops new references (R5-11).
    w.withdraw(a.alice, mine)
    w.refuse("conflict", lambda: w.create(a.alice, inputs=[(mine, 1)]))
    t = w.new_task(a.alice)
    w.refuse("conflict", lambda: w.revise(a.alice, t, inputs=[(mine, 1)]))


@pytest.mark.rules("R7.1-2", "R7.3-3", "R9-15")
def test_R7_1_2_bound_inputs_survive_the_authors_withdrawal(w, a):
    mid = w.memory(a.alice, versions=2)
    t = w.new_task(a.alice, inputs=[(mid, 1)])
    e = w.engage(a.bob, t)
    w.update(a.alice, mid)  # version 3: the engagement still binds version 1
    w.withdraw(a.alice, mid)
    assert w.eng(e).inputs == [(mid, 1)]
    ok(w.deliver(a.bob, e))
    ok(w.judge(a.alice, e))
    assert w.eng(e).inputs == [(mid, 1)]


@pytest.mark.rules("R7.1-3")
def test_R7_1_3_informative_references_carry_no_guarantee(w, a):
    other = w.memory(a.bob, public=True)
    content = json.dumps({"output": "x", "criteria": "y", "references": [{"memory": other, "version": 1}, "https://e.x"]})
    t = w.new_task(a.alice, content=content.encode())
    # The reference binds nothing: it is not an input of any engagement.
    e = w.engage(a.carol, t)
    assert w.eng(e).inputs == []
    w.withdraw(a.bob, other)  # the referenced material disappears…
    ok(w.deliver(a.carol, e))  # …and the engagement goes on unaffected
    ok(w.judge(a.alice, e))
    assert w.eng(e).state == "adopted"


@pytest.mark.rules("R7.1-7", "R7.1-8", "R7.1-9")
def test_R7_1_8_the_author_revises_into_a_new_version_the_old_one_is_fixed(w, a):
    t = w.new_task(a.alice, deliver_within_s=60)
    v1 = w.contract(t, 1)
    d = ok(w.revise(a.alice, t, deliver_within_s=120, content=b'{"output":"two haiku","criteria":"5-7-5"}'))
    assert d.result == {"task": t, "contract_version": 2}
    assert len(d.facts) == 1 and isinstance(d.facts[0], TaskRevised) and d.facts[0].version == 2
    assert set(d.states) == {t, contract_obj(t, 2)}  # version 1 is not touched
    assert w.contract(t, 1) == v1  # R7.1-7
    assert w.contract(t, 2).contract.deliver_within_s == 120
    assert w.task(t).latest == 2
    ok(w.revise(a.alice, t))
    assert w.task(t).latest == 3 and w.contract(t, 1) == v1
    w.assert_folds()


@pytest.mark.rules("R7.1-8", "R9-14", "R12-9")
def test_R7_1_8_only_the_author_revises(w, a):
    t = w.new_task(a.alice, judge=a.jude)
    w.refuse("forbidden", lambda: w.revise(a.bob, t), "stop")
    w.refuse("forbidden", lambda: w.revise(a.jude, t))
    r = w.new_task(a.alice, [a.bob])
    w.refuse("forbidden", lambda: w.revise(a.bob, r))  # a named agent reads it but may not revise
    hidden = w.refuse("not_found", lambda: w.revise(a.eve, r))  # an outsider cannot read it at all
    ghost = w.refuse("not_found", lambda: w.revise(a.eve, GHOST_TASK))
    same_wording_as_ghost(hidden, r, ghost, GHOST_TASK)
    w.deactivate(a.alice)
    w.refuse("forbidden", lambda: w.revise(a.alice, t))  # R4-1


@pytest.mark.rules("R7.1-9", "R7.3-3", "R7.3-20")
def test_R7_1_9_a_revision_binds_only_engagements_formed_after_it(w, a):
    m = w.memory(a.alice, versions=2)
    t = w.new_task(a.alice, inputs=[(m, 1)], deliver_within_s=60)
    e1 = w.engage(a.bob, t)
    ok(w.revise(a.alice, t, inputs=[(m, 2)], deliver_within_s=600))
    e2 = w.engage(a.carol, t)
    assert (w.eng(e1).contract_version, w.eng(e1).inputs) == (1, [(m, 1)])
    assert (w.eng(e2).contract_version, w.eng(e2).inputs) == (2, [(m, 2)])
    assert w.eng(e1).deliver_by == w.eng(e1).taken_at + 60_000
    assert w.eng(e2).deliver_by == w.eng(e2).taken_at + 600_000
    # R7.3-20: the revision cancelled nothing; the old engagement is still deliverable.
    assert w.eng(e1).state == "taken"
    ok(w.deliver(a.bob, e1))
    # Taking again returns the engagement as bound, not a rebinding (L2-6).
    again = ok(w.take(a.carol, t))
    assert again.result["engagement"] == e2 and again.result["contract_version"] == 2


@pytest.mark.rules("R7.1-10", "R7.4-2")
def test_R7_1_10_engagements_are_judged_against_their_bound_version(w, a):
    t = w.new_task(a.alice, judge=a.jude, adoption_limit=1, on_no_judgment="undecided")
    e1 = w.engage(a.bob, t, deliver=True)  # bound to v1: jude judges, limit 1
    ok(w.revise(a.alice, t, on_no_judgment="adopt"))  # v2: the author judges, no limit
    e2 = w.engage(a.carol, t, deliver=True)
    assert (w.eng(e1).judge, w.eng(e1).adoption_limit) == (a.jude, 1)
    assert (w.eng(e2).judge, w.eng(e2).adoption_limit, w.eng(e2).on_no_judgment) == (a.alice, None, "adopt")
    # The judge of v1 still judges v1's engagement; the author does not (B17).
    w.refuse("forbidden", lambda: w.judge(a.alice, e1))
    w.refuse("not_found", lambda: w.judge(a.jude, e2))  # jude is no party of e2
    ok(w.judge(a.alice, e2))  # v2 has no limit
    # e1's limit (1, from v1) counts every adoption of the Task: it is reached.
    w.refuse("conflict", lambda: w.judge(a.jude, e1))
    ok(w.reject(a.jude, e1))


@pytest.mark.rules("R7.1-10", "R7.1-4")
def test_R7_1_10_a_deadline_applies_the_bound_versions_no_judgment_result(w, a):
    t = w.new_task(a.alice, on_no_judgment="adopt", judge_within_s=100)
    e1 = w.engage(a.bob, t, deliver=True)
    ok(w.revise(a.alice, t, judge_within_s=100))  # v2: undecided (the default)
    e2 = w.engage(a.carol, t, deliver=True)
    w.tick(100, t)
    assert (w.eng(e1).state, w.eng(e2).state) == ("adopted", "undecided")
    assert w.task(t).adoptions == 1


@pytest.mark.rules("R7.1-11", "R7.3-25")
def test_R7_1_11_judgment_facts_never_change(w, a):
    t = w.new_task(a.alice)
    e1 = w.engage(a.bob, t, deliver=True)
    e2 = w.engage(a.carol, t, deliver=True)
    ok(w.judge(a.alice, e1))
    ok(w.reject(a.alice, e2))
    streams = {e: list(w.streams[e]) for e in (e1, e2)}
    states = {e: w.eng(e) for e in (e1, e2)}
    ok(w.revise(a.alice, t, on_no_judgment="adopt", adoption_limit=1))
    ok(w.pause(a.alice, t))
    w.deactivate(a.alice)
    w.advance(10 * HOUR)
    w.refuse("conflict", lambda: w.expire(t))  # nothing left to expire
    for e in (e1, e2):
        assert w.streams[e] == streams[e] and w.eng(e) == states[e]
    assert w.eng(e2).reason == REASON


@pytest.mark.rules("R7.1-12", "R7.3-4")
def test_R7_1_12_delivery_deadline_runs_from_taking_judgment_deadline_from_delivery(w, a):
    t = w.new_task(a.alice, deliver_within_s=50, judge_within_s=70)
    w.advance(3)
    e = w.engage(a.bob, t)
    taken = w.now
    assert w.eng(e).deliver_by == taken + 50_000
    assert w.eng(e).judge_by is None  # no judgment deadline before delivery
    w.advance(20)
    d = ok(w.deliver(a.bob, e))
    assert w.eng(e).judge_by == w.now + 70_000
    assert d.result["judge_by"] == "2025-11-30T12:01:33.000Z"  # T0 + 3 s + 20 s + 70 s


# --- R7.2 audience ----------------------------------------------------------------


@pytest.mark.rules("R7.2-1", "R7.2-4")
def test_R7_2_1_the_audience_is_fixed_at_creation_and_no_action_changes_it(w, a):
    o = w.new_task(a.alice)
    r = w.new_task(a.alice, [a.bob, a.carol])
    assert w.task(o).audience is None and w.task(r).audience == [a.bob, a.carol]
    # No command can carry an audience change: revise takes a contract only.
    assert set(task_core.Revise.__struct_fields__) == {"task", "contract"}
    assert "audience" not in ContractSpec.__struct_fields__
    for t in (o, r):
        ok(w.revise(a.alice, t, eligibility=[a.dave]))
        ok(w.pause(a.alice, t))
        ok(w.resume(a.alice, t))
    assert w.task(o).audience is None and w.task(r).audience == [a.bob, a.carol]
    w.refuse("not_found", lambda: w.take(a.dave, r))  # eligibility does not widen the audience


@pytest.mark.rules("R7.2-2", "R7.3-1", "R7.3-6")
def test_R7_2_2_any_active_stranger_takes_an_open_task(w, a):
    t = w.new_task(a.alice)
    for taker in (a.bob, a.carol, a.eve):
        d = ok(w.take(taker, t))
        e = d.result["engagement"]
        assert w.eng(e).state == "taken"  # open at once: no author approval (R7.3-6)
    w.deactivate(a.dave)
    w.refuse("forbidden", lambda: w.take(a.dave, t))  # R4-1: only an active agent acts


@pytest.mark.rules("R7.2-3", "R7.3-1", "R9-14", "R12-9")
def test_R7_2_3_a_restricted_task_is_taken_only_by_the_agents_it_names(w, a):
    t = w.new_task(a.alice, [a.bob, a.carol])
    ok(w.take(a.bob, t))
    ok(w.take(a.carol, t))
    hidden = w.refuse("not_found", lambda: w.take(a.eve, t), "stop")
    ghost = w.refuse("not_found", lambda: w.take(a.eve, GHOST_TASK))
    same_wording_as_ghost(hidden, t, ghost, GHOST_TASK)


@pytest.mark.rules("R7.2-3", "R12-9")
def test_R7_2_3_audience_names_agents_once_and_reveals_no_agents_existence(w, a):
    # D41: an id that is no agent is accepted exactly like an agent's (L4).
    with_ghost = ok(w.create(a.alice, [a.bob, GHOST_AGENT]))
    with_agent = ok(w.create(a.alice, [a.bob, a.carol]))
    assert with_ghost.result.keys() == with_agent.result.keys()
    t = with_ghost.result["task"]
    assert w.task(t).audience == [a.bob, GHOST_AGENT]
    w.refuse("not_found", lambda: w.take(a.carol, t))  # naming a ghost adds no one
    w.refuse("bad_request", lambda: w.create(a.alice, [a.bob, a.bob]))
    w.refuse("bad_request", lambda: w.create(a.alice, [a.bob], eligibility=[a.bob, a.bob]))


@pytest.mark.rules("R7.2-5")
def test_R7_2_5_offering_to_another_audience_is_a_new_task(w, a):
    t1 = w.new_task(a.alice, [a.bob])
    before = (w.task(t1), w.contract(t1, 1))
    t2 = w.new_task(a.alice, [a.carol])
    t3 = w.new_task(a.alice)
    assert len({t1, t2, t3}) == 3
    assert (w.task(t1), w.contract(t1, 1)) == before


@pytest.mark.rules("R7.2-6")
def test_R7_2_6_author_cannot_take_own_task(w, a):
    t = w.new_task(a.alice)
    r = w.refuse("forbidden", lambda: w.take(a.alice, t), "stop")
    assert "author" in r.reason
    w.refuse("forbidden", lambda: w.take(a.alice, t, output()))  # not by a combined action either (L2-2)
    # Nor by naming itself in a restricted audience.
    w.refuse("bad_request", lambda: w.create(a.alice, [a.alice, a.bob]))
    # Nor after a revision.
    ok(w.revise(a.alice, t))
    w.refuse("forbidden", lambda: w.take(a.alice, t))


# --- R7.4 adoption limit -------------------------------------------------------------


@pytest.mark.rules("R7.4-1", "R7.4-3", "R7.1-6")
def test_R7_4_3_engagements_and_deliveries_do_not_consume_the_limit(w, a):
    t = w.new_task(a.alice, adoption_limit=1)
    es = [w.engage(x, t, deliver=True) for x in (a.bob, a.carol, a.dave, a.eve)]  # 4 > 1
    assert w.task(t).adoptions == 0
    ok(w.reject(a.alice, es[0]))  # a rejection does not count either (R7.4-1)
    assert w.task(t).adoptions == 0
    ok(w.judge(a.alice, es[1]))
    assert w.task(t).adoptions == 1


@pytest.mark.rules("R7.4-2", "R7.1-6", "B21", "L5-1")
def test_R7_4_2_B21_the_limit_is_checked_at_adoption_first_come_first_served(w, a):
    t = w.new_task(a.alice, adoption_limit=2)
    es = [w.engage(x, t, deliver=True) for x in (a.bob, a.carol, a.dave)]
    ok(w.judge(a.alice, es[2]))
    ok(w.judge(a.alice, es[0]))
    # WIRE.md 1.1: the refusal points at the exit that remains, a rejection.
    r = w.refuse("conflict", lambda: w.judge(a.alice, es[1]), "revise")
    assert "limit" in r.reason
    assert r.hint == Hint("task.judge", {"engagement": es[1], "verdict": "reject"})
    assert w.task(t).adoptions == 2
    # The over-limit delivery still has an exit: rejection, or its deadline.
    ok(w.reject(a.alice, es[1]))
    assert [w.eng(e).state for e in es] == ["adopted", "rejected", "adopted"]


@pytest.mark.rules("B21", "R7.3-18", "R7.4-2")
def test_B21_no_judgment_adopt_at_the_deadline_ends_undecided_once_the_limit_is_reached(w, a):
    t = w.new_task(a.alice, adoption_limit=1, on_no_judgment="adopt", judge_within_s=100)
    e1 = w.engage(a.bob, t, deliver=True)
    e2 = w.engage(a.carol, t, deliver=True)
    ok(w.judge(a.alice, e1))
    w.tick(100, t)
    assert w.eng(e2).state == "undecided"
    assert w.streams[e2][-1].outcome == "undecided"
    assert w.task(t).adoptions == 1


@pytest.mark.rules("B21", "R7.4-2", "L4-3", "L5-1")
def test_B21_deadlines_due_together_adopt_in_the_order_they_fell_due(w, a):
    """Two adopt-on-no-judgment deliveries compete for the last slot at their
    deadlines; the clock is read late (both are due when expiries are recorded).
    First come first served (R7.4-2) means the deadline that passed first adopts."""
    t = w.new_task(a.alice, adoption_limit=1, on_no_judgment="adopt", judge_within_s=100)
    first_taken = w.engage(a.bob, t)  # lower id, but delivered later
    w.advance(1)
    first_due = w.engage(a.carol, t, deliver=True)  # judge_by = now + 100 s
    w.advance(5)
    ok(w.deliver(a.bob, first_taken))  # judge_by 5 s later than carol's
    assert w.eng(first_due).judge_by < w.eng(first_taken).judge_by
    w.tick(200, t)  # both due in one expiry pass
    assert w.eng(first_due).state == "adopted", "the deadline that passed first must take the last slot"
    assert w.eng(first_taken).state == "undecided"


@pytest.mark.rules("B21", "R7.4-2", "R7.3-25", "R10.2-4", "L4-3")
def test_B21_the_state_shown_before_expiries_are_recorded_respects_the_limit(w, a):
    """Readers show a passed deadline's result before its fact is recorded
    (``effective``, L4-3). That shown result must be the one later recorded: two
    adopt-on-no-judgment deliveries past their deadlines with one slot left cannot
    both be shown adopted (one of them will be recorded undecided)."""
    t = w.new_task(a.alice, adoption_limit=1, on_no_judgment="adopt", judge_within_s=100)
    e1 = w.engage(a.bob, t, deliver=True)
    w.advance(1)
    e2 = w.engage(a.carol, t, deliver=True)
    w.advance(200)  # both due; the expiries are not recorded yet
    shown = [eng_core.effective(w.eng(e), w.now, w.task(t), w.states.get, state_query(w.states)) for e in (e1, e2)]
    assert shown.count("adopted") <= 1, f"both shown adopted with adoption limit 1: {shown}"
    ok(w.expire(t))
    assert [w.eng(e).state for e in (e1, e2)] == shown  # what readers saw is what was recorded


@pytest.mark.rules("B21", "R7.4-2")
def test_B21_once_the_limit_is_reached_new_takes_are_conflict(w, a):
    t = w.new_task(a.alice, adoption_limit=1)
    e1 = w.engage(a.bob, t, deliver=True)
    e2 = w.engage(a.carol, t)  # taken before the limit is reached
    ok(w.judge(a.alice, e1))
    r = w.refuse("conflict", lambda: w.take(a.dave, t))
    assert "limit" in r.reason
    w.refuse("conflict", lambda: w.take(a.dave, t, output()))
    w.refuse("conflict", lambda: w.take(a.bob, t))  # bob's engagement ended: a new take is refused too
    # The existing engagement is untouched and still deliverable (R7.3-20…23).
    again = ok(w.take(a.carol, t))
    assert again.result["engagement"] == e2 and again.result["existing"] is True
    ok(w.deliver(a.carol, e2))
    w.refuse("conflict", lambda: w.judge(a.alice, e2))
    # Raising the limit by revision re-opens the Task for new takes.
    ok(w.revise(a.alice, t, adoption_limit=3))
    ok(w.take(a.dave, t))


# --- B18 eligibility, B20 pause, T3 readers ---------------------------------------


@pytest.mark.rules("B18", "R7.1-5", "R7.3-1")
def test_B18_eligibility_is_an_allow_list_named_agents_must_pass_it_too(w, a):
    o = w.new_task(a.alice, eligibility=[a.bob, a.eve])
    ok(w.take(a.bob, o))
    ok(w.take(a.eve, o))
    r = w.refuse("forbidden", lambda: w.take(a.carol, o), "stop")
    assert "eligib" in r.reason
    w.refuse("forbidden", lambda: w.take(a.carol, o, output()))
    restricted = w.new_task(a.alice, [a.bob, a.carol], eligibility=[a.bob])
    ok(w.take(a.bob, restricted))
    w.refuse("forbidden", lambda: w.take(a.carol, restricted))  # named, but not eligible
    w.refuse("not_found", lambda: w.take(a.eve, restricted))  # eligible elsewhere, not named here


@pytest.mark.rules("B20", "R7.3-21", "L2-7")
def test_B20_pause_and_resume_toggle_new_engagements_only(w, a):
    t = w.new_task(a.alice)
    e = w.engage(a.bob, t)
    d = ok(w.pause(a.alice, t))
    assert d.result == {"task": t, "accepting": False}
    assert d.facts == [TaskAcceptingSet(at=w.now, by=a.alice, task=t, accepting=False)]
    assert set(d.states) == {t}  # no engagement touched (R7.3-21)
    r = w.refuse("conflict", lambda: w.take(a.carol, t), "wait")
    assert "paused" in r.reason
    w.refuse("conflict", lambda: w.take(a.carol, t, output()))
    # Pausing a paused Task changes nothing: conflict, not a silent success.
    w.refuse("conflict", lambda: w.pause(a.alice, t))
    # Existing engagements go on.
    again = ok(w.take(a.bob, t))
    assert again.result["existing"] is True and again.result["engagement"] == e
    ok(w.deliver(a.bob, e))
    ok(w.judge(a.alice, e))
    d = ok(w.resume(a.alice, t))
    assert d.result == {"task": t, "accepting": True}
    w.refuse("conflict", lambda: w.resume(a.alice, t))
    ok(w.take(a.carol, t))
    w.assert_folds()


@pytest.mark.rules("B20")
def test_B20_only_the_author_pauses(w, a):
    t = w.new_task(a.alice, judge=a.jude)
    w.engage(a.bob, t)
    for other in (a.bob, a.jude, a.eve):
        w.refuse("forbidden", lambda o=other: w.pause(o, t))
    r = w.new_task(a.alice, [a.bob])
    w.refuse("not_found", lambda: w.pause(a.eve, r))
    w.refuse("not_found", lambda: w.pause(a.eve, GHOST_TASK))
    w.deactivate(a.alice)
    w.refuse("forbidden", lambda: w.pause(a.alice, t))


@pytest.mark.rules("T3", "R9-17")
def test_T3_readers_default_to_the_parties_and_bind_with_the_version(w, a):
    t = w.new_task(a.alice)
    e1 = w.engage(a.bob, t)
    ok(w.revise(a.alice, t, readers="public"))
    e2 = w.engage(a.carol, t)
    assert w.contract(t, 1).contract.readers == "parties"
    assert (w.eng(e1).readers, w.eng(e2).readers) == ("parties", "public")
    # A later revision does not change the readers of existing engagements.
    ok(w.revise(a.alice, t, readers="parties"))
    assert (w.eng(e1).readers, w.eng(e2).readers) == ("parties", "public")
    assert eng_core.is_party(w.eng(e1), a.alice) and eng_core.is_party(w.eng(e1), a.bob)
    assert not eng_core.is_party(w.eng(e1), a.carol) and not eng_core.is_party(w.eng(e1), a.eve)


# --- R9-13, R9-14: the contract layer predicate -----------------------------------


@pytest.mark.rules("R9-13", "R9-14")
def test_R9_14_who_reads_the_contract_layer(w, a):
    o = w.new_task(a.alice)
    r = w.new_task(a.alice, [a.bob], judge=a.jude)
    for x in (a.alice, a.bob, a.jude, a.eve):
        assert task_core.may_read_contract(w.task(o), x)
    assert [task_core.may_read_contract(w.task(r), x) for x in (a.alice, a.bob, a.jude, a.eve)] == [True, True, True, False]
    # A judge designated by a later version reads it too; an earlier judge keeps reading.
    ok(w.revise(a.alice, r, judge=a.dave))
    assert task_core.may_read_contract(w.task(r), a.dave) and task_core.may_read_contract(w.task(r), a.jude)


# --- R7.5 Tasks referenced from Thread entries -------------------------------------


@pytest.mark.rules("R7.5-1", "R7.5-3", "R7.5-4", "B22")
def test_R7_5_1_an_entry_references_a_task_and_changes_nothing_in_it(w, a):
    t = w.new_task(a.alice, judge=a.jude)
    e = w.engage(a.bob, t, deliver=True)
    th = w.thread(a.carol, a.dave, a.bob)
    task_before, eng_before = w.task(t), w.eng(e)
    obligations_before = w.obligations()
    d = ok(w.post(a.carol, th, task=t))
    posted = [f for f in d.facts if isinstance(f, EntryPosted)]
    assert len(posted) == 1 and posted[0].task == t
    # R7.5-3: no fact touches the Task, its contract or its engagements.
    assert not {o for o in d.states if o.startswith(("tk_", "en_"))}
    assert w.task(t) == task_before and w.eng(e) == eng_before
    # R7.5-4: no member's turn gains an obligation from the reference (the
    # entry may create a respond obligation by §6.3, nothing Task-shaped).
    new = {k: v for k, v in w.obligations().items() if k not in obligations_before}
    assert all(ob.obligation == "respond" for ob in new.values())
    assert {k: v for k, v in w.obligations().items() if "task" in v.ref} == {
        k: v for k, v in obligations_before.items() if "task" in v.ref
    }
    # The engaged agent, a member, posts about it too; still nothing in the Task.
    ok(w.post(a.bob, th, task=t))
    assert w.task(t) == task_before
    w.assert_folds()


@pytest.mark.rules("R7.5-1", "B22", "R9-14", "R12-9", "R10.2-7")
def test_R7_5_1_B22_a_restricted_task_is_referenced_only_by_those_who_read_it(w, a):
    r = w.new_task(a.alice, [a.bob])
    th = w.thread(a.carol, a.bob)
    hidden = w.refuse("not_found", lambda: w.post(a.carol, th, task=r))
    ghost = w.refuse("not_found", lambda: w.post(a.carol, th, task=GHOST_TASK))
    same_wording_as_ghost(hidden, r, ghost, GHOST_TASK)
    ok(w.post(a.bob, th, task=r))  # a named agent may reference it…
    assert not task_core.may_read_contract(w.task(r), a.carol)  # …which grants carol nothing
