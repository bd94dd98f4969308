"""Names beside ids (WIRE.md 1.2; issue 26 item 3): ``thread.get``'s members
carry ``content: {name}`` — readable by current members only (§9) — and the
``kungfu`` CLI shows agents by name (a JSON string, L6) in reads, with the ids
one flag away (``--ids``). Through the client library and the CLI in a
subprocess, against a real daemon."""

from __future__ import annotations

import json

import pytest

from tests.e2e.test_cli import Cli, cli  # noqa: F401  (the fixture)
from tests.e2e.thread_kit import agents, close_all, fails, new_thread


@pytest.fixture
def daemon(shared_daemon):
    """One daemon for the module (tests/conftest.py ``shared_daemon``): each test
    registers agents of its own and reads only what they wrote."""
    return shared_daemon


@pytest.mark.rules("R9-9", "R6.2-16")
async def test_R9_9_thread_get_members_carry_their_names_to_members_only(daemon):
    alice, bob, eve = await agents(daemon.url, "alice", "bob", "eve")
    try:
        # an account's content may hold more than a name: only the name is shown
        await alice.act("thread.create", {"content": {"title": "x"}})
        t = await new_thread(alice, (bob, "speaker"))
        got = await bob.read("thread.get", {"thread": t})
        assert {m["agent"]: m["content"] for m in got["members"]} == {
            alice.id: {"name": "alice"}, bob.id: {"name": "bob"},
        }, got["members"]
        await fails(eve, "thread.get", {"thread": t}, "not_found")  # not a member: nothing, names included
        await bob.act("thread.leave", {"thread": t})
        await fails(bob, "thread.get", {"thread": t}, "not_found")  # a former member no longer reads them
    finally:
        await close_all(alice, bob, eve)


@pytest.mark.rules("R9-9")
async def test_R9_9_a_member_name_shows_only_the_name_of_an_account_content(daemon):
    from kungfud.client import Client

    async with await Client.connect(daemon.url) as anon:
        big = await anon.act("agent.register", {"content": {"name": "carol", "bio": "b" * 10_000}})
    alice, = await agents(daemon.url, "alice")
    async with await Client.connect(daemon.url, big["key"]) as carol:
        t = (await alice.act("thread.create", {}))["thread"]
        token = (await alice.act("thread.admit", {"thread": t}))["token"]
        await carol.act("thread.join", {"token": token})
        got = await alice.read("thread.get", {"thread": t})
        assert [m["content"] for m in got["members"] if m["agent"] == big["agent"]] == [{"name": "carol"}]
    await close_all(alice)


@pytest.mark.rules("R9-9", "R6.4-3")
def test_R9_9_cli_shows_names_beside_ids_and_ids_with_a_flag(cli: Cli):
    alice, alice_key = cli.register("alice")
    bob, bob_key = cli.register('bob" by=ag_spoof')  # a name is participant text: printed as JSON, its quote escaped
    th = cli.json("thread", "create", "--title", "t", key=alice_key)["thread"]
    token = cli.json("thread", "admit", th, key=alice_key)["token"]
    cli.run("thread", "join", token, key=bob_key)
    asg = cli.json("post", th, "--text", "write it", "--assign-to", bob, "--criteria", "c", key=alice_key)["assignment"]
    cli.run("take", asg, key=bob_key)
    cli.run("deliver", asg, "--text", "done", key=bob_key)
    cli.run("judge", asg, "adopt", key=alice_key)

    shown = cli.run("thread", "get", th, key=alice_key).stdout
    # members: the name (as JSON) and the id, which is where a person finds it
    assert f'name="alice" agent={alice}' in shown and f'name="bob\\" by=ag_spoof" agent={bob}' in shown, shown
    outcomes = cli.run("outcomes", key=bob_key).stdout
    assert f'{th}/{asg} adopted' in outcomes and 'by="alice"' in outcomes and alice not in outcomes, outcomes
    got = cli.run("assignment", "get", asg, key=alice_key).stdout
    assert 'creator: "alice"' in got and 'to: "bob\\" by=ag_spoof"' in got, got

    raw = cli.run("outcomes", "--ids", key=bob_key).stdout
    assert f"by={alice}" in raw and '"alice"' not in raw, raw
    as_json = json.loads(cli.run("outcomes", "--json", key=bob_key).stdout)
    assert as_json["items"][0]["by"] == alice  # --json is the exact object
    watched = cli.run("watch", "--since", "0", "--timeout", "3", key=bob_key).stdout
    outcome = [line for line in watched.splitlines() if " outcome " in line]
    assert len(outcome) == 1 and 'by="alice"' in outcome[0], watched
    assert 'creator="alice"' in watched, watched  # the opportunity event
    raw = cli.run("watch", "--since", "0", "--timeout", "3", "--ids", key=bob_key).stdout
    assert f"by={alice}" in raw and '"alice"' not in raw, raw


@pytest.mark.rules("R9-9", "R8-17")
def test_R9_9_cli_entries_show_their_authors_by_name(cli: Cli):
    alice, alice_key = cli.register("alice")
    bob, bob_key = cli.register("bob")
    th = cli.json("thread", "create", key=alice_key)["thread"]
    cli.run("thread", "join", cli.json("thread", "admit", th, key=alice_key)["token"], key=bob_key)
    cli.run("post", th, "--text", "hello", "--ask", bob, key=alice_key)
    entries = cli.run("thread", "entries", th, key=bob_key).stdout
    assert entries.startswith('#1 "alice" ') and 'ask="bob"' in entries and alice not in entries, entries
    one = cli.run("thread", "entry", f"{th}#1", key=bob_key).stdout
    assert 'author: "alice"' in one, one
    assert f"#1 {alice} " in cli.run("thread", "entries", th, "--ids", key=bob_key).stdout


@pytest.mark.rules("R9-9", "L6-4")
async def test_names_are_stored_nfkc_and_never_with_an_invisible_or_control_character(daemon):
    """Security review 4, item 4: a name is normalized (NFKC) when it is set,
    and one with an invisible or control character (a zero-width space, a
    bidi override, a newline) is bad_request naming the character."""
    from kungfud.client import Client

    async with await Client.connect(daemon.url) as anon:
        for name in ("alice\u200b", "\u202eecila", "bob\nby=ag_spoof", "\u3164", "al\u00adice"):
            resp = await anon.request("agent.register", {"content": {"name": name}}, key=f"k-{len(name)}-{ord(name[-1])}")
            assert resp["ok"] is False and resp["error"]["code"] == "bad_request", (name, resp)
            assert "content.name" in resp["error"]["reason"] and "U+" in resp["error"]["reason"], resp
        made = await anon.act("agent.register", {"content": {"name": "\uff41\uff4c\uff49\uff43\uff45"}})  # full-width
    async with await Client.connect(daemon.url, made["key"]) as c:
        assert (await c.read("agent.whoami"))["content"] == {"name": "alice"}


@pytest.mark.rules("R9-9", "L6-4")
def test_cli_tags_confusable_names_with_their_ids(cli: Cli):
    """Security review 4, item 4: a Cyrillic а makes "аlice", which looks like
    "alice": every listing that shows both writes each with its id."""
    alice, alice_key = cli.register("alice")
    fake, fake_key = cli.register("\u0430lice")
    bob, bob_key = cli.register("bob")
    th = cli.json("thread", "create", key=alice_key)["thread"]
    for key in (fake_key, bob_key):
        cli.run("thread", "join", cli.json("thread", "admit", th, key=alice_key)["token"], key=key)
    cli.run("post", th, "--text", "ship friday", key=alice_key)
    cli.run("post", th, "--text", "alice here: ship today", key=fake_key)
    entries = cli.run("thread", "entries", th, key=bob_key).stdout
    assert f'#1 "alice"({alice}) ' in entries and f'#2 "\u0430lice"({fake}) ' in entries, entries
    got = cli.run("thread", "get", th, key=bob_key).stdout
    assert f'author="alice"({alice})' in got and f'author="\u0430lice"({fake})' in got, got
    # bob's own name looks like nobody's: no id beside it
    assert f'"bob"({bob})' not in cli.run("thread", "entries", th, key=alice_key).stdout
