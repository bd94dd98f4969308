"""A stateful property test of one Task (§7) against a plain model.

Four agents — the author, a designated judge and two takers — act at random on one
open Task: revise (changing the judge, the adoption limit, the no-judgment result,
deadlines and eligibility), pause/resume, take (with or without delivering),
deliver, drop, judge adopt/reject (with or without a reason), and the clock moves
with the Task's due deadlines recorded (``decide_expire``).

The model says what must happen to each action (accepted, or rejected with which
code). After every step: each state equals a fresh fold of its facts (L1-1); at
each adoption the Task's adoptions do not exceed the adoption limit of the adopted
engagement's bound version (R7.4-2, WIRE.md); every agent holds at most one open
engagement (R7.3-8); terminal states and their facts never change (R7.3-25,
R7.1-11); each ended engagement has exactly one terminal fact (R7.3-26, L5-2);
each open engagement implies exactly one obligation, held by the right agent
(R8-29…R8-39); a rejection leaves the world unchanged (L2-3).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from kungfud.core.engagement import TERMINAL
from kungfud.core.task_facts import EngagementExpired, EngagementJudged
from kungfud.core.obligations import ob_id

from .test_task import GHOST_ENGAGEMENT, REASON, TaskWorld, ok, output


RELEVANT = st.sampled_from([True, True, True, False])  # mostly act where the action can succeed


@dataclass
class Terms:
    """One contract version, as the model knows it."""

    judge: str | None
    limit: int | None
    on_no_judgment: str
    deliver_within_s: int
    judge_within_s: int
    eligibility: list[str] | None


@dataclass
class Eng:
    agent: str
    version: int
    judge: str
    limit: int | None
    on_no_judgment: str
    judge_within_s: int
    deliver_by: int
    state: str = "taken"
    judge_by: int | None = None

    @property
    def due(self) -> int:
        return self.deliver_by if self.state == "taken" else self.judge_by  # type: ignore[return-value]


class OneTask(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.w = w = TaskWorld()
        self.author = w.register("author")
        self.judge_agent = w.register("judge")
        self.t1 = w.register("taker1")
        self.t2 = w.register("taker2")
        self.agents = [self.author, self.judge_agent, self.t1, self.t2]
        terms = Terms(self.judge_agent, 2, "undecided", 20, 20, None)
        self.task = w.new_task(
            self.author, judge=terms.judge, adoption_limit=terms.limit, deliver_within_s=20, judge_within_s=20
        )
        self.versions = {1: terms}
        self.accepting = True
        self.engs: dict[str, Eng] = {}
        self.order: list[str] = []  # engagements in creation order
        self.adoptions = 0
        self.ended: dict[str, tuple[object, int]] = {}  # terminal engagement -> (state, number of its facts)

    # -- helpers ------------------------------------------------------------------
    @property
    def terms(self) -> Terms:
        return self.versions[max(self.versions)]

    def open_of(self, agent: str) -> str | None:
        found = [e for e, m in self.engs.items() if m.agent == agent and m.state not in TERMINAL]
        assert len(found) <= 1
        return found[0] if found else None

    def pick(self, ix: int, among: list[str] | None = None) -> str:
        """An engagement from ``among`` when it has any; else any engagement or
        the id that never existed."""
        ids = among if among else self.order + [GHOST_ENGAGEMENT]
        return ids[ix % len(ids)]

    def has_live(self) -> bool:
        return any(m.state not in TERMINAL for m in self.engs.values())

    def chosen(self, by: int, ix: int, relevant: bool) -> tuple[str, str]:
        """(caller, engagement): with ``relevant``, an engaged agent acting on its
        own undelivered engagement (when there is one); else anyone on anything."""
        live = [e for e in self.order if self.engs[e].state == "taken"]
        if relevant and live:
            e = self.pick(ix, live)
            return self.engs[e].agent, e
        return self.agents[by], self.pick(ix)

    def run(self, expected: str | None, action):
        if expected is not None:
            return self.w.refuse(expected, action)
        return ok(action())

    def adopted(self, e: str) -> None:
        m = self.engs[e]
        self.adoptions += 1
        m.state = "adopted"
        # R7.4-2 (WIRE.md): the bound version's limit, counted over every adoption.
        assert m.limit is None or self.adoptions <= m.limit, (e, m, self.adoptions)

    def party(self, e: str, who: str) -> bool:
        m = self.engs.get(e)
        return m is not None and who in (self.author, m.agent, m.judge)

    # -- rules ------------------------------------------------------------------------
    @rule(
        by=st.sampled_from([0, 0, 0, 1, 2, 3]),
        judge=st.sampled_from(["judge", None]),
        limit=st.sampled_from([None, 1, 2, 3]),
        onj=st.sampled_from(["undecided", "adopt"]),
        dw=st.sampled_from([10, 30]),
        jw=st.sampled_from([10, 30]),
        elig=st.sampled_from([None, "t1", "all"]),
    )
    def revise(self, by, judge, limit, onj, dw, jw, elig):
        caller = self.agents[by]
        judge_id = self.judge_agent if judge else None
        eligibility = {None: None, "t1": [self.t1], "all": list(self.agents[1:])}[elig]
        expected = None if caller == self.author else "forbidden"
        d = self.run(
            expected,
            lambda: self.w.revise(
                caller, self.task, judge=judge_id, adoption_limit=limit, on_no_judgment=onj,
                deliver_within_s=dw, judge_within_s=jw, eligibility=eligibility,
            ),
        )
        if expected is None:
            v = max(self.versions) + 1
            assert d.result == {"task": self.task, "contract_version": v}
            self.versions[v] = Terms(judge_id, limit, onj, dw, jw, eligibility)

    @rule(by=st.sampled_from([0, 0, 0, 1, 2, 3]), accepting=st.booleans())
    def set_accepting(self, by, accepting):
        caller = self.agents[by]
        if caller != self.author:
            expected = "forbidden"
        elif self.accepting == accepting:
            expected = "conflict"  # pausing a paused Task changes nothing (B20)
        else:
            expected = None
        act = self.w.resume if accepting else self.w.pause
        d = self.run(expected, lambda: act(caller, self.task))
        if expected is None:
            assert d.result == {"task": self.task, "accepting": accepting}
            assert set(d.states) == {self.task}  # never touches an engagement (R7.3-21)
            self.accepting = accepting

    @rule(by=st.sampled_from([2, 3, 2, 3, 1, 0]), deliver=st.booleans())
    def take(self, by, deliver):
        caller = self.agents[by]
        terms = self.terms
        mine = self.open_of(caller)
        if caller == self.author or caller == terms.judge:
            expected = "forbidden"  # R7.2-6, B17
        elif terms.eligibility is not None and caller not in terms.eligibility:
            expected = "forbidden"  # R7.1-5, B18
        elif mine is not None:
            # L2-6; combined with delivery: delivers on the open one unless delivered.
            expected = "conflict" if deliver and self.engs[mine].state != "taken" else None
        elif not self.accepting:
            expected = "conflict"  # B20
        elif terms.limit is not None and self.adoptions >= terms.limit:
            expected = "conflict"  # B21
        else:
            expected = None
        d = self.run(expected, lambda: self.w.take(caller, self.task, output() if deliver else None))
        if expected is not None:
            return
        e = d.result["engagement"]
        if mine is not None:
            assert e == mine and d.result["existing"] is True
            if not deliver:
                assert d.facts == [] and d.states == {}
        else:
            assert d.result["existing"] is False and e not in self.engs
            v = max(self.versions)
            self.engs[e] = Eng(
                caller, v, terms.judge or self.author, terms.limit, terms.on_no_judgment, terms.judge_within_s,
                self.w.now + terms.deliver_within_s * 1000,
            )
            self.order.append(e)
            assert d.result["contract_version"] == v
        if deliver:
            m = self.engs[e]
            m.state, m.judge_by = "delivered", self.w.now + m.judge_within_s * 1000
            assert d.result["state"] == "delivered"

    def _on_engagement(self, caller: str, e: str, allowed: set[str]) -> str | None:
        if not self.party(e, caller):
            return "not_found"  # R9-16, R12-9
        m = self.engs[e]
        if caller != m.agent:
            return "forbidden"  # R7.3-9, R7.3-23
        if m.state not in allowed:
            return "conflict"  # R7.3-13, R7.3-25
        return None

    @precondition(lambda self: self.has_live())
    @rule(by=st.sampled_from([2, 3, 2, 3, 1, 0]), ix=st.integers(0, 50), relevant=RELEVANT)
    def deliver(self, by, ix, relevant):
        caller, e = self.chosen(by, ix, relevant)
        expected = self._on_engagement(caller, e, {"taken"})
        d = self.run(expected, lambda: self.w.deliver(caller, e))
        if expected is None:
            m = self.engs[e]
            m.state, m.judge_by = "delivered", self.w.now + m.judge_within_s * 1000
            assert d.result["ended"] == [ob_id("deliver", e, caller)]

    @precondition(lambda self: self.has_live())
    @rule(by=st.sampled_from([2, 3, 2, 3, 1, 0]), ix=st.integers(0, 50), relevant=RELEVANT)
    def drop(self, by, ix, relevant):
        caller, e = self.chosen(by, ix, relevant)
        expected = self._on_engagement(caller, e, {"taken"})
        d = self.run(expected, lambda: self.w.drop(caller, e))
        if expected is None:
            self.engs[e].state = "dropped"
            assert d.result == {"engagement": e, "state": "dropped", "ended": [ob_id("deliver", e, caller)]}

    @precondition(lambda self: self.order)
    @rule(
        by=st.integers(0, 3), ix=st.integers(0, 50), relevant=RELEVANT, adopt=st.booleans(),
        with_reason=st.sampled_from([True, True, True, False]),
    )
    def judge(self, by, ix, relevant, adopt, with_reason):
        """``relevant``: the judge of a delivered engagement judges it."""
        delivered = [e for e in self.order if self.engs[e].state == "delivered"]
        if relevant and delivered:
            e = self.pick(ix, delivered)
            caller = self.engs[e].judge
        else:
            caller, e = self.agents[by], self.pick(ix)
        m = self.engs.get(e)
        if not self.party(e, caller):
            expected = "not_found"
        elif caller != m.judge:  # type: ignore[union-attr]
            expected = "forbidden"  # R7-1, B17
        elif m.state != "delivered":  # type: ignore[union-attr]
            expected = "conflict"
        elif not adopt and not with_reason:
            expected = "bad_request"  # R7.3-17
        elif adopt and m.limit is not None and self.adoptions >= m.limit:  # type: ignore[union-attr]
            expected = "conflict"  # R7.4-2
        else:
            expected = None
        reason = REASON if with_reason else None
        d = self.run(expected, lambda: self.w.judge(caller, e, "adopt" if adopt else "reject", reason))
        if expected is None:
            assert d.result["ended"] == [ob_id("judge", e, caller)]
            if adopt:
                self.adopted(e)
            else:
                self.engs[e].state = "rejected"
            assert d.result["state"] == self.engs[e].state

    @rule(seconds=st.sampled_from([1, 2, 3, 5, 8, 13, 30]))
    def advance(self, seconds):
        self.w.advance(seconds)
        now = self.w.now
        due = sorted(e for e, m in self.engs.items() if m.state not in TERMINAL and m.due <= now)
        if not due:
            self.w.refuse("conflict", lambda: self.w.expire(self.task))
            return
        d = ok(self.w.expire(self.task))
        assert d.result == {"task": self.task, "expired": [f.engagement for f in d.facts]}
        assert sorted(f.engagement for f in d.facts) == due
        for f in d.facts:
            assert isinstance(f, EngagementExpired) and f.by is None
            m = self.engs[f.engagement]
            if m.state == "taken":
                assert f.outcome == "timed_out"  # R7.3-10
                m.state = "timed_out"
            elif m.on_no_judgment == "undecided":
                assert f.outcome == "undecided"  # R7.1-4, R7.3-18
                m.state = "undecided"
            elif f.outcome == "adopted":
                self.adopted(f.engagement)  # checks the limit at this adoption
            else:
                # B21: a no-judgment adoption ends undecided only when the limit is reached.
                assert f.outcome == "undecided" and m.limit is not None and self.adoptions >= m.limit, (f, m)
                m.state = "undecided"

    # -- invariants -----------------------------------------------------------------------
    @invariant()
    def state_is_the_fold_of_the_facts(self):
        self.w.assert_folds()

    @invariant()
    def task_agrees_with_the_model(self):
        t = self.w.task(self.task)
        assert t.adoptions == self.adoptions == sum(m.state == "adopted" for m in self.engs.values())
        assert t.accepting == self.accepting and t.latest == max(self.versions)
        live = {e for e, m in self.engs.items() if m.state not in TERMINAL}
        assert set(self.w.live(self.task)) == live  # the live query (D271)
        assert self.w.open_by_agent(self.task) == {self.engs[e].agent: e for e in live}

    @invariant()
    def engagements_agree_with_the_model(self):
        assert {o for o in self.w.states if o.startswith("en_")} == set(self.engs)
        for e, m in self.engs.items():
            s = self.w.eng(e)
            assert (s.agent, s.contract_version, s.judge, s.adoption_limit, s.on_no_judgment) == (
                m.agent, m.version, m.judge, m.limit, m.on_no_judgment,
            )
            assert (s.state, s.deliver_by, s.judge_by) == (m.state, m.deliver_by, m.judge_by)

    @invariant()
    def at_most_one_open_engagement_per_agent(self):
        for agent in self.agents:
            open_ = [e for e, m in self.engs.items() if m.agent == agent and m.state not in TERMINAL]
            assert len(open_) <= 1, (agent, open_)

    @invariant()
    def terminal_states_never_change(self):
        for e, m in self.engs.items():
            if m.state not in TERMINAL:
                continue
            now = (self.w.eng(e), len(self.w.streams[e]))
            if e in self.ended:
                assert self.ended[e] == now, e
            else:
                self.ended[e] = now
            terminal = [f for f in self.w.streams[e] if isinstance(f, EngagementJudged) or type(f).__name__ in (
                "EngagementDropped", "EngagementExpired")]
            assert len(terminal) == 1, e  # R7.3-26, L5-2

    @invariant()
    def each_open_engagement_implies_one_obligation(self):
        expected = set()
        for e, m in self.engs.items():
            if m.state == "taken":
                expected.add((ob_id("deliver", e, m.agent), "deliver", m.agent))
            elif m.state == "delivered":
                expected.add((ob_id("judge", e, m.judge), "judge", m.judge))
        got = {(o.obligation_id, o.obligation, o.holder) for o in self.w.obligations().values()}
        assert got == expected


@pytest.mark.rules(
    "L1-1", "L2-3", "L2-6", "L5-2", "R7.1-9", "R7.1-10", "R7.1-11", "R7.3-8", "R7.3-25", "R7.3-26", "R7.4-2",
    "R8-29", "R8-35", "B17", "B20", "B21",
)
@pytest.mark.long_test(190)  # seconds on the shared 2-core machine (D405): handed out first under -n
def test_one_task_against_a_model():
    run_state_machine_as_test(
        OneTask, settings=settings(max_examples=2000, stateful_step_count=50, derandomize=True, deadline=None)
    )
