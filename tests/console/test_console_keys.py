"""The Account page's scoped keys (WIRE.md 1.3 "Scoped keys"): create (the key
shown once), list, revoke; and names that look alike shown with their ids
(security review 4, item 4)."""

from __future__ import annotations

import pytest

from tests.console.conftest import BROWSER_MISSING

if BROWSER_MISSING:
    pytest.skip(BROWSER_MISSING, allow_module_level=True)

from kungfud.client import Client  # noqa: E402
from tests.console.conftest import Console, run  # noqa: E402
from tests.console.test_console import _read  # noqa: E402
from tests.e2e.helpers import register  # noqa: E402


async def _whoami(url: str, key: str) -> dict:
    async with await Client.connect(url, key) as c:
        return await c.read("agent.whoami")


@pytest.mark.rules("R4-3", "L2-4")
def test_console_account_creates_lists_and_revokes_scoped_keys(driver, daemon):
    console = Console(driver, daemon)
    try:
        _, key = run(register(daemon.url, "Ada"))
        console.login(key)
        console.go("#/account")
        console.wait_text("#keys-now", "No scoped keys")
        form = console.one("form.key-create")
        console.one('select[name=scope] option[value="worker"]', form).click()
        console.fill(form, "label", "box 7")
        console.submit(form)
        made = console.one("form.key-create output.secret").text
        assert made and made != key
        assert run(_whoami(daemon.url, made))["scope"] == "worker"
        console.wait_text("#keys-now", "box 7")
        assert "worker" in console.text("#keys-now") and made not in console.text("#keys-now")
        (item,) = run(_read(daemon.url, key, "agent.key.list", {}))["items"]
        # shown once: a reload lists the key, never the key itself
        console.d.refresh()
        console.wait_text("#keys-now", item["key_id"])
        assert made not in console.text("body")
        console.submit(console.one(f'#keys-now tr[data-key="{item["key_id"]}"] form.key-revoke'))
        console.d.switch_to.alert.accept()
        console.wait_text("#keys-now", "No scoped keys")
        assert run(_read(daemon.url, key, "agent.key.list", {}))["items"] == []
    finally:
        driver.get("about:blank")


@pytest.mark.rules("R9-9", "L6-4")
def test_console_shows_names_that_look_alike_with_their_ids(driver, daemon):
    """"alice" and "аlice" (a Cyrillic а) in one Thread: both are shown with
    their ids, not one click away; "bob", like nobody, stays a name."""
    from tests.e2e.thread_kit import agents, close_all, new_thread

    async def setup():
        alice, fake, bob = await agents(daemon.url, "alice", "\u0430lice", "bob")
        t = await new_thread(alice, (fake, "speaker"), (bob, "speaker"))
        await close_all(alice, fake, bob)  # their ids and keys are all the page needs
        return alice, fake, bob, t

    alice, fake, bob, thread = run(setup())
    console = Console(driver, daemon)
    try:
        console.login(bob.key)
        console.go(f"#/threads/{thread}")
        for who in (alice, fake):
            member = console.one(f'#thread-side [data-member="{who.id}"]')
            console.wait(lambda: who.id in member.text, what=f"{who.id} shown beside its look-alike name")
        me = console.one(f'#thread-side [data-member="{bob.id}"]')
        assert "bob" in me.text and bob.id not in me.text
    finally:
        driver.get("about:blank")
