"""A stateful property test of one Thread (§6), its entries and assignments, and
the §4 deactivation effects, through the pure core.

Four agents (root is the only admin; alice creates the Thread) act at random:
admit, void the grant, join (with the live or a stale token), leave, remove, set a
role, post (random reply_to, ask, assignment, pin), handle, retract, take (with or
without delivery), deliver, judge, drop, void, close, move the fake clock and run
``decide_expire``, and (root) deactivate or reactivate an agent.

Each action's acceptance is predicted by a small model written from the spec (not
from the core); codes are checked where the spec or DECISIONS.md fixes them: B10
rejections are ``bad_request`` naming the offending ids, a role already held is
``conflict`` (L2-7), and an action on an assignment whose deadline is due is refused
(L4-3). Accepted posts get the responders of R6.3-6…R6.3-10; membership ends and
closing have exactly the effects of §6.2 and §6.5.

Like the actors (B5), the machine records due expiries before leave, remove,
close and deactivation (the Thread's actor expires its own deadlines first; a
deactivation that reads a Thread whose ``next_due()`` has passed records that
Thread's expiries and decides again). Assignment actions are run without that,
so the core's own refusal of work whose deadline is due is exercised.

After every step: every object touched equals a fresh fold of its facts (and
all objects at teardown); each obligation ends at most once and never reappears
(L5-2), and every obligation that disappears is named in the action's ``ended``
(deadlines apart); an open Thread has a governor; a closed one has no pending
response and no open or taken assignment; terminal assignments never change;
derived views agree (Thread ↔ entries ↔ assignments ↔ memberships); rejected
actions change nothing.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from kungfud.core.assignment import TERMINAL, due_expiries
from kungfud.core.kinds import fold
from kungfud.core.facts import Decision, EntryPosted
from kungfud.core.obligations import ob_id
from kungfud.core.pins import Pin
from kungfud.core.thread import ThreadState
from kungfud.errors import Rejection

from .world import HOUR, World, spec, text, well_formed

SPEAKING = ("speaker", "governor")
ROLES = ("observer", "speaker", "governor")
WINDOWS = (None, 60, HOUR)
TICKS = (1, 59, 600, HOUR, 2 * HOUR)
REASON = b'{"reason":"not yet"}'

pytestmark = pytest.mark.rules(
    "L1-1", "L2-3", "L2-5", "L2-7", "L4-3", "L5-2", "R4-6", "R4-8", "R6.2-4", "R6.2-8", "R6.2-10", "R6.2-11",
    "R6.2-12", "R6.2-13", "R6.3-6", "R6.3-13", "R6.4-17", "R6.4-18", "R6.5-3", "R6.5-4", "R6.5-5", "R8-2",
)


class ThreadMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        w = self.w = World()
        self.root = w.register("root", admin=True)
        self.agents = [self.root] + [w.register(n) for n in ("alice", "bob", "carol")]
        self.t = w.create_thread(self.agents[1])
        self.mem: dict[tuple[str, str], str] = {}  # (agent, "private"|"public") -> Memory
        for a in self.agents:
            self.mem[(a, "private")] = w.memory(a)
            self.mem[(a, "public")] = w.memory(a, public=True)
        self.tokens: list[str] = []  # every token ever issued
        self.asgs: list[str] = []
        self.gone_obs: set[str] = set()  # obligations that ended
        self.reported: set[str] = set()  # obligation ids named in some `ended`
        self.terminal: dict[str, tuple[Any, int]] = {}  # assignment -> (state, facts) when it ended
        self.checked = 0  # objects already checked against their fold at least once
        for a in self.agents[2:]:
            self.do(lambda: w.admit(self.agents[1], self.t), accept=True)
            self.tokens.append(w.tokens[self.t])
            self.do(lambda: w.join(a, self.t), accept=True)

    @initialize(
        root_joins=st.booleans(),
        work=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2), st.integers(0, 3)), max_size=4),
        asks=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2)), max_size=3),
    )
    def some_work_in_progress(self, root_joins, work, asks):
        """Start from a Thread with work at every stage, so random steps meet it:
        (creator, addressee, stage) with stage 0 open, 1 taken, 2 delivered, 3 judged."""
        w, speakers = self.w, self.agents[1:]
        if root_joins:
            self.do(lambda: w.admit(self.agents[1], self.t), accept=True)
            self.tokens.append(w.tokens[self.t])
            self.do(lambda: w.join(self.root, self.t), accept=True)
        for c, to, stage in work:
            creator, addressee = speakers[c], speakers[to]
            d = self.do(lambda: w.post(creator, self.t, assign=spec(addressee)), accept=True)
            asg = d.result["assignment"]
            self.asgs.append(asg)
            if stage >= 1:
                self.do(lambda: w.take(addressee, asg, text("out") if stage >= 2 else None), accept=True, take_deliver=ob_id("deliver", asg, addressee))
            if stage >= 3:
                self.do(lambda: w.judge(creator, asg, "adopt"), accept=True)
        for author, asked in asks:
            if author != asked:
                self.do(lambda: w.post(speakers[author], self.t, ask=[speakers[asked]]), accept=True)

    # -- reading the world ------------------------------------------------------------------
    @property
    def th(self) -> ThreadState:
        return self.w.thread(self.t)

    def active(self, a: str) -> bool:
        return self.w.states[a].active

    def member(self, a: str) -> bool:
        return a in self.w.members(self.t)

    def role(self, a: str) -> str | None:
        m = self.w.members(self.t).get(a)
        return None if m is None else m.role

    def speaks(self, a: str) -> bool:
        return self.role(a) in SPEAKING

    def governs(self, a: str) -> bool:
        return self.role(a) == "governor"

    def due(self, a: str) -> bool:
        lv = self.w.live(self.t).get(a)
        return lv is not None and lv.due is not None and lv.due <= self.w.now

    def asg_id(self, ix: int, *states: str) -> str:
        """Mostly a live assignment in one of ``states``; sometimes any, or one that
        never existed."""
        fit = sorted(a for a, lv in self.w.live(self.t).items() if lv.state in states)
        if fit and ix % 4:
            return fit[ix % len(fit)]
        ids = self.asgs + ["as_999999"]
        return ids[ix % len(ids)]

    def has(self, *states: str) -> bool:
        return any(lv.state in states for lv in self.w.live(self.t).values())

    def pick(self, who: int, right: str | None) -> str:
        """``who`` 0…3 is that agent; 4…5 is the party the action is meant for."""
        return self.agents[who % 4] if who < 4 or right is None else right

    def a_governor(self) -> str | None:
        govs = self.w.governors(self.t)
        return govs[0] if govs else None

    def a_member(self, ix: int) -> str | None:
        members = sorted(self.w.members(self.t))
        return members[ix % len(members)] if members else None

    def entry_no(self, ix: int) -> int:
        return ix % (self.th.entries + 2)  # 0 and entries+1 do not exist

    # -- running one step ----------------------------------------------------------------------
    def do(self, action, accept: bool | None = None, code: str | None = None, take_deliver: str | None = None):
        """Run one action; check it against the expectation and the step invariants."""
        w = self.w
        before = w.snapshot()
        before_obs = w.obligations()
        before_states = dict(w.states)
        result = action()
        if isinstance(result, Rejection):
            well_formed(result)
            assert accept is not True, f"expected acceptance, got {result}"
            if code is not None:
                assert result.code == code, f"expected {code}, got {result}"
            assert w.snapshot() == before  # L2-3
            return None
        assert isinstance(result, Decision)
        assert accept is not False, f"expected a rejection, got {result.facts}"
        touched = {o for f in result.facts for o in f.objects()}
        assert set(result.states) == touched
        for obj in touched:  # L1-1: state = fold of its facts
            assert fold(obj, w.streams[obj]) == w.states[obj], obj
        for obj, old in before_states.items():
            if obj not in touched:
                assert w.states[obj] is old
        after_obs = w.obligations()
        gone = set(before_obs) - set(after_obs)
        new = set(after_obs) - set(before_obs)
        assert not (new & self.gone_obs), "an ended obligation reappeared (L5-2)"
        self.gone_obs |= gone
        reported = [x for x in result.result.get("ended", []) if x.startswith("ob_")]
        assert len(reported) == len(set(reported)), "an obligation ended twice in one action (L5-2)"
        assert not (set(reported) & self.reported), "an obligation ended twice (L5-2)"
        self.reported |= set(reported)
        assert not (set(reported) & set(after_obs))
        assert set(reported) <= set(before_obs) | ({take_deliver} if take_deliver else set())
        if not any(type(f).__name__ == "AssignmentExpired" for f in result.facts):
            assert gone <= set(reported), f"obligations ended silently: {gone - set(reported)}"
        # A deadline that was due wins: only an expiry ends that assignment (L4-3).
        for a in self.asgs:
            old = before_states.get(a)
            if old is not None and old.state not in TERMINAL and w.states[a].state != old.state:
                if self.due_in(before_states, a):
                    assert w.states[a].state in ("timed_out", "undecided"), (a, w.states[a].state)
        return result

    def due_in(self, states: dict, a: str) -> bool:
        lv = self.w.live(self.t, states).get(a)
        return lv is not None and lv.due is not None and lv.due <= self.w.now

    def expire_first(self) -> None:
        """What the Thread actor does before each command (B5)."""
        if self.w.due(self.t):
            self.do(lambda: self.w.expire(self.t), accept=True)

    # -- oracles --------------------------------------------------------------------------------
    def end_effects(self, before: dict, agent: str, closing: bool = False) -> None:
        """§6.2: what ending ``agent``'s membership must have done (R6.2-10…R6.2-14, B14)."""
        th_before: ThreadState = before[self.t]
        for n in self.w.thread_pending(self.t, before).get(agent, []):
            assert self.w.entry(self.t, n).responses[agent].state != "pending"
        for a in self.asgs:
            old, new = before.get(a), self.w.states[a]
            if old is None:
                continue
            if old.state in ("open", "taken") and (old.creator == agent or old.taker == agent):
                assert new.state == "voided", (a, new.state)
            elif old.state == "delivered" and old.creator == agent:
                assert new.state == "delivered" and new.forfeited
            elif old.state == "open" and old.to == agent and not closing:
                assert new.state == "open"  # B14

    def close_effects(self, before: dict) -> None:
        """§6.5: what closing must have done (R6.5-3…R6.5-8)."""
        assert self.th.status == "closed" and self.th.grant is None and self.w.thread_pending(self.t) == {}
        for a in self.asgs:
            old, new = before.get(a), self.w.states[a]
            if old is None:
                continue
            if old.state in ("open", "taken"):
                assert new.state == "voided"
            elif old.state == "delivered":
                assert new.state == "delivered" and new.judge_by == old.judge_by

    # -- §6.1, §6.2 ----------------------------------------------------------------------------------
    @rule(who=st.integers(0, 5), role=st.sampled_from(ROLES))
    def admit(self, who, role):
        a = self.pick(who, self.a_governor())
        accept = self.active(a) and self.governs(a) and self.th.open
        if self.do(lambda: self.w.admit(a, self.t, role), accept) is not None:
            self.tokens.append(self.w.tokens[self.t])
            assert self.th.grant is not None and self.th.grant.role == role

    @rule(who=st.integers(0, 5), go=st.integers(0, 2))
    def void_admission(self, who, go):
        if go:  # less often: a voided grant stops every join
            return
        a = self.pick(who, self.a_governor())
        accept = self.active(a) and self.governs(a) and self.th.open and self.th.grant is not None
        self.do(lambda: self.w.void_admission(a, self.t), accept)

    @rule(who=st.integers(0, 5), ix=st.integers(0, 20))
    def join(self, who, ix):
        outside = [x for x in self.agents if not self.member(x)]
        a = self.pick(who, outside[ix % len(outside)] if outside else None)
        ix = -1 if who >= 4 else ix  # the right party uses the live token
        if not self.tokens:
            return
        token = self.tokens[ix % len(self.tokens)] if ix >= 0 else self.tokens[-1]
        live = self.th.grant is not None and token == self.tokens[-1] and self.th.open
        was = self.w.members(self.t).get(a)
        d = self.do(lambda: self.w.join(a, self.t, token), self.active(a) and live)
        if d is not None and was is not None:
            assert d.facts == [] and self.w.members(self.t)[a] == was  # L2-5, B9
        elif d is not None:
            assert self.role(a) == self.th.grant.role and self.w.memberships(a)[self.t] == self.role(a)

    @rule(who=st.integers(0, 5), go=st.integers(0, 2))
    def leave(self, who, go):
        if go:  # less often: departures thin the Thread out
            return
        a = self.pick(who, self.a_member(who))
        self.expire_first()
        before = dict(self.w.states)
        accept = self.active(a) and self.member(a) and not (self.th.open and self.w.governors(self.t) == [a])
        if self.do(lambda: self.w.leave(a, self.t), accept) is not None:
            self.end_effects(before, a)
            assert not self.member(a)

    @rule(who=st.integers(0, 5), whom=st.integers(0, 3), go=st.integers(0, 2))
    def remove(self, who, whom, go):
        if go:
            return
        a, b = self.pick(who, self.a_governor()), self.agents[whom]
        self.expire_first()
        before = dict(self.w.states)
        accept = self.active(a) and self.governs(a) and self.th.open and a != b and self.member(b)
        if self.do(lambda: self.w.remove(a, self.t, b), accept) is not None:
            self.end_effects(before, b)

    @rule(who=st.integers(0, 5), whom=st.integers(0, 3), role=st.sampled_from(ROLES))
    def set_role(self, who, whom, role):
        a, b = self.pick(who, self.a_governor()), self.agents[whom]
        old = self.role(b)
        accept = (
            self.active(a) and self.governs(a) and self.th.open and old is not None and old != role
            and not (old == "governor" and self.w.governors(self.t) == [b])
        )
        pending = list(self.w.thread_pending(self.t).get(b, []))
        code = "conflict" if self.active(a) and self.governs(a) and self.th.open and old == role else None
        if self.do(lambda: self.w.set_role(a, self.t, b, role), accept, code) is not None:
            # R6.2-8: demotion to observer ends pending responses; nothing else does.
            assert self.w.thread_pending(self.t).get(b, []) == ([] if role == "observer" else pending)

    @rule(who=st.integers(0, 5), go=st.integers(0, 5))
    def close(self, who, go):
        if go:  # rarely: a closed Thread leaves little to explore
            return
        a = self.pick(who, self.a_governor())
        self.expire_first()
        before = dict(self.w.states)
        if self.do(lambda: self.w.close(a, self.t), self.active(a) and self.governs(a) and self.th.open) is not None:
            self.close_effects(before)

    # -- §6.3 ----------------------------------------------------------------------------------------
    @rule(
        who=st.integers(0, 5),
        reply=st.one_of(st.none(), st.integers(0, 40)),
        ask=st.one_of(st.none(), st.lists(st.integers(0, 3), max_size=3, unique=True)),
        assign=st.one_of(st.none(), st.tuples(st.integers(0, 3), st.sampled_from(WINDOWS), st.sampled_from(WINDOWS))),
        pin=st.sampled_from(["inline", "own", "public", "private"]),
        owner=st.integers(0, 3),
    )
    def post(self, who, reply, ask, assign, pin, owner):
        speakers = [m for m in self.agents if self.speaks(m)]
        a = self.pick(who, speakers[owner % len(speakers)] if speakers else None)
        reply_to = None if reply is None else self.entry_no(reply)
        asked = None if ask is None else [self.agents[i] for i in ask]
        sp = None if assign is None else spec(self.agents[assign[0]], deliver_within_s=assign[1], judge_within_s=assign[2])
        self.posting(a, reply_to, asked, sp, pin, self.agents[owner])

    @rule(
        who=st.integers(0, 3),
        to=st.integers(0, 3),
        reply=st.one_of(st.none(), st.integers(0, 40)),
        windows=st.tuples(st.sampled_from(WINDOWS), st.sampled_from(WINDOWS)),
    )
    def assign(self, who, to, reply, windows):
        """Mostly well-formed: a speaking member assigns a speaking member."""
        speakers = [m for m in self.agents if self.speaks(m)] or self.agents
        a, b = speakers[who % len(speakers)], speakers[to % len(speakers)]
        reply_to = None if reply is None else self.entry_no(reply)
        self.posting(a, reply_to, None, spec(b, deliver_within_s=windows[0], judge_within_s=windows[1]), "inline", a)

    def posting(self, a: str, reply_to: int | None, asked: list[str] | None, sp, pin: str, other: str) -> None:
        the_pin = {
            "inline": text("post"),
            "own": Pin(memory=self.mem[(a, "private")]),
            "public": Pin(memory=self.mem[(other, "public")]),
            "private": Pin(memory=self.mem[(other, "private")]),
        }[pin]
        bad_ask = [] if asked is None else [x for x in asked if x == a or not self.speaks(x)]
        valid_reply = reply_to is None or 1 <= reply_to <= self.th.entries
        accept = (
            self.active(a) and self.member(a) and self.th.open and self.speaks(a)
            and (pin != "private" or other == a) and valid_reply and not bad_ask
            and (sp is None or self.speaks(sp.to))
        )
        code = None
        if self.active(a) and self.member(a) and self.th.open and self.speaks(a) and (pin != "private" or other == a) and valid_reply and bad_ask:
            code = "bad_request"
        parent = self.w.entry(self.t, reply_to).author if reply_to and valid_reply else None
        expected = self.responders(a, parent, asked)
        was_pending = reply_to in self.w.thread_pending(self.t).get(a, []) if reply_to else False
        box: list[Any] = []
        d = self.do(lambda: box.append(self.w.post(a, self.t, the_pin, reply_to=reply_to, ask=asked, assign=sp)) or box[0], accept, code)
        if d is None:
            if code == "bad_request":  # B10: the rejection names every offending id
                named = box[0].reason.split("not:")[-1]
                assert all(x in named for x in bad_ask), box[0]
            return
        posted = next(f for f in d.facts if isinstance(f, EntryPosted))
        assert posted.responders == expected, (posted.responders, expected)
        assert posted.replied == was_pending
        if was_pending:
            assert self.w.response(self.t, reply_to, a) == "replied"  # R6.3-13
        if sp is not None:
            self.asgs.append(d.result["assignment"])

    def responders(self, author: str, parent: str | None, ask: list[str] | None) -> list[str]:
        """R6.3-6…R6.3-10, with B11."""
        if ask is not None:
            return ask
        if parent is not None and parent != author:
            return [parent] if self.speaks(parent) else []
        speakers = [m for m in self.w.members(self.t) if self.speaks(m)]
        return [m for m in speakers if m != author] if len(speakers) == 2 else []

    @rule(who=st.integers(0, 5), ix=st.integers(0, 40), note=st.booleans())
    def handle(self, who, ix, note):
        owed = sorted((r, n) for r, ns in self.w.thread_pending(self.t).items() for n in ns)
        if who >= 4 and owed:
            a, n = owed[ix % len(owed)]
        else:
            a, n = self.agents[who % 4], self.entry_no(ix)
        accept = self.active(a) and self.member(a) and n in self.w.thread_pending(self.t).get(a, [])
        self.do(lambda: self.w.handle(a, self.t, n, b'{"note":"seen"}' if note else None), accept)

    @rule(who=st.integers(0, 5), ix=st.integers(0, 40))
    def retract(self, who, ix):
        owed = sorted({n for ns in self.w.thread_pending(self.t).values() for n in ns})
        if who >= 4 and owed:
            n = owed[ix % len(owed)]
            a = self.w.entry(self.t, n).author
        else:
            a, n = self.agents[who % 4], self.entry_no(ix)
        exists = 1 <= n <= self.th.entries
        accept = (
            self.active(a) and self.member(a) and exists and self.w.entry(self.t, n).author == a
            and any(r.state == "pending" for r in self.w.entry(self.t, n).responses.values())
        )
        self.do(lambda: self.w.retract(a, self.t, n), accept)

    # -- §6.4 ----------------------------------------------------------------------------------------
    def on_assignment(self, a: str, asg: str, allowed: bool, run, take_deliver: str | None = None) -> None:
        """An assignment action: refused when its deadline is due (L4-3), else as modelled."""
        readable = self.active(a) and self.member(a) and asg in self.w.states
        if readable and self.due(asg):
            self.do(run, False, "conflict")
            return
        self.do(run, readable and allowed, take_deliver=take_deliver)

    @precondition(lambda self: self.has("open"))
    @rule(who=st.integers(0, 5), ix=st.integers(0, 30), deliver=st.sampled_from([None, None, "inline", "other"]))
    def take(self, who, ix, deliver):
        asg = self.asg_id(ix, "open")
        s = self.w.states.get(asg)
        a = self.pick(who, s and s.to)
        pin = None if deliver is None else (text("out") if deliver == "inline" else Pin(memory=self.mem[(self.root if a != self.root else self.agents[1], "public")]))
        allowed = s is not None and s.to == a and s.state == "open" and self.th.open and deliver != "other"
        extra = ob_id("deliver", asg, a) if deliver else None
        self.on_assignment(a, asg, allowed, lambda: self.w.take(a, asg, pin), extra)

    @precondition(lambda self: self.has("taken"))
    @rule(who=st.integers(0, 5), ix=st.integers(0, 30), pin=st.sampled_from(["inline", "own", "other"]))
    def deliver(self, who, ix, pin):
        asg = self.asg_id(ix, "taken")
        s = self.w.states.get(asg)
        a = self.pick(who, s and s.taker)
        other = self.root if a != self.root else self.agents[1]
        the_pin = {"inline": text("out"), "own": Pin(memory=self.mem[(a, "private")]), "other": Pin(memory=self.mem[(other, "public")])}[pin]
        allowed = s is not None and s.taker == a and s.state == "taken" and pin != "other"
        self.on_assignment(a, asg, allowed, lambda: self.w.deliver(a, asg, the_pin))

    @precondition(lambda self: self.has("delivered"))
    @rule(who=st.integers(0, 5), ix=st.integers(0, 30), adopt=st.booleans(), reason=st.booleans())
    def judge(self, who, ix, adopt, reason):
        asg = self.asg_id(ix, "delivered")
        s = self.w.states.get(asg)
        a = self.pick(who, s and s.creator)
        allowed = s is not None and s.creator == a and not s.forfeited and s.state == "delivered" and (adopt or reason)
        verdict = "adopt" if adopt else "reject"
        self.on_assignment(a, asg, allowed, lambda: self.w.judge(a, asg, verdict, REASON if reason else None))

    @precondition(lambda self: self.has("taken"))
    @rule(who=st.integers(0, 5), ix=st.integers(0, 30))
    def drop(self, who, ix):
        asg = self.asg_id(ix, "taken")
        s = self.w.states.get(asg)
        a = self.pick(who, s and s.taker)
        allowed = s is not None and s.taker == a and s.state == "taken"
        self.on_assignment(a, asg, allowed, lambda: self.w.drop(a, asg))

    @precondition(lambda self: self.has("open", "taken"))
    @rule(who=st.integers(0, 5), ix=st.integers(0, 30))
    def void(self, who, ix):
        asg = self.asg_id(ix, "open", "taken")
        s = self.w.states.get(asg)
        a = self.pick(who, s and s.creator)
        allowed = s is not None and s.creator == a and s.state in ("open", "taken")
        self.on_assignment(a, asg, allowed, lambda: self.w.void(a, asg))

    @precondition(lambda self: bool(self.w.live(self.t)))
    @rule(ix=st.integers(0, 30))
    def progress(self, ix):
        """The right party moves a live assignment on: take, deliver, or judge.
        (Hypothesis draws rules with fewer arguments more often; this one has one.)"""
        live = sorted(self.w.live(self.t))
        asg = live[ix % len(live)]
        s = self.w.states[asg]
        if s.state == "open":
            self.on_assignment(s.to, asg, self.th.open, lambda: self.w.take(s.to, asg))
        elif s.state == "taken":
            self.on_assignment(s.taker, asg, True, lambda: self.w.deliver(s.taker, asg, text("out")))
        elif s.state == "delivered":
            allowed = not s.forfeited
            self.on_assignment(s.creator, asg, allowed, lambda: self.w.judge(s.creator, asg, "reject", REASON))

    @rule(seconds=st.sampled_from(TICKS), run=st.booleans())
    def tick(self, seconds, run):
        self.w.advance(seconds)
        if run:
            due = self.w.due(self.t)
            before = dict(self.w.states)
            d = self.do(lambda: self.w.expire(self.t), bool(due), None if due else "conflict")
            if d is not None:
                for asg in due:
                    want = "timed_out" if before[asg].state == "taken" else "undecided"
                    assert self.w.states[asg].state == want

    # -- §4 ------------------------------------------------------------------------------------------
    @rule(whom=st.integers(0, 3), deactivate=st.booleans(), go=st.integers(0, 2))
    def set_status(self, whom, deactivate, go):
        if go and deactivate:
            return
        b = self.agents[whom]
        status = "deactivated" if deactivate else "active"
        self.expire_first()
        before = dict(self.w.states)
        was_member = self.member(b)
        accept = b != self.root and self.active(b) == deactivate
        if self.do(lambda: self.w.set_status(self.root, b, status), accept) is None or not deactivate:
            return
        assert self.w.memberships(b) == {} and not self.member(b)  # R4-6
        if was_member:
            th_before: ThreadState = before[self.t]
            closing = th_before.open and not [g for g in self.w.governors(self.t, before) if g != b]
            self.end_effects(before, b, closing)
            if closing:
                self.close_effects(before)  # R4-8
            else:
                assert self.th.status == th_before.status

    # -- invariants ----------------------------------------------------------------------------------
    @invariant()
    def an_open_thread_has_a_governor(self):
        if self.th.open:
            assert self.w.governors(self.t)

    @invariant()
    def a_closed_thread_owes_no_response_and_runs_no_work(self):
        if not self.th.open:
            assert self.w.thread_pending(self.t) == {} and self.th.grant is None
            assert all(lv.state == "delivered" for lv in self.w.live(self.t).values())
            for n in range(1, self.th.entries + 1):
                assert all(r.state != "pending" for r in self.w.entry(self.t, n).responses.values())
            for a in self.asgs:
                assert self.w.states[a].state not in ("open", "taken")

    @invariant()
    def terminal_assignments_never_change(self):
        for a in self.asgs:
            s = self.w.states[a]
            if a in self.terminal:
                assert (s, len(self.w.streams[a])) == self.terminal[a]
            elif s.state in TERMINAL:
                self.terminal[a] = (s, len(self.w.streams[a]))

    @invariant()
    def derived_views_agree(self):
        th = self.th
        # Thread.pending ↔ entries' pending responses; only speaking members owe one.
        owed = {
            (n, r)
            for n in range(1, th.entries + 1)
            for r, resp in self.w.entry(self.t, n).responses.items()
            if resp.state == "pending"
        }
        assert owed == {(n, r) for r, ns in self.w.thread_pending(self.t).items() for n in ns}
        assert all(len(ns) == len(set(ns)) for ns in self.w.thread_pending(self.t).values())
        assert all(self.speaks(r) for _, r in owed)
        # Thread.live ↔ non-terminal assignments.
        live = {a: self.w.states[a] for a in self.asgs if self.w.states[a].state not in TERMINAL}
        assert set(self.w.live(self.t)) == set(live)
        for a, s in live.items():
            lv = self.w.live(self.t)[a]
            assert (lv.state, lv.creator, lv.to, lv.taker, lv.forfeited) == (s.state, s.creator, s.to, s.taker, s.forfeited)
            assert lv.due == {"open": None, "taken": s.deliver_by, "delivered": s.judge_by}[s.state]
        # Memberships ↔ each agent's view of them; deactivated agents are members nowhere.
        for a in self.agents:
            role = self.role(a)
            assert self.w.memberships(a).get(self.t) == role
            if not self.active(a):
                assert role is None
        # Obligation holders are current members (deliver: the taker; judge: a creator whose right stands).
        for ob in self.w.obligations().values():
            assert self.member(ob.holder), ob

    def teardown(self):
        for obj in self.w.states:
            assert fold(obj, self.w.streams[obj]) == self.w.states[obj], obj
        assert set(self.w.streams) == set(self.w.states)


ThreadMachine.TestCase.settings = settings(max_examples=2000, stateful_step_count=50, derandomize=True, deadline=None)
TestThreadMachine = pytest.mark.long_test(270)(ThreadMachine.TestCase)  # seconds on the shared 2-core machine (D405): handed out first under -n
