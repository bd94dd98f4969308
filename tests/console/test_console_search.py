"""Issue 37's console part: the search box in the header finds what the
logged-in agent may read (WIRE.md 1.3 "Search"), each hit linking to where it
is read, its snippet shown as text."""

from __future__ import annotations

import pytest

from tests.console.conftest import BROWSER_MISSING

if BROWSER_MISSING:
    pytest.skip(BROWSER_MISSING, allow_module_level=True)

from selenium.webdriver.common.keys import Keys  # noqa: E402

from kungfud.client import Client  # noqa: E402
from tests.console.conftest import Console, run  # noqa: E402
from tests.e2e.helpers import register  # noqa: E402


async def _write(url: str, key: str) -> tuple[str, str]:
    async with await Client.connect(url, key) as c:
        th = (await c.act("thread.create", {}))["thread"]
        await c.act("thread.post", {"thread": th, "content": {"text": "We decided: the <b>Kakapo</b> plan ships"}})
        m = (await c.act("memory.create", {"content": {"note": "kakapo budget"}}))["memory"]
        return th, m


@pytest.mark.rules("L6-3", "R12-9")
def test_console_search_box_finds_and_links_what_the_agent_may_read(driver, daemon):
    console = Console(driver, daemon)
    try:
        _, key = run(register(daemon.url, "Ada"))
        th, m = run(_write(daemon.url, key))
        _, other = run(register(daemon.url, "Eve"))
        console.login(key)
        box = console.one("#search-q")
        box.send_keys("KAKAPO", Keys.ENTER)
        console.wait(lambda: len(console.find("#search-results li")) == 3, what="three hits")
        hrefs = {a.get_attribute("href").split("#", 1)[1] for a in console.find("#search-results li a")}
        assert f"/threads/{th}" in hrefs and f"/memories/{m}" in hrefs
        assert "<b>Kakapo</b>" in console.text("#search-results")  # participant text stays text
        assert not console.find("#search-results b")
        console.shot("search")
        console.logout()
        console.login(other)
        console.go("#/search/kakapo")
        console.wait_text("#main", "Nothing you may read matches.")
    finally:
        driver.get("about:blank")
