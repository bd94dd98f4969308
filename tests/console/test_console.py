"""Issue 15 "Tested in a real browser": the web console driven in a headless
Chromium against a real daemon. Other agents act through websocket clients in the
test. Each test also saves screenshots of the pages it passes through into
docs/console/ (docs/console.md shows them)."""

from __future__ import annotations

import json
import signal

import pytest

from tests.console.conftest import BROWSER_MISSING

if BROWSER_MISSING:
    pytest.skip(BROWSER_MISSING, allow_module_level=True)

from selenium.common.exceptions import NoAlertPresentException  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402

from kungfud.client import Client  # noqa: E402
from tests.console.conftest import run  # noqa: E402
from tests.e2e.helpers import register  # noqa: E402

MARKUP = "<img src=x onerror=alert(1)>"


async def _act(url: str, key: str, op: str, args: dict) -> dict:
    async with await Client.connect(url, key) as c:
        return await c.act(op, args)


async def _read(url: str, key: str, op: str, args: dict) -> dict:
    async with await Client.connect(url, key) as c:
        return await c.read(op, args)


async def _pair(url: str) -> tuple[dict, dict, str]:
    """Two agents (Ada governs, Bo speaks) in one Thread."""
    a_id, a_key = await register(url, "Ada")
    b_id, b_key = await register(url, "Bo")
    async with await Client.connect(url, a_key) as a:
        thread = (await a.act("thread.create", {"content": {"title": "Release 2.4"}}))["thread"]
        token = (await a.act("thread.admit", {"thread": thread, "role": "speaker"}))["token"]
    await _act(url, b_key, "thread.join", {"token": token})
    return {"id": a_id, "key": a_key}, {"id": b_id, "key": b_key}, thread


def _no_alert(console) -> None:
    try:
        alert = console.d.switch_to.alert
    except NoAlertPresentException:
        return
    text = alert.text
    alert.dismiss()
    raise AssertionError(f"a script ran: alert({text!r})")


@pytest.mark.rules("R8-17")
def test_console_login_with_the_admin_key_reaches_the_turn(console, daemon):
    console.open()
    console.one("#key")
    console.shot("login")
    console.login(daemon.admin_key)
    admin = run(_read(daemon.url, daemon.admin_key, "agent.whoami", {}))["agent"]
    assert admin in console.text("#who")
    console.wait_text("#turn-items", "Nothing owed")
    # The key is kept in this tab's sessionStorage only, never in localStorage or a cookie.
    d = console.d
    assert d.execute_script("return sessionStorage.getItem('kungfu.key')") == daemon.admin_key
    assert d.execute_script("return localStorage.length") == 0
    assert d.execute_script("return document.cookie") == ""
    # A reload in the same tab stays logged in; the page loaded nothing the CSP refused.
    d.refresh()
    console.wait_text("#who", admin)
    # Keyboard only: Tab reaches the menu's links, which show a focus ring, and Enter follows them.
    from selenium.webdriver.common.action_chains import ActionChains
    for _ in range(30):
        ActionChains(d).send_keys(Keys.TAB).perform()
        if d.execute_script("return document.activeElement.textContent.trim()") == "Threads":
            break
    focused = d.switch_to.active_element
    assert focused.tag_name == "a" and focused.text == "Threads"
    assert focused.value_of_css_property("outline-style") != "none"
    focused.send_keys(Keys.ENTER)
    console.wait(lambda: d.execute_script("return location.hash") == "#/threads", what="Enter to follow the link")
    console.one("form.create-thread")
    console.go("#/account")
    console.one("form.rotate-key")
    console.shot("account")
    assert console.csp_violations() == []


@pytest.mark.rules("R4-1")
def test_console_wrong_key_shows_a_clear_error(console, daemon):
    console.open()
    console.one("#key").send_keys("kf_" + "x" * 43 + Keys.ENTER)
    console.wait_text("#login-error", "That key was not accepted")
    assert not console.one("#nav").is_displayed()  # still logged out: no menu
    assert console.d.execute_script("return sessionStorage.getItem('kungfu.key')") is None
    console.shot("login-wrong-key")


@pytest.mark.rules("R8-22", "R8-20", "R8-24")
def test_console_turn_item_appears_live_and_a_reply_ends_it(console, daemon):
    ada, bo, thread = run(_pair(daemon.url))
    console.login(bo["key"])
    console.wait_text("#turn-items", "Nothing owed")
    # Ada asks Bo while Bo's page is open: the item arrives without a reload.
    posted = run(_act(daemon.url, ada["key"], "thread.post",
                      {"thread": thread, "content": {"text": "Can you check the changelog?"}, "ask": [bo["id"]]}))
    card = console.one("#turn-items article.ob-respond")
    console.wait_text("#turn-items", "Can you check the changelog?")
    console.shot("turn")
    console.shot("turn-phone", phone=True)
    form = console.one("form.reply", card)
    console.fill(form, "text", "Checked: two entries were missing, added.")
    console.one("textarea[name=text]", form).send_keys(Keys.CONTROL, Keys.ENTER)  # Ctrl+Enter submits
    console.wait(lambda: not console.find("#turn-items article.ob-respond"), what="the respond item to leave the turn")
    entries = run(_read(daemon.url, ada["key"], "thread.entries", {"thread": thread, "full": True}))["items"]
    reply = entries[-1]
    assert reply["author"] == bo["id"] and reply["reply_to"] == posted["entry"]
    assert reply["content"] == {"text": "Checked: two entries were missing, added."}
    first = [e for e in entries if e["entry"] == posted["entry"]][0]
    assert [r["state"] for r in first["responses"] if r["agent"] == bo["id"]] == ["replied"]


@pytest.mark.rules("R6.4-19", "R6.4-22", "R6.4-26", "R8-29", "R8-38")
def test_console_take_deliver_reject_with_a_reason_then_the_outcome(console, daemon):
    ada, bo, thread = run(_pair(daemon.url))
    posted = run(_act(daemon.url, ada["key"], "thread.post", {
        "thread": thread, "content": {"text": "Release notes, please"}, "ask": [],
        "assign": {"to": bo["id"], "content": {"criteria": "Covers every merged change", "output": "markdown"}},
    }))
    assignment = posted["assignment"]
    # Bo: the assignment is an opportunity with its criteria; take it in place.
    console.login(bo["key"])
    opp = console.one(f'#opportunities [data-opportunity="{assignment}"]')
    console.wait_text("#opportunities", "Covers every merged change")
    console.submit(console.one("form.take", opp))
    card = console.one("#turn-items article.ob-deliver")
    console.wait(lambda: "due in" in card.text, what="a deliver item counting down")
    form = console.one("form.deliver", card)
    console.fill(form, "text", "Notes: 14 changes, 2 breaking.")
    console.submit(form)
    console.wait(lambda: not console.find("#turn-items article.ob-deliver"), what="the deliver item to leave")
    console.logout()
    # Ada: judges in place, rejecting with a reason.
    console.login(ada["key"])
    card = console.one("#turn-items article.ob-judge")
    console.wait(lambda: "Notes: 14 changes, 2 breaking." in card.text, what="the delivery shown")
    console.shot("turn-judge")
    form = console.one("form.reject", card)
    console.submit(form)  # without a reason: refused in the page, nothing sent
    console.wait(lambda: "required" in form.text, what="the missing reason named")
    console.fill(form, "reason", "The breaking changes lack migration steps")
    console.one("input[name=reason]", form).send_keys(Keys.ENTER)
    console.wait(lambda: not console.find("#turn-items article.ob-judge"), what="the judge item to leave")
    got = run(_read(daemon.url, bo["key"], "assignment.get", {"assignment": assignment}))
    assert got["state"] == "rejected"
    assert got["judgment"]["content"] == {"reason": "The breaking changes lack migration steps"}
    console.logout()
    # Bo: the outcome, with its reason.
    console.login(bo["key"])
    console.go("#/outcomes")
    console.wait_text("#outcome-list", "rejected")
    console.wait_text("#outcome-list", "The breaking changes lack migration steps")
    # A second piece of work ends while the page is open: it appears live, with a notice.
    redo = run(_act(daemon.url, ada["key"], "thread.post", {
        "thread": thread, "content": {"text": "Release notes, with migration steps"}, "ask": [],
        "assign": {"to": bo["id"], "content": {"criteria": "Migration steps for each breaking change"},
                   "redoes": assignment},
    }))["assignment"]
    run(_act(daemon.url, bo["key"], "assignment.take", {"assignment": redo, "deliver": {"content": {"text": "Notes v2"}}}))
    run(_act(daemon.url, ada["key"], "assignment.judge", {"assignment": redo, "verdict": "adopt"}))
    console.wait_text("#outcome-list", "adopted")
    console.wait_text("#notice", "Outcome:")
    assert redo in console.text("#notice") and "adopted" in console.text("#notice")
    console.shot("outcomes")


@pytest.mark.rules("R4-1")
def test_console_admin_creates_an_agent_and_it_logs_in_with_its_key(console, daemon):
    console.login(daemon.admin_key)
    console.wait(lambda: console.one("#nav-admin").is_displayed(), what="the Admin page offered to an admin")
    console.go("#/admin")
    form = console.one("form.create-agent")
    console.fill(form, "name", "Cleo")
    console.one("input[name=name]", form).send_keys(Keys.ENTER)
    key = console.one("form.create-agent output.secret").text
    assert key.startswith("kf_")
    console.wait_text("#agent-list", "Cleo")
    console.wait_text("#health", "200 ok")
    console.shot("admin")
    console.logout()
    console.login(key)
    console.wait_text("#who", "Cleo")
    assert not console.one("#nav-admin").is_displayed()  # Cleo is no admin
    cleo = console.text("#who code")
    console.logout()
    # The admin resets Cleo's key (the new one shown once) and deactivates Cleo.
    console.login(daemon.admin_key)
    console.go("#/admin")
    row = console.one(f'#agent-list tr[data-agent="{cleo}"]')
    console.submit(console.one("form.reset-key", row))
    console.d.switch_to.alert.accept()  # "Issue a new key?"
    new_key = console.one("#admin-secrets output.secret").text
    assert new_key.startswith("kf_") and new_key != key
    row = console.one(f'#agent-list tr[data-agent="{cleo}"]')
    console.submit(console.one("form.set-status", row))
    console.d.switch_to.alert.accept()  # "Deactivate this agent?"
    console.wait(lambda: "deactivated" in console.text(f'#agent-list tr[data-agent="{cleo}"]'), what="Cleo deactivated")
    console.logout()
    console.open()
    console.one("#key").send_keys(key + Keys.ENTER)
    console.wait_text("#login-error", "That key was not accepted")  # the old key stopped working
    console.login(new_key)
    console.wait_text("#who", "deactivated")


@pytest.mark.rules("L6-1", "L6-3", "L6-4", "R0-4")
def test_console_markup_in_a_post_renders_as_text_and_runs_nothing(console, daemon):
    ada, bo, thread = run(_pair(daemon.url))
    run(_act(daemon.url, ada["key"], "thread.post", {"thread": thread, "content": {"text": MARKUP}, "ask": [bo["id"]]}))
    console.login(bo["key"])
    console.wait_text("#turn-items", MARKUP)
    assert console.find("#main img") == []
    # Bo posts the same text from the Thread page.
    console.go(f"#/threads/{thread}")
    form = console.one("#post form.post")
    console.fill(form, "text", MARKUP)
    console.one(f'input[name=ask][value="{ada["id"]}"]', form).click()
    console.submit(form)
    console.wait(lambda: len(console.find("#entries article.entry")) == 2, what="both entries shown")
    for e in console.find("#entries article.entry .entry-content"):
        assert MARKUP in e.text
    assert console.find("img") == []
    _no_alert(console)
    entries = run(_read(daemon.url, ada["key"], "thread.entries", {"thread": thread, "full": True}))["items"]
    assert [e["content"] for e in entries] == [{"text": MARKUP}, {"text": MARKUP}]
    assert entries[1]["ask"] == [ada["id"]]
    console.shot("thread")
    console.shot("thread-phone", phone=True)
    assert console.csp_violations() == []


@pytest.mark.rules("R5-2", "R5-3", "R5-4", "R7.1-8", "R7.1-9")
def test_console_memories_and_tasks_are_created_and_revised_in_place(console, daemon):
    ada, bo, thread = run(_pair(daemon.url))
    console.login(ada["key"])
    console.go("#/memories")
    form = console.one("form.create-memory")
    console.fill(form, "content", '{"title": "Style guide", "text": "Short sentences."}')
    console.submit(form)
    console.one("form.create-memory .result a").click()
    form = console.one("form.update-memory")
    console.fill(form, "content", '{"title": "Style guide", "text": "Short sentences. Active voice."}')
    console.submit(form)
    console.wait_text("form.update-memory .result", "Saved v2")
    console.wait_text(".versions", "Active voice.")  # the page re-read: its forms are the new ones
    console.submit(console.one("form.publish"))
    console.wait(lambda: console.find("form.unpublish"), what="the Memory published")
    console.shot("memory")
    [m] = run(_read(daemon.url, ada["key"], "memory.list", {}))["items"]
    assert (m["latest"], m["visibility"]) == (2, "public")
    console.go("#/memories")
    console.wait_text("#memory-list", "Style guide")
    console.shot("memories")
    # A Task, then a revision of its contract: both versions side by side.
    console.go("#/tasks")
    form = console.one("form.create-task")
    console.fill(form, "output", "A one-page summary")
    console.fill(form, "criteria", "Under 400 words")
    console.submit(form)
    console.one("form.create-task .result a").click()
    form = console.one("form.revise")
    console.fill(form, "criteria", "Under 300 words, with sources")
    console.submit(form)
    console.wait_text("form.revise .result", "Now at v2")
    console.wait(lambda: len(console.find(".versions .version")) == 2, what="two contract versions")
    console.wait_text(".versions", "Under 300 words, with sources")
    assert "Under 400 words" in console.text(".versions")
    # Bo takes it from the Task list and sees it under the tasks page.
    run(_act(daemon.url, bo["key"], "task.take", {"task": run(_read(daemon.url, ada["key"], "task.list", {"mine": True}))["items"][0]["task"]}))
    console.d.refresh()
    console.wait(lambda: console.find("[data-engagement]"), what="Bo's engagement shown to the author")
    console.shot("task")
    console.go("#/tasks")
    console.wait_text("#tasks-mine", "v2")
    console.shot("tasks")
    console.go("#/threads")
    console.wait_text("#thread-list", "Release 2.4")
    console.shot("threads")


@pytest.mark.rules("R8-20", "R8-21", "R8-24", "L3-2")
def test_console_reconnects_resends_with_the_same_key_and_resumes_events_with_since(console, daemon):
    ada, bo, thread = run(_pair(daemon.url))
    first = run(_act(daemon.url, ada["key"], "thread.post",
                     {"thread": thread, "content": {"text": "First question"}, "ask": [bo["id"]]}))
    console.login(bo["key"])
    card = console.one("#turn-items article.ob-respond")
    console.wait_text("#turn-items", "First question")
    # Record every frame the page sends (test instrumentation through WebDriver).
    console.d.execute_script(
        "window.__sent = []; const send = WebSocket.prototype.send;"
        "WebSocket.prototype.send = function (d) { window.__sent.push(String(d)); return send.call(this, d); };"
    )
    # The daemon freezes with the reply in flight, then dies: the reply is lost.
    port = int(daemon.url.rsplit(":", 1)[1].split("/")[0])
    daemon.proc.send_signal(signal.SIGSTOP)
    form = console.one("form.reply", card)
    console.fill(form, "text", "Answer sent into the void")
    console.submit(form)
    console.wait(lambda: console.d.execute_script("return window.__sent.length") >= 1, what="the reply frame sent")
    daemon.kill()
    console.wait_text("#conn", "reconnecting")
    daemon.start(listen=f"127.0.0.1:{port}")
    # While the page is still away, Ada asks again: the event is replayed from `since`.
    run(_act(daemon.url, ada["key"], "thread.post", {"thread": thread, "content": {"text": "Second question"}, "ask": [bo["id"]]}))
    console.wait_text("#conn", "live", timeout=40)
    console.wait_text("#turn-items", "Second question")
    console.wait(lambda: "First question" not in console.text("#turn-items"), what="the answered item to leave")
    sent = [json.loads(f) for f in console.d.execute_script("return window.__sent")]
    posts = [f for f in sent if f["op"] == "thread.post"]
    assert len(posts) == 2 and posts[0] == posts[1], posts  # the same frame, idempotency key included
    assert posts[0]["key"]
    subs = [f for f in sent if f["op"] == "subscribe"]
    assert subs and isinstance(subs[-1]["args"].get("since"), int), subs
    entries = run(_read(daemon.url, ada["key"], "thread.entries", {"thread": thread, "full": True}))["items"]
    replies = [e for e in entries if e["author"] == bo["id"]]
    assert [(e["reply_to"], e["content"]) for e in replies] == [(first["entry"], {"text": "Answer sent into the void"})]


@pytest.mark.rules("R12-3", "R6.4-1", "R6.4-3", "R8-3")
def test_console_thread_create_admit_once_then_post_with_ask_and_assign(console, daemon):
    bo_id, bo_key = run(register(daemon.url, "Bo"))
    ada_id, ada_key = run(register(daemon.url, "Ada"))
    console.login(ada_key)
    console.go("#/threads")
    form = console.one("form.create-thread")
    console.fill(form, "title", "Docs sprint")
    console.one("input[name=title]", form).send_keys(Keys.ENTER)
    console.one("form.create-thread .result a").click()
    # Admit: the token is shown once, with a copy button.
    admit = console.one("form.admit")
    console.submit(admit)
    token = console.one("form.admit output.secret").text
    assert token.startswith("kt_")
    assert console.one("form.admit .secret-box button").text == "Copy"
    thread = console.d.execute_script("return location.hash").split("/")[2]
    run(_act(daemon.url, bo_key, "thread.join", {"token": token}))
    # Bo's arrival shows without a reload; Ada asks Bo and assigns work to Bo in one post.
    console.wait(lambda: console.find(f'#thread-side [data-member="{bo_id}"]'), what="Bo among the members")
    form = console.one("#post form.post")
    console.wait(lambda: console.find(f'input[name=ask][value="{bo_id}"]', form), what="Bo offered in Ask")
    console.fill(form, "text", "Draft the install page")
    console.one(f'input[name=ask][value="{bo_id}"]', form).click()
    console.one("input[name=doassign]", form).click()
    from selenium.webdriver.support.ui import Select
    Select(console.one("select[name=to]", form)).select_by_value(bo_id)
    console.fill(form, "criteria", "Every command tested on a clean machine")
    console.fill(form, "deliver_within_s", "7200")
    console.submit(form)
    console.wait_text("#post .result", "with assignment as_")
    console.wait_text("#thread-side", "open")
    entries = run(_read(daemon.url, bo_key, "thread.entries", {"thread": thread, "full": True}))["items"]
    [e] = entries
    assert e["ask"] == [bo_id] and e["assignment"].startswith("as_")
    got = run(_read(daemon.url, bo_key, "assignment.get", {"assignment": e["assignment"]}))
    assert got["to"] == bo_id and got["deliver_within_s"] == 7200
    assert got["content"] == {"criteria": "Every command tested on a clean machine"}
    [opp] = run(_read(daemon.url, bo_key, "opportunities", {}))["items"]
    assert opp["ref"]["assignment"] == e["assignment"]
    console.wait_text("#entries", "Draft the install page")
    console.shot("thread-governor")
    # Shown once: a reload shows the grant but not its token.
    console.d.refresh()
    console.wait_text("#entries", "Draft the install page")
    assert token not in console.text("body")


@pytest.mark.rules("R7.2-2", "R8-29", "R8-35", "R8-37")
def test_console_task_taken_from_the_list_delivered_and_adopted(console, daemon):
    ada_id, ada_key = run(register(daemon.url, "Ada"))
    bo_id, bo_key = run(register(daemon.url, "Bo"))
    task = run(_act(daemon.url, ada_key, "task.create", {
        "audience": "open", "contract": {"content": {"output": "A logo as SVG", "criteria": "Works in one colour"}}}))["task"]
    console.login(bo_key)
    console.go("#/tasks")
    console.wait_text("#tasks-takeable", task)
    console.one(f'#tasks-takeable a[href="#/tasks/{task}"]').click()
    console.wait_text(".versions", "Works in one colour")
    console.submit(console.one("form.take"))
    console.wait(lambda: console.find("[data-engagement]"), what="Bo's engagement on the Task page")
    console.go("#/turn")
    card = console.one("#turn-items article.ob-deliver")
    console.wait(lambda: "A logo as SVG" in card.text and "due in" in card.text, what="the contract and its deadline")
    form = console.one("form.deliver", card)
    console.fill(form, "text", "<svg>…</svg> in black")
    console.submit(form)
    console.wait(lambda: not console.find("#turn-items article.ob-deliver"), what="the deliver item to leave")
    console.logout()
    console.login(ada_key)
    card = console.one("#turn-items article.ob-judge")
    console.wait(lambda: "<svg>…</svg> in black" in card.text, what="the delivery shown as text")
    console.submit(console.one("form.adopt", card))
    console.wait(lambda: not console.find("#turn-items article.ob-judge"), what="the judge item to leave")
    [e] = run(_read(daemon.url, ada_key, "task.get", {"task": task}))["engagements"]
    assert e["agent"] == bo_id and e["state"] == "adopted"


@pytest.mark.rules("L2-4", "L2-3")
def test_console_shows_a_rejection_with_its_reason_and_next_step_where_the_action_was_taken(console, daemon):
    ada, bo, thread = run(_pair(daemon.url))
    posted = run(_act(daemon.url, ada["key"], "thread.post", {
        "thread": thread, "content": {"text": "Logo"}, "ask": [],
        "assign": {"to": bo["id"], "content": {"criteria": "SVG"}}}))
    run(_act(daemon.url, ada["key"], "assignment.void", {"assignment": posted["assignment"]}))
    console.login(bo["key"])
    console.go("#/threads")
    form = console.one("form.join")
    console.fill(form, "token", "kt_" + "x" * 43)
    console.submit(form)
    console.wait_text("form.join .rejection", "not_found")
    text = console.text("form.join .rejection")
    assert "Next: change the request and try again." in text or "Next: this cannot succeed" in text, text
    assert len(text.split("\n")[0]) > len("not_found: ") + 10, text  # the daemon's reason, in words
    # A post replying to an entry that does not exist: refused, shown under the form, nothing posted.
    console.go(f"#/threads/{thread}")
    form = console.one("#post form.post")
    console.fill(form, "text", "About entry 99")
    console.fill(form, "reply_to", "99")
    console.submit(form)
    console.wait_text("#post .rejection", "Next:")
    assert console.text("#post .rejection").startswith("not_found: "), console.text("#post .rejection")
    entries = run(_read(daemon.url, ada["key"], "thread.entries", {"thread": thread}))["items"]
    assert [e["entry"] for e in entries] == [1]
    console.shot("rejection", at=console.one("#post .rejection"))


@pytest.mark.rules("R8-17")
def test_console_rotating_ones_own_key_keeps_the_tab_working_with_the_new_key(console, daemon):
    ada_id, ada_key = run(register(daemon.url, "Ada"))
    console.login(ada_key)
    console.go("#/account")
    console.submit(console.one("form.rotate-key"))
    console.d.switch_to.alert.accept()  # "Issue a new key for yourself?"
    new_key = console.one("form.rotate-key output.secret").text
    assert new_key.startswith("kf_") and new_key != ada_key
    assert console.d.execute_script("return sessionStorage.getItem('kungfu.key')") == new_key
    # The daemon closes the old key's connection (4001); the tab carries on with the new key.
    console.go("#/memories")
    form = console.one("form.create-memory")
    console.fill(form, "content", '{"title": "after rotation"}')
    console.submit(form)
    console.wait_text("form.create-memory .result", "Created")
    assert console.text("#who").startswith("Ada")
    [m] = run(_read(daemon.url, new_key, "memory.list", {}))["items"]
    assert m["author"] == ada_id
    with pytest.raises(Exception):
        run(_read(daemon.url, ada_key, "agent.whoami", {}))
