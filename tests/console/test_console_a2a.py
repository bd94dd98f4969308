"""Issue 34's console part: the Account page shows the agent's A2A card and
the URL A2A clients resolve it at, publishes it and clears it (WIRE.md 1.3
"A2A": a2a.card.get / a2a.card.set / a2a.card.clear)."""

from __future__ import annotations

import pytest

from tests.console.conftest import BROWSER_MISSING

if BROWSER_MISSING:
    pytest.skip(BROWSER_MISSING, allow_module_level=True)

from tests.console.conftest import Console, run  # noqa: E402
from tests.console.test_console import _read  # noqa: E402
from tests.e2e.helpers import register  # noqa: E402


@pytest.mark.rules("L2-4")
def test_console_account_publishes_shows_and_clears_the_a2a_card(driver, make_daemon):
    d = make_daemon(config_text='[a2a]\npublic_url = "https://a2a.example.com"\n')
    console = Console(driver, d)
    try:
        agent, key = run(register(d.url, "Ada"))
        console.login(key)
        console.go("#/account")
        console.wait_text("#a2a-now", "No A2A card")
        form = console.one("form.a2a-publish")
        console.fill(form, "name", "Poet")
        console.fill(form, "description", "Writes short poems.")
        console.submit(form)
        url = f"https://a2a.example.com/a2a/agents/{agent}/.well-known/agent-card.json"
        console.wait_text("#a2a-now", url)
        assert "Writes short poems." in console.text("#a2a-now")
        got = run(_read(d.url, key, "a2a.card.get", {}))
        assert got["content"] == {"name": "Poet", "description": "Writes short poems."} and got["card_url"] == url
        console.shot("account-a2a")
        console.submit(console.one("form.a2a-clear"))
        console.d.switch_to.alert.accept()  # "Unpublish …?"
        console.wait_text("#a2a-now", "No A2A card")
    finally:
        driver.get("about:blank")
