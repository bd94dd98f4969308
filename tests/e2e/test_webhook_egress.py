"""Webhook egress over a real daemon (issue 35; reviews/security.md round 4):

- finding 1 (D330): agents whose receivers answer just inside the 10 s limit
  held every POST slot of one FIFO pool, so a bystander's event waited
  N / 16 × 10 s; now their POSTs wait for their own slots and the bystander's
  event arrives at once;
- finding 3 (D328, D329): an ``allow_hosts`` entry opened every port of its
  host to every agent, and ``last_error`` told closed ports, non-HTTP services
  and HTTP services apart; now an entry opens the port it names, and the agent
  sees a stable category.

Run on every CI shape (``KUNGFUD_E2E_NODES=lmdb2|pg2``): each node delivers
its shards of agents with slots of its own."""

from __future__ import annotations

import asyncio
import time
from urllib.parse import urlsplit

import pytest

from kungfud.client import Client
from tests.e2e.helpers import agent_client, check_failure
from tests.e2e.webhook_kit import Receiver

SLOW_S = 8.0  # inside the 10 s limit: every slow POST "succeeds" and the next starts at once


def _contract(agents: list[str]) -> dict:
    return {"content": {"output": "x", "criteria": "y"}, "eligibility": {"agents": agents}}


@pytest.mark.rules("R8-20")
def test_R8_20_slow_receivers_of_other_agents_leave_a_victims_delivery_prompt(make_daemon):
    d = make_daemon('[webhooks]\nallow_hosts = ["127.0.0.1:*"]\n')
    urls = list(getattr(d, "urls", None) or [d.url])

    async def go():
        slow = [await Receiver().start() for _ in range(3)]
        for r in slow:
            r.delay = SLOW_S
        fast = await Receiver().start()
        attackers = [await agent_client(urls[i % len(urls)], f"mallory-{i}") for i in range(48)]
        for i, (c, _) in enumerate(attackers):
            await c.act("webhook.set", {"url": slow[i % 3].url, "events": ["task_offered"]})
        author, _ = await agent_client(urls[0], "mallory-author")
        ids = [a for _, a in attackers]
        for _ in range(4):  # four events for each attacker, offered to nobody else
            await author.act("task.create", {"audience": "open", "contract": _contract(ids)})
        await asyncio.sleep(1.5)  # the attackers' first POSTs are in flight
        victim, vid = await agent_client(urls[0], "victim")
        await victim.act("webhook.set", {"url": fast.url, "events": ["task_offered"]})
        honest, _ = await agent_client(urls[-1], "honest")
        t0 = time.monotonic()
        await honest.act("task.create", {"audience": "open", "contract": _contract([vid])})
        await fast.wait(lambda: len(fast.ok()) >= 1, 30)
        waited = fast.ok()[0].at - t0
        # One FIFO pool made it wait for 48 slow POSTs, 3 rounds of 16 × 8 s; a
        # generous margin for a loaded machine, far below one slow answer.
        assert waited < 6.0, f"the victim's event waited {waited:.1f} s behind slow receivers"
        assert fast.ok()[0].json["agent"] == vid
        got = await victim.read("webhook.get", {})
        assert got["state"] == "active"
        for c, _ in attackers:
            await c.act("webhook.clear", {})
            await c.close()
        for c in (author, victim, honest):
            await c.close()
        for r in (*slow, fast):
            await r.close()

    asyncio.run(go())


@pytest.mark.rules("R8-20", "R12-8")
def test_R8_20_an_allowed_host_is_open_on_its_listed_port_and_last_error_is_a_category(make_daemon, tmp_path):
    async def go():
        rx = await Receiver().start()
        rx.status = 501
        d = make_daemon(f'[webhooks]\nallow_hosts = ["127.0.0.1:{rx.port}"]\nretry_pauses_s = [0.2]\n')
        urls = list(getattr(d, "urls", None) or [d.url])
        own_port = urlsplit(urls[0].replace("ws://", "http://")).port
        spy, _ = await agent_client(urls[0], "spy")
        helper, _ = await agent_client(urls[0], "helper")
        # The daemon's own port, and any other port of the allowed host: refused when set.
        for url in (f"http://127.0.0.1:{own_port}/v1", f"http://127.0.0.1:{own_port}/metrics", "http://127.0.0.1:5432/",
                    "http://127.0.0.1/"):
            err = check_failure(await spy.request("webhook.set", {"url": url, "events": ["task_offered"]}, key=url),
                                "bad_request")
            assert "allow_hosts" in err["reason"], err
        # The listed port: delivered to, and a failure is told as a category only.
        await spy.act("webhook.set", {"url": rx.url, "events": ["task_offered"]})
        await helper.act("task.create", {"audience": "open", "contract": {"content": {"output": "x", "criteria": "y"}}})
        await rx.wait(lambda: len(rx.posts) >= 1, 20)
        for _ in range(100):
            got = await spy.read("webhook.get", {})
            if got.get("last_error"):
                break
            await asyncio.sleep(0.1)
        assert got["last_error"] == "http_status 5xx", got  # not "HTTP 501"
        rx.refuse = True  # closes without an answer, as a non-HTTP service does
        n = len(rx.posts)
        await rx.wait(lambda: len(rx.posts) >= n + 2, 20)
        for _ in range(100):
            got = await spy.read("webhook.get", {})
            if got.get("last_error") == "protocol":
                break
            await asyncio.sleep(0.1)
        assert got["last_error"] == "protocol", got
        await spy.act("webhook.clear", {})
        await spy.close()
        await helper.close()
        await rx.close()

    asyncio.run(go())
