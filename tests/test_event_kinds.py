"""The event kinds are defined once (kungfud/event_kinds.py, D285): every other
list of them — the wire's ``webhook.set {events}``, the core's webhook
defaults, ``kungfu wake --on``, the console's ``/console/events.js`` — is
derived from that one, and no module under ``kungfud/``, Python or JavaScript,
writes a list of kinds of its own."""

from __future__ import annotations

import json
import re
import typing
from pathlib import Path

import msgspec
import pytest

from kungfud import event_kinds
from kungfud.agent_cli import wake
from kungfud.core import webhook
from kungfud.server.console import GENERATED
from kungfud.wire.args import WebhookEvent, WebhookSetArgs

PKG = Path(__file__).resolve().parent.parent / "kungfud"


@pytest.mark.rules("R8-20")
def test_R8_20_every_list_of_event_kinds_is_the_one_definition():
    kinds, default = event_kinds.KINDS, event_kinds.DEFAULT_KINDS
    assert typing.get_args(WebhookEvent) == kinds
    assert webhook.EVENTS == kinds and webhook.DEFAULT_EVENTS == default
    assert wake.KINDS == kinds and wake.DEFAULT_ON == default
    # webhook.set {events}: every kind, each at most once — no more entries than kinds.
    every = msgspec.json.encode({"url": "https://example.com/h", "events": list(kinds)})
    assert msgspec.json.decode(every, type=WebhookSetArgs).events == list(kinds)
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(msgspec.json.encode({"url": "https://x", "events": [*kinds, kinds[0]]}), type=WebhookSetArgs)
    # The console's module, served by the daemon from the same lists.
    js = GENERATED["events.js"].decode()
    consts = dict(re.findall(r"^export const (\w+) = (\[.*\]);$", js, re.M))
    assert json.loads(consts["EVENTS"]) == list(kinds) and json.loads(consts["DEFAULT_EVENTS"]) == list(default)


def _quoted_runs(text: str) -> list[list[str]]:
    """Every run of two or more quoted words separated by commas (a literal
    list or tuple), and every comma-joined word list inside one string."""
    runs = [re.findall(r"\w+", m) for m in re.findall(r"""(?:["']\w+["']\s*,\s*)+["']\w+["']""", text)]
    runs += [m.split(",") for m in re.findall(r"\w+(?:,\w+)+", text)]
    return runs


def test_no_module_keeps_a_list_of_event_kinds_of_its_own():
    kinds = set(event_kinds.KINDS)
    found = []
    for path in sorted([*PKG.rglob("*.py"), *PKG.rglob("*.js")]):
        if path == PKG / "event_kinds.py":
            continue
        for run in _quoted_runs(path.read_text()):
            if len(kinds.intersection(run)) >= 2:
                found.append(f"{path.relative_to(PKG.parent)}: {', '.join(run)}")
    assert found == [], "a list of event kinds outside kungfud/event_kinds.py:\n" + "\n".join(found)
    # The check sees a list when there is one.
    assert len(kinds.intersection(*_quoted_runs('EVENTS = ["turn", "outcome"]'))) == 2
