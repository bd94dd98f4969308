"""The console hears the outcome of work a deadline ended (WIRE.md 1.2 "Every
event has its own seq", D200): a taker whose assignment expires, and one whose
engagement expires, gets the ``outcome`` notice live, and also when its
connection is lost right after the expiry's ``turn`` event — the console
resubscribes with ``since`` = the seq of that turn event (api.js ``lastSeq``),
and the outcome, which has a seq of its own, is replayed. (Before format 4 the
outcome shared the turn's seq, so that resubscription replayed nothing.)

The loss is made exact: a wrapper of the page's ``WebSocket``, installed before
any page script runs, lets the expiry's turn frame through, drops every later
frame of that socket and closes it; the console's own reconnect does the rest.
"""

from __future__ import annotations

import pytest

from tests.console.conftest import BROWSER_MISSING

if BROWSER_MISSING:
    pytest.skip(BROWSER_MISSING, allow_module_level=True)

from kungfud.client import Client  # noqa: E402
from tests.console.conftest import run  # noqa: E402
from tests.e2e.helpers import register  # noqa: E402

CUT = """
(() => {
  const Native = window.WebSocket;
  window.__cuts = 0;
  window.__cutAfterExpiry = false;
  window.WebSocket = class extends Native {
    constructor(...args) {
      super(...args);
      // Registered before the console sets onmessage: runs first, and can stop it.
      this.addEventListener("message", (e) => {
        if (this.__cut) { e.stopImmediatePropagation(); return; }
        let msg;
        try { msg = JSON.parse(e.data); } catch { return; }
        const expired = msg.event === "turn" && ((msg.data || {}).ended || []).some((x) => x.why === "expired");
        if (expired && window.__cutAfterExpiry) {
          window.__cutAfterExpiry = false;
          this.__cut = true;
          window.__cuts += 1;
          setTimeout(() => this.close(), 0);
        }
      });
    }
  };
})();
"""


async def _work(url: str, kind: str) -> tuple[dict, list[tuple[str, dict, str]]]:
    """A taker, and two takes that each start a 1 s delivery deadline:
    (op, args, the id the outcome names)."""
    lead_id, lead_key = await register(url, "Lead")
    taker_id, taker_key = await register(url, "Taker")
    takes = []
    async with await Client.connect(url, lead_key) as lead:
        if kind == "assignment":
            thread = (await lead.act("thread.create", {"content": {"title": "Deadlines"}}))["thread"]
            token = (await lead.act("thread.admit", {"thread": thread, "role": "speaker"}))["token"]
            async with await Client.connect(url, taker_key) as t:
                await t.act("thread.join", {"token": token})
            for n in (1, 2):
                spec = {"to": taker_id, "content": {"criteria": f"part {n}"}, "deliver_within_s": 1}
                r = await lead.act("thread.post", {"thread": thread, "content": {"text": "please"}, "ask": [], "assign": spec})
                takes.append(("assignment.take", {"assignment": r["assignment"]}, r["assignment"]))
        else:
            for n in (1, 2):
                contract = {"content": {"output": f"part {n}", "criteria": "c"}, "deliver_within_s": 1}
                tk = (await lead.act("task.create", {"audience": "open", "contract": contract}))["task"]
                takes.append(("task.take", {"task": tk}, ""))
    return {"id": taker_id, "key": taker_key}, takes


async def _take(url: str, key: str, op: str, args: dict) -> str:
    async with await Client.connect(url, key) as c:
        r = await c.act(op, args)
    return r.get("engagement") or r.get("assignment") or args.get("assignment", "")


@pytest.mark.rules("R8-20", "R8-21")
@pytest.mark.parametrize("kind", ["assignment", "engagement"])
def test_console_hears_an_expiry_outcome_live_and_after_losing_the_connection_at_its_turn(console, daemon, kind):
    d = console.d
    script = d.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": CUT})["identifier"]
    try:
        taker, takes = run(_work(daemon.url, kind))
        console.login(taker["key"])
        # Live: the outcome notice of the first piece of work.
        (op, args, _), (op2, args2, _) = takes
        first = run(_take(daemon.url, taker["key"], op, args))
        console.wait_text("#notice", "Outcome:")
        console.wait_text("#notice", first)
        assert "timed_out" in console.text("#notice")
        # Resumed: the connection is lost right after the second expiry's turn event.
        d.execute_script("window.__cutAfterExpiry = true")
        second = run(_take(daemon.url, taker["key"], op2, args2))
        console.wait_text("#notice", second, timeout=30)
        assert "timed_out" in console.text("#notice")
        assert d.execute_script("return window.__cuts") == 1  # it was lost, and resumed
        console.wait_text("#conn", "live")
    finally:
        d.execute_cdp_cmd("Page.removeScriptToEvaluateOnNewDocument", {"identifier": script})
