"""The docs cannot drift from the program (issue 14 items 3 and 9): the Python code
blocks of README.md and docs/agents.md run, as written, against a live daemon (only
the URL is substituted), and two agents running the recovery loop of docs/agents.md
end their exchange with both turns empty."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from tests.e2e.thread_kit import agents, close_all, new_thread, turn_items

ROOT = Path(__file__).resolve().parent.parent.parent
DOC_URL = "ws://127.0.0.1:8740/v1"
ROUNDS = 6  # an exchange that ends takes one round; a loop that ping-pongs never does


def python_blocks(doc: str) -> list[str]:
    text = (ROOT / doc).read_text()
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


def run_blocks(doc: str, url: str) -> dict:
    """Every Python block of ``doc`` in one namespace, in order, as a reader would
    paste them, with the documented URL replaced by the test daemon's."""
    blocks = python_blocks(doc)
    assert blocks, doc
    ns: dict = {"__name__": f"doc:{doc}"}
    for i, block in enumerate(blocks):
        assert DOC_URL in block or "url" in block or "Client" in block, (doc, i)
        exec(compile(block.replace(DOC_URL, url), f"{doc}[python block {i}]", "exec"), ns)
    return ns


def documented_loop(url: str):
    """``recover`` as docs/agents.md defines it."""
    blocks = [b for b in python_blocks("docs/agents.md") if "async def recover" in b]
    assert len(blocks) == 1
    ns: dict = {}
    exec(compile(blocks[0], "docs/agents.md[recover]", "exec"), ns)
    return ns["recover"]


@pytest.mark.rules("R5-1", "R5-3", "R5-4")
def test_docs_readme_python_blocks_run_against_a_live_daemon(daemon, capsys):
    run_blocks("README.md", daemon.url)
    shown = capsys.readouterr().out
    # the printed Memory: the second version, published, with the content the update sent
    assert "'version': 2" in shown and "'body': 'v2'" in shown and "'title': 'notes'" in shown, shown
    assert "'public'" in shown or "'visibility': 'public'" in shown or "'public': True" in shown, shown


@pytest.mark.rules("R6.3-7", "R6.3-8", "R6.3-13", "R8-17")
def test_docs_agents_python_blocks_run_a_whole_session_against_a_live_daemon(daemon):
    ns = run_blocks("docs/agents.md", daemon.url)
    assert {"recover", "rejected_work", "session"} <= ns.keys()  # the session ran (asyncio.run) with its asserts


@pytest.mark.rules("R6.3-7", "R6.3-8", "R6.3-9", "R6.3-13")
async def test_docs_two_agents_running_the_documented_loop_end_with_both_turns_empty(daemon):
    """Each agent asks the other a question (and, with exactly two speakers, a
    plain entry obligates the other one too); then both run the loop of
    docs/agents.md in turns. A reply that obligated its parent's author would keep
    the exchange going for ever; the documented loop must end it."""
    recover = documented_loop(daemon.url)
    alice, bob = await agents(daemon.url, "alice", "bob")
    try:
        th = await new_thread(alice, (bob, "speaker"))
        await alice.act("thread.post", {"thread": th, "ask": [bob.id], "content": {"text": "which tool?"}})
        await bob.act("thread.post", {"thread": th, "ask": [alice.id], "content": {"text": "which branch?"}})
        await alice.act("thread.post", {"thread": th, "content": {"text": "status?"}})  # rule 3: obligates bob
        assert await turn_items(alice) and await turn_items(bob)
        for rounds in range(1, ROUNDS + 1):
            for who in (alice, bob):
                await asyncio.wait_for(recover(daemon.url, who.key), timeout=60)
            if not await turn_items(alice) and not await turn_items(bob):
                break
        else:
            pytest.fail(f"the documented loop had not ended the exchange after {ROUNDS} rounds: "
                        f"alice owes {await turn_items(alice)}, bob owes {await turn_items(bob)}")
        assert rounds == 1, rounds
        entries = (await alice.read("thread.entries", {"thread": th, "limit": 100}))["items"]
        assert len(entries) == 6, entries  # three asks, three replies: one each, no more
    finally:
        await close_all(alice, bob)



@pytest.mark.rules("R0-1")
def test_docs_every_relative_link_resolves_inside_the_repository():
    """Links that work in a clone (newcomer report D1): every relative link of the
    README and docs/ names a file of this repository; the spec is linked at its
    public source."""
    broken = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", doc.read_text()):
            if re.match(r"[a-z]+:", target):
                continue
            path = (doc.parent / target).resolve()
            if not path.exists() or ROOT not in path.parents:
                broken.append((doc.name, target))
    assert broken == []
    assert "https://github.com/samelabs/Kungfu/blob/main/kungfu.md" in (ROOT / "README.md").read_text()
