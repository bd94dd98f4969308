"""Issue 24's console part: the Account page shows, sets and clears the caller's
webhook (WIRE.md 1.2 "Webhooks": webhook.get / webhook.set / webhook.clear), the
signing secret shown once."""

from __future__ import annotations

import pytest

from tests.console.conftest import BROWSER_MISSING

if BROWSER_MISSING:
    pytest.skip(BROWSER_MISSING, allow_module_level=True)

from tests.console.conftest import Console, run  # noqa: E402
from tests.console.test_console import _read  # noqa: E402
from tests.e2e.helpers import register  # noqa: E402


@pytest.mark.rules("L2-4")
def test_console_account_sets_shows_and_clears_the_webhook(driver, make_daemon):
    d = make_daemon(config_text='[webhooks]\nallow_hosts = ["127.0.0.1:*"]\n')
    console = Console(driver, d)
    try:
        _, key = run(register(d.url, "Ada"))
        console.login(key)
        console.go("#/account")
        console.wait_text("#webhook-now", "No webhook")
        form = console.one("form.webhook-set")
        console.fill(form, "url", "http://127.0.0.1:9/kungfu-hook")
        console.one('input[name=events][value="task_offered"]', form).click()
        console.submit(form)
        secret = console.one("form.webhook-set output.secret").text
        assert secret.startswith("whsec_")
        console.wait_text("#webhook-now", "http://127.0.0.1:9/kungfu-hook")
        assert "task_offered" in console.text("#webhook-now")
        got = run(_read(d.url, key, "webhook.get", {}))
        assert got["url"] == "http://127.0.0.1:9/kungfu-hook"
        assert set(got["events"]) == {"turn", "opportunity", "outcome", "task_offered"}
        console.shot("account-webhook")
        # Shown once: a reload shows the webhook, not its secret.
        console.d.refresh()
        console.wait_text("#webhook-now", "http://127.0.0.1:9/kungfu-hook")
        assert secret not in console.text("body")
        # The form ticks the events registered (all four), not the default three (issue 37).
        ticked = {ev for ev in ("turn", "opportunity", "outcome", "task_offered")
                  if console.one(f'form.webhook-set input[name=events][value="{ev}"]').is_selected()}
        assert ticked == {"turn", "opportunity", "outcome", "task_offered"}
        console.submit(console.one("form.webhook-clear"))
        console.d.switch_to.alert.accept()  # "Stop sending …?"
        console.wait_text("#webhook-now", "No webhook")
        assert run(_read(d.url, key, "webhook.get", {}))["url"] is None
    finally:
        driver.get("about:blank")
