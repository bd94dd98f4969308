"""Competing Task actions over the real daemon (L5).

R7.4-2: 32 agents each hold a delivered engagement of one Task whose adoption
limit is K; the judge sends the 32 adopt judgments at the same moment, each on its
own connection. Exactly K succeed and every refusal is ``conflict`` — for 50
rounds, a new Task each round, the same 32 agents.

R7.3-8: one agent sends 10 concurrent ``task.take`` on 5 connections: exactly one
engagement exists; every success names it (L2-6).
"""

from __future__ import annotations

import asyncio
import time

import pytest

from kungfud.client import Client, new_key

from .helpers import register

AGENTS = 32
K = 3
ROUNDS = 50
CONTRACT = {"content": {"output": "one line", "criteria": "any"}, "adoption_limit": K}
# The judge alone sends 32 judgments per round: lift the per-agent action rate
# limit (L4-5) so that it cannot stand in for the adoption limit.
CONFIG = "[limits]\nactions_per_minute = 1000000\n"


async def clients(url: str, key: str, n: int) -> list[Client]:
    return list(await asyncio.gather(*(Client.connect(url, key) for _ in range(n))))


@pytest.mark.rules("R7.4-2", "L5-1", "L5-2", "R10.2-4", "R7.4-3")
async def test_R7_4_2_L5_concurrent_adoptions_never_exceed_the_limit(make_daemon):
    d = make_daemon(CONFIG)
    judge_id, judge_key = await register(d.url, "judge")
    takers = list(await asyncio.gather(*(register(d.url, f"taker{i}") for i in range(AGENTS))))
    taker_clients = list(await asyncio.gather(*(Client.connect(d.url, key) for _, key in takers)))
    judges = await clients(d.url, judge_key, AGENTS)  # one connection per judgment
    author = judges[0]
    started = time.monotonic()
    judging_s: list[float] = []
    refusals: dict[str, int] = {}
    try:
        for round_no in range(ROUNDS):
            t = (await author.act("task.create", {"audience": "open", "contract": CONTRACT}))["task"]
            took = await asyncio.gather(
                *(c.act("task.take", {"task": t, "deliver": {"content": {"round": round_no, "n": i}}})
                  for i, c in enumerate(taker_clients))
            )
            engagements = [r["engagement"] for r in took]
            assert len(set(engagements)) == AGENTS and all(r["state"] == "delivered" for r in took)  # R7.4-3
            t0 = time.monotonic()
            responses = await asyncio.gather(
                *(j.request("task.judge", {"engagement": e, "verdict": "adopt"}, key=new_key())
                  for j, e in zip(judges, engagements))
            )
            judging_s.append(time.monotonic() - t0)
            won = [e for e, r in zip(engagements, responses) if r["ok"]]
            lost = [r for r in responses if not r["ok"]]
            assert len(won) == K, (round_no, len(won), [r["error"] for r in lost][:3])
            for r in lost:
                refusals[r["error"]["code"]] = refusals.get(r["error"]["code"], 0) + 1
            assert all(r["error"]["code"] == "conflict" for r in lost), (round_no, {r["error"]["code"] for r in lost})
            assert all(r["result"]["state"] == "adopted" for r in responses if r["ok"])
            # The recorded state agrees: K adoptions, the rest still awaiting judgment.
            task = await author.read("task.get", {"task": t})
            assert task["adoptions"] == K
            states = await asyncio.gather(*(author.read("engagement.get", {"engagement": e}) for e in engagements))
            assert sorted(s["state"] for s in states) == sorted(["adopted"] * K + ["delivered"] * (AGENTS - K))
            assert {s["engagement"] for s in states if s["state"] == "adopted"} == set(won)
            # Once the limit is reached, new takes are refused (B21).
            late = await judges[1].request("task.take", {"task": t}, key=new_key())
            assert late["ok"] is False  # the judge may not take its own Task either way
        elapsed = time.monotonic() - started
    finally:
        for c in taker_clients + judges:
            await c.close()
    judging_s.sort()
    print(
        f"\n[R7.4-2] {ROUNDS} rounds x {AGENTS} concurrent adopt judgments, limit {K}: "
        f"exactly {K} adopted every round; refusals {refusals}; "
        f"judging burst median {judging_s[len(judging_s) // 2] * 1000:.0f} ms, "
        f"max {judging_s[-1] * 1000:.0f} ms; total {elapsed:.1f} s"
    )
    assert refusals == {"conflict": ROUNDS * (AGENTS - K)}


@pytest.mark.rules("R7.3-8", "L2-6", "L5-1")
async def test_R7_3_8_concurrent_takes_by_one_agent_form_one_engagement(make_daemon):
    d = make_daemon(CONFIG)
    _, author_key = await register(d.url, "author")
    _, taker_key = await register(d.url, "taker")
    author = await Client.connect(d.url, author_key)
    conns = await clients(d.url, taker_key, 5)
    started = time.monotonic()
    try:
        for attempt in range(20):
            t = (await author.act("task.create", {"audience": "open", "contract": CONTRACT}))["task"]
            responses = await asyncio.gather(
                *(conns[i % 5].request("task.take", {"task": t}, key=new_key()) for i in range(10))
            )
            assert all(r["ok"] for r in responses), [r.get("error") for r in responses]
            results = [r["result"] for r in responses]
            assert len({r["engagement"] for r in results}) == 1, attempt
            assert sorted(r["existing"] for r in results) == [False] + [True] * 9
            assert len({r["deliver_by"] for r in results}) == 1
            got = await conns[0].read("task.get", {"task": t})
            assert len(got["engagements"]) == 1
            assert len((await author.read("task.get", {"task": t}))["engagements"]) == 1
        # Combined take-and-deliver (WIRE.md): one action wins, delivering on the one
        # engagement; every other finds it delivered and is refused whole.
        for attempt in range(10):
            t = (await author.act("task.create", {"audience": "open", "contract": CONTRACT}))["task"]
            responses = await asyncio.gather(
                *(conns[i % 5].request("task.take", {"task": t, "deliver": {"content": {"n": i}}}, key=new_key())
                  for i in range(10))
            )
            won = [(i, r["result"]) for i, r in enumerate(responses) if r["ok"]]
            assert len(won) == 1, (attempt, [r.get("error") for r in responses])
            assert {r["error"]["code"] for r in responses if not r["ok"]} == {"conflict"}
            (i, result), = won
            eng = await author.read("engagement.get", {"engagement": result["engagement"]})
            assert eng["state"] == "delivered" and eng["delivery"]["content"] == {"n": i}
            assert len((await author.read("task.get", {"task": t}))["engagements"]) == 1
    finally:
        for c in [author, *conns]:
            await c.close()
    print(
        f"\n[R7.3-8] 20 x 10 concurrent takes and 10 x 10 concurrent take-and-deliver on 5 connections:"
        f" one engagement each; {time.monotonic() - started:.1f} s"
    )
