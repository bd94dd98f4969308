"""A first end-to-end path: register, create, read (R5-1, R5-2, R9-8)."""

import pytest

from kungfud.client import Rejected
from tests.e2e.helpers import agent_client


@pytest.mark.rules("R5-1", "R5-2", "R9-8", "R9-7")
async def test_R5_2_created_memory_is_private_version_1_and_unreadable_by_others(daemon):
    alice, _ = await agent_client(daemon.url, "alice")
    bob, _ = await agent_client(daemon.url, "bob")
    r = await alice.act("memory.create", {"content": {"title": "plan"}})
    assert r["version"] == 1 and r["visibility"] == "private"
    got = await alice.read("memory.get", {"memory": r["memory"]})
    assert got["content"] == {"title": "plan"} and got["visibility"] == "private"
    with pytest.raises(Rejected) as e:
        await bob.read("memory.get", {"memory": r["memory"]})
    assert e.value.code == "not_found"
    await alice.act("memory.publish", {"memory": r["memory"]})
    got = await bob.read("memory.get", {"memory": r["memory"]})
    assert got["content"] == {"title": "plan"}
    await alice.close()
    await bob.close()
