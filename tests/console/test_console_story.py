"""Issue 26 item 4 and item 3's console part: the whole story of a Thread in the
console — ended assignments with their delivery, verdict and reason; outcomes
rows that say what the work was and open a page that shows it; watching agents'
work as an observer (two clicks for the governor, one for the watcher); names
beside ids; an unknown route says "not found"; a Task page titled by its
contract; no favicon 404. Driven in a headless Chromium (tests/console/conftest.py)."""

from __future__ import annotations

import pytest

from tests.console.conftest import BROWSER_MISSING

if BROWSER_MISSING:
    pytest.skip(BROWSER_MISSING, allow_module_level=True)

from kungfud.client import Client  # noqa: E402
from tests.console.conftest import run  # noqa: E402
from tests.console.test_console import _act, _pair, _read  # noqa: E402
from tests.e2e.helpers import register  # noqa: E402


async def _story(url: str) -> dict:
    """Ada governs "Release 2.4" with Bo: one assignment rejected with a reason,
    one adopted, one still open."""
    ada, bo, thread = await _pair(url)
    made = []
    async with await Client.connect(url, ada["key"]) as a, await Client.connect(url, bo["key"]) as b:
        for output, criteria in (("Release notes", "Covers every merged change"),
                                 ("Changelog entry", "One line per change"),
                                 ("Upgrade guide", "Steps for each breaking change")):
            posted = await a.act("thread.post", {
                "thread": thread, "content": {"text": f"{output}, please"}, "ask": [],
                "assign": {"to": bo["id"], "content": {"output": output, "criteria": criteria}},
            })
            made.append(posted["assignment"])
        await b.act("assignment.take", {"assignment": made[0], "deliver": {"content": {"text": "Notes: 14 changes"}}})
        await a.act("assignment.judge", {"assignment": made[0], "verdict": "reject",
                                         "content": {"reason": "Misses the two breaking changes"}})
        await b.act("assignment.take", {"assignment": made[1], "deliver": {"content": {"text": "- fixed fsync"}}})
        await a.act("assignment.judge", {"assignment": made[1], "verdict": "adopt"})
    return {"ada": ada, "bo": bo, "thread": thread, "rejected": made[0], "adopted": made[1], "open": made[2]}


@pytest.mark.rules("R9-9", "R9-11", "R6.4-26", "R6.2-1")
def test_console_thread_shows_ended_assignments_and_an_observer_watches_it(console, daemon):
    s = run(_story(daemon.url))
    ada, bo, thread = s["ada"], s["bo"], s["thread"]
    # The governor: the Thread's assignments, live and ended, with delivery, verdict and reason.
    console.login(ada["key"])
    console.go(f"#/threads/{thread}")
    rejected = console.one(f'#thread-side [data-assignment="{s["rejected"]}"]')
    console.wait(lambda: "Misses the two breaking changes" in rejected.text, what="the rejection's reason")
    assert "Notes: 14 changes" in rejected.text and "rejected by" in rejected.text.lower() and "Release notes" in rejected.text
    adopted = console.one(f'#thread-side [data-assignment="{s["adopted"]}"]')
    assert "- fixed fsync" in adopted.text and "adopted by" in adopted.text.lower()
    assert console.one(f'#thread-side [data-assignment="{s["open"]}"]').get_attribute("data-state") == "open"
    console.shot("thread-assignments", at=rejected)
    # Click 1: invite an observer; click 2: copy the token.
    console.submit(console.one("form.invite-observer"))
    box = console.one("form.invite-observer .secret-box")
    token = console.one("output.secret", box).text
    assert token.startswith("kt_")
    console.one("button", box).click()
    console.logout()
    # The admin's key reads nothing of this Thread (§9): the Threads page says how to watch.
    console.login(daemon.admin_key)
    console.go(f"#/threads/{thread}")
    console.wait_text("#main", "not_found")
    console.go("#/threads")
    console.wait_text("#watch-help", "observer token")
    form = console.one("form.join")
    console.fill(form, "token", token)
    console.submit(form)  # the one click: joined, and on the Thread's page at once
    console.wait(lambda: console.d.execute_script("return location.hash") == f"#/threads/{thread}", what="the Thread opened")
    console.wait_text("#thread-head", "you are observer")
    console.wait_text("#post", "Observers read but do not post.")
    rejected = console.one(f'#thread-side [data-assignment="{s["rejected"]}"]')
    console.wait(lambda: "Misses the two breaking changes" in rejected.text, what="the observer reads the verdict")
    # Names beside ids (the admin knows every name): the id is one click away.
    member = console.one(f'#thread-side [data-member="{ada["id"]}"]')
    assert "Ada" in member.text and ada["id"] not in member.text
    console.one("button.agent-name", member).click()
    console.wait(lambda: ada["id"] in member.text, what="the id shown on a click")
    console.wait_text("#entries", "Ada")
    console.shot("thread-observer")
    got = run(_read(daemon.url, ada["key"], "thread.get", {"thread": thread}))
    admin = run(_read(daemon.url, daemon.admin_key, "agent.whoami", {}))["agent"]
    assert {"agent": admin, "role": "observer"}.items() <= [m for m in got["members"] if m["agent"] == admin][0].items()


@pytest.mark.rules("R9-9", "R9-16", "R6.4-26")
def test_console_outcomes_say_what_the_work_was_and_open_the_assignment(console, daemon):
    s = run(_story(daemon.url))
    bo = s["bo"]
    task = run(_act(daemon.url, s["ada"]["key"], "task.create", {
        "audience": "open", "contract": {"content": {"output": "A logo as SVG", "criteria": "One colour"}}}))["task"]
    eng = run(_act(daemon.url, bo["key"], "task.take", {"task": task}))["engagement"]
    run(_act(daemon.url, bo["key"], "task.drop", {"engagement": eng}))
    console.login(bo["key"])
    console.go("#/outcomes")
    row = console.one(f'#outcome-list [data-ref="{s["rejected"]}"]')
    console.wait(lambda: "Release notes" in row.text, what="what the work was")
    assert "Release 2.4" in row.text and "Misses the two breaking changes" in row.text
    assert "Changelog entry" in console.text(f'#outcome-list [data-ref="{s["adopted"]}"]')
    assert "A logo as SVG" in console.text(f'#outcome-list [data-ref="{eng}"]')
    console.shot("outcomes-work")
    # The assignment's link opens a page that shows it: delivery, verdict, reason.
    console.one(f'a[href="#/assignments/{s["rejected"]}"]', row).click()
    console.wait_text("#assignment-head h1", "Release notes")
    console.wait_text("#assignment-head", "Misses the two breaking changes")
    assert "rejected" in console.text("#assignment-head") and "Release 2.4" in console.text("#assignment-head")
    assert "Notes: 14 changes" in console.text("#assignment")
    assert console.d.title.startswith("Release notes")
    console.shot("assignment")
    # The live one: Bo may take it from its page.
    console.go(f"#/assignments/{s['open']}")
    console.submit(console.one("#assignment-actions form.take"))
    console.one("#assignment-actions form.deliver")
    assert run(_read(daemon.url, bo["key"], "assignment.get", {"assignment": s["open"]}))["state"] == "taken"
    # §9: an assignment of a Thread one is not a member of is not found.
    carol_id, carol_key = run(register(daemon.url, "Carol"))
    console.logout()
    console.login(carol_key)
    console.go(f"#/assignments/{s['rejected']}")
    console.wait_text("#main", "not_found")
    assert "Release notes" not in console.text("#main")


@pytest.mark.rules("R7.1-8")
def test_console_unknown_route_task_title_and_no_favicon_404(console, daemon):
    ada_id, ada_key = run(register(daemon.url, "Ada"))
    task = run(_act(daemon.url, ada_key, "task.create", {
        "audience": "open", "contract": {"content": {"output": "A logo as SVG", "criteria": "One colour"}}}))["task"]
    console.d.get_log("browser")  # what earlier tests left
    console.login(ada_key)
    console.go("#/thread/th_nope")
    console.wait_text("#main", "Page not found")
    assert "#/thread/th_nope" in console.text("#main")
    console.one('#main a[href="#/threads/th_nope"]')  # the page it probably meant
    console.shot("not-found")
    console.go("#/nope")
    console.wait(lambda: "#/nope" in console.text("#main"), what="the second unknown route")
    assert "Did you mean" not in console.text("#main")
    # A Task page is titled by its contract, the tab too.
    console.go(f"#/tasks/{task}")
    console.wait_text("#main h1", "A logo as SVG")
    assert task in console.text("#main .card")
    console.wait(lambda: console.d.title.startswith("A logo as SVG"), what="the tab titled by the contract")
    errors = [e["message"] for e in console.d.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == [], errors


@pytest.mark.rules("R9-9")
def test_console_shows_members_names_from_thread_get(console, daemon):
    """WIRE.md 1.2 "Names beside ids": a non-admin sees the names thread.get gives
    its members, in members, authors and assignments, with the id a click away."""
    ada, bo, thread = run(_pair(daemon.url))
    got = run(_read(daemon.url, bo["key"], "thread.get", {"thread": thread}))
    assert all("content" in m for m in got["members"]), got["members"]  # WIRE.md 1.2: names beside ids
    run(_act(daemon.url, ada["key"], "thread.post", {"thread": thread, "content": {"text": "Hello Bo"}, "ask": [],
                                                      "assign": {"to": bo["id"], "content": {"output": "A haiku", "criteria": "Three lines"}}}))
    console.login(bo["key"])
    console.go(f"#/threads/{thread}")
    member = console.one(f'#thread-side [data-member="{ada["id"]}"]')
    console.wait(lambda: "Ada" in member.text, what="Ada's name among the members")
    assert ada["id"] not in member.text
    console.wait(lambda: "Ada" in console.text("#entries article.entry header"), what="the author's name")
    console.one("#entries article.entry header button.agent-name").click()
    console.wait(lambda: ada["id"] in console.text("#entries article.entry header"), what="the id a click away")
    console.go("#/turn")
    console.wait(lambda: "Ada" in console.text("#opportunities"), what="'from Ada' on the opportunity")


@pytest.mark.rules("R8-10", "R8-13")
def test_console_thread_pages_older_assignments_on_request(console, daemon):
    ada, bo, thread = run(_pair(daemon.url))

    async def many() -> list[str]:
        async with await Client.connect(daemon.url, ada["key"]) as a:
            return [(await a.act("thread.post", {"thread": thread, "content": {"text": f"job {n}"}, "ask": [],
                                                  "assign": {"to": bo["id"], "content": {"criteria": f"job {n}"}}}))["assignment"]
                    for n in range(23)]

    made = run(many())
    console.login(ada["key"])
    console.go(f"#/threads/{thread}")
    console.wait(lambda: len(console.find("#thread-side ul.assignments > li")) == 20, what="the newest 20 assignments")
    shown = [el.get_attribute("data-assignment") for el in console.find("#thread-side ul.assignments > li")]
    assert shown == made[::-1][:20]
    console.one("#thread-side button.older").click()
    console.wait(lambda: len(console.find("#thread-side ul.assignments > li")) == 23, what="the older ones")
    assert console.find("#thread-side button.older") == []
