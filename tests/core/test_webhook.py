"""WIRE.md 1.2 webhooks in the pure core: ``webhook.set`` replaces the
endpoint with a new key and ``since``; ``webhook.clear``; a deactivation and
a key reset clear it in the same decision; the state is the fold of the facts
(L1-1); only an active agent sets one (R4-1); literal private addresses refused."""

from __future__ import annotations

import pytest

from kungfud.core import deactivation, webhook
from kungfud.core.agent import ResetKey
from kungfud.core.webhook import ClearWebhook, SetWebhook, WebhookCleared, webhook_obj

from .world import World, ok, well_formed


@pytest.fixture
def w() -> World:
    w = World()
    w.root = w.register("root", admin=True)
    w.bob = w.register("bob")
    return w


def _set(w: World, by: str, url: str = "https://hooks.example.com/k", events=None):
    return w.act(by, webhook.decide_set, SetWebhook(url, events))


def test_set_replaces_with_a_new_key_and_the_state_is_the_fold(w):
    first = ok(_set(w, w.bob))
    assert first.result["secret"].startswith("whsec_") and first.result["events"] == ["turn", "opportunity", "outcome"]
    second = ok(_set(w, w.bob, "https://other.example.com/", ("outcome", "task_offered")))
    assert second.result["secret"] != first.result["secret"]
    state = w.states[webhook_obj(w.bob)]
    assert state.url == "https://other.example.com/" and state.events == ("outcome", "task_offered")
    assert state == w.fold(webhook_obj(w.bob))  # L1-1


@pytest.mark.rules("R4-1")
def test_only_an_active_agent_sets_one_and_private_literals_are_refused(w):
    ok(w.deactivate(w.root, w.bob))
    assert well_formed(_set(w, w.bob)).code == "forbidden"
    carol = w.register("carol")
    for url in ("https://169.254.169.254/", "http://hooks.example.com/", "https://[::1]/"):
        r = well_formed(_set(w, carol, url))
        assert r.code == "bad_request" and r.next == "revise"


def test_clear_and_the_clears_of_deactivation_and_key_reset(w):
    ok(_set(w, w.bob))
    ok(w.act(w.bob, webhook.decide_clear, ClearWebhook()))
    assert w.states[webhook_obj(w.bob)].url is None
    ok(_set(w, w.bob))
    d = ok(w.act(w.root, lambda c, ctx: deactivation.decide_reset_key(ctx.get(c.agent), c, ctx), ResetKey(w.bob)))
    assert [f.why for f in d.facts if isinstance(f, WebhookCleared)] == ["key_reset"]
    assert w.states[webhook_obj(w.bob)].url is None
    ok(_set(w, w.bob))
    d = ok(w.deactivate(w.root, w.bob))
    assert [f.why for f in d.facts if isinstance(f, WebhookCleared)] == ["deactivated"]
    assert w.states[webhook_obj(w.bob)] == w.fold(webhook_obj(w.bob))
    # Without an endpoint a reset records nothing more than the key.
    carol = w.register("carol")
    d = ok(w.act(w.root, lambda c, ctx: deactivation.decide_reset_key(ctx.get(c.agent), c, ctx), ResetKey(carol)))
    assert len(d.facts) == 1


def test_a_registration_name_gives_its_agent_and_nothing_else_does():
    # D272: the writer and the bus tell registrations (ag_….webhook) from agents by this one test.
    assert webhook.webhook_agent(webhook_obj("ag_01ABC")) == "ag_01ABC"
    for name in ("ag_01ABC", "th_01ABC", "*", "ag_01ABC.webhooks", ""):
        assert webhook.webhook_agent(name) is None
