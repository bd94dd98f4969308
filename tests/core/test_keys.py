"""Scoped keys in the pure core (WIRE.md 1.3 "Scoped keys"): what each scope
allows, creation within the limit of live keys, expiry, revocation, and the
new main key or deactivation that revokes them all."""

from __future__ import annotations

import hashlib

import msgspec
import pytest

from kungfud import wire
from kungfud.core import agent as agent_core
from kungfud.core import keys
from kungfud.core.agent import RotateKey, key_revoked

from .helpers import World, accepted, rejected


class _World(World):
    """Each key a different secret (World's are all one)."""

    made = 0

    def ctx(self, caller):
        ctx = super().ctx(caller)
        self.made += 1
        secret = f"kf_secret_{self.made}"
        return msgspec.structs.replace(ctx, new_secret=lambda: secret)


@pytest.fixture
def w() -> World:
    w = _World()
    w.admin = w.register("admin", admin=True)
    w.alice = w.register("alice")
    return w


def _create(w: World, scope: str = "worker", expires_in_s: int | None = None, label: str = "ci"):
    return w.record(keys.decide_create(keys.CreateKey(scope, label, expires_in_s), w.ctx(w.alice)))  # type: ignore[arg-type]


def _hash(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()


@pytest.mark.rules("R4-3")
def test_each_scope_allows_exactly_its_ops():
    """read: every read; worker: reads and doing offered work; a2a: the a2a.*
    ops (present and future); agent.whoami for all; nothing else."""
    worker_actions = {
        "thread.post", "thread.handle", "assignment.take", "assignment.deliver", "assignment.drop",
        "task.take", "task.deliver", "task.drop",
    }
    for op, spec in wire.OPS.items():
        if op in ("hello", "agent.register"):
            continue
        a2a = op.startswith("a2a.")  # the a2a scope's actions; its reads are "every read" too (D376)
        assert keys.allows("read", op, spec.kind) == (spec.kind == "R" or op == "agent.whoami"), op
        assert keys.allows("worker", op, spec.kind) == (spec.kind == "R" or op in worker_actions), op
        assert keys.allows("a2a", op, spec.kind) == (a2a or op == "agent.whoami"), op
    for op, kind in (("a2a.send", "A"), ("a2a.task", "R"), ("a2a.some_future_op", "A")):
        assert keys.allows("a2a", op, kind)
        # an a2a.* action is the a2a scope's alone; an a2a.* read is "every read" of read and worker (D376)
        assert keys.allows("read", op, kind) == keys.allows("worker", op, kind) == (kind == "R")


@pytest.mark.rules("R4-3")
def test_a_scoped_key_is_refused_forbidden_naming_its_scope(w):
    d = accepted(_create(w, "read"))
    state = w.states[w.alice]
    h = _hash(d.result["key"])
    r = key_revoked(state, h, w.now, "memory.create")
    assert r is not None and r.code == "forbidden" and "'read' scope" in r.reason and "memory.create" in r.reason
    assert r.next == "stop"
    assert key_revoked(state, h, w.now, "agent.whoami") is None
    assert key_revoked(state, state.key_hash, w.now, "memory.create") is None  # the main key keeps every right


@pytest.mark.rules("R4-3", "L3-6")
def test_create_shows_the_key_once_stores_its_hash_and_lists_never_a_key(w):
    d = accepted(_create(w, "worker", expires_in_s=60, label="box 7"))
    assert set(d.result) == {"key_id", "key", "scope", "expires_at"}
    assert d.result["key_id"].startswith("ky_") and d.result["scope"] == "worker"
    (stored,) = w.states[w.alice].scoped
    assert stored.key_hash == _hash(d.result["key"]) and d.result["key"].encode() not in repr(w.states).encode()
    listed = keys.key_list(w.states[w.alice], w.now)["items"]
    assert listed == [{
        "key_id": d.result["key_id"], "scope": "worker", "label": "box 7",
        "created_at": listed[0]["created_at"], "expires_at": d.result["expires_at"],
    }]
    assert "key" not in listed[0]
    used = keys.key_list(w.states[w.alice], w.now, {d.result["key_id"]: w.now + 1_000})["items"][0]
    assert used["last_used_at"] > used["created_at"]


@pytest.mark.rules("R12-11")
def test_at_most_twenty_live_keys_and_expired_ones_do_not_count(w):
    for _ in range(keys.MAX_LIVE - 1):
        accepted(_create(w))
    accepted(_create(w, expires_in_s=30))  # each action is a second after the last
    before = w.snapshot()
    r = rejected(_create(w), "conflict")
    assert str(keys.MAX_LIVE) in r.reason and r.hint is not None and r.hint.op == "agent.key.list"
    assert w.snapshot() == before
    w.now += 30_000  # the short-lived key expired: room for one more, and it is pruned
    accepted(_create(w))
    assert len(w.states[w.alice].scoped) == keys.MAX_LIVE


@pytest.mark.rules("R4-3")
def test_an_expired_or_revoked_key_is_refused_like_an_unknown_one(w):
    short = accepted(_create(w, expires_in_s=5))
    kept = accepted(_create(w))
    state = w.states[w.alice]
    assert key_revoked(state, _hash(short.result["key"]), w.now, "thread.post") is None
    assert key_revoked(state, _hash(short.result["key"]), w.now + 5_000, "thread.post") == keys.KEY_REVOKED
    assert keys.key_list(state, w.now + 5_000)["items"][0]["key_id"] == kept.result["key_id"]
    d = accepted(w.record(keys.decide_revoke(keys.RevokeKey(kept.result["key_id"]), w.ctx(w.alice))))
    assert d.result == {"key_id": kept.result["key_id"], "revoked": True}
    assert key_revoked(w.states[w.alice], _hash(kept.result["key"]), w.now, "thread.post") == keys.KEY_REVOKED
    rejected(keys.decide_revoke(keys.RevokeKey(kept.result["key_id"]), w.ctx(w.alice)), "not_found")


@pytest.mark.rules("R4-1", "R4-3")
@pytest.mark.parametrize("how", ["rotate", "reset", "deactivate"])
def test_a_new_main_key_or_a_deactivation_revokes_every_scoped_key(w, how):
    made = [accepted(_create(w, scope)).result["key"] for scope in keys.SCOPES]
    if how == "rotate":
        accepted(w.record(agent_core.decide_rotate_key(RotateKey(), w.ctx(w.alice))))
    elif how == "reset":
        from kungfud.core.deactivation import decide_reset_key

        accepted(w.record(decide_reset_key(w.states[w.alice], agent_core.ResetKey(w.alice), w.ctx(w.admin))))
    else:
        accepted(w.set_status(w.admin, w.alice, "deactivated"))
        accepted(w.set_status(w.admin, w.alice, "active"))  # reactivation brings none back
    state = w.states[w.alice]
    assert state.scoped == ()
    for secret in made:
        assert key_revoked(state, _hash(secret), w.now, "agent.whoami") == keys.KEY_REVOKED
    assert w.fold(w.alice) == state  # the facts alone give the same state


@pytest.mark.rules("R4-1")
def test_a_deactivated_agent_may_not_create_keys(w):
    accepted(w.set_status(w.admin, w.alice, "deactivated"))
    rejected(_create(w), "forbidden")
