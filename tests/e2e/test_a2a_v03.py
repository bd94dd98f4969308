"""The SDK's 0.3-era client pointed at the 1.0 endpoint (issue 34 §6): it gets a
clear VersionNotSupported (-32009) at once, for a plain and a streaming send,
never a hang. a2a-sdk 0.3.x cannot share a venv with 1.x, so a session fixture
installs a2a-sdk==0.3.26 (and httpx-sse, its one dependency the 1.x venv lacks)
with ``pip --target`` into a cache directory under the venv, once, and the 0.3
client runs in a subprocess with that directory first on its path."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.a2a_kit import published
from tests.e2e.helpers import agent_client

V03 = ("a2a-sdk==0.3.26", "httpx-sse==0.4.3")
CACHE = Path(sys.prefix) / "a2a-sdk-0.3.26"

CLIENT = """
import asyncio, json, sys, uuid
import httpx
from a2a.client import A2AClient
from a2a.types import Message, MessageSendParams, Part, Role, SendMessageRequest, SendStreamingMessageRequest, TextPart

async def main(url, key):
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {key}"}) as http:
        client = A2AClient(httpx_client=http, url=url)
        msg = Message(message_id=str(uuid.uuid4()), role=Role.user, parts=[Part(root=TextPart(text="hello"))])
        r = await client.send_message(SendMessageRequest(id="1", params=MessageSendParams(message=msg)))
        print(json.dumps({"send": r.root.model_dump(mode="json", exclude_none=True)}))
        try:
            async for ev in client.send_message_streaming(SendStreamingMessageRequest(id="2", params=MessageSendParams(message=msg))):
                print(json.dumps({"event": ev.root.model_dump(mode="json", exclude_none=True)}))
        except Exception as e:
            err = getattr(e, "error", None)
            print(json.dumps({"stream_error": type(e).__name__, "error": err.model_dump(mode="json") if err else str(e)}))

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


@pytest.fixture(scope="session")
def a2a_v03() -> Path:
    if not (CACHE / "a2a_sdk-0.3.26.dist-info").exists():
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(CACHE), *V03],
            check=True, timeout=300, capture_output=True,
        )
    return CACHE


async def test_a_0_3_client_is_told_the_version_at_once(daemon, a2a_v03, tmp_path):
    worker, _, base = await published(daemon.url)
    caller, _ = await agent_client(daemon.url, "old-client")
    script = tmp_path / "client03.py"
    script.write_text(CLIENT)
    run = subprocess.run(
        [sys.executable, "-W", "ignore", str(script), base, caller.key],
        env={"PYTHONPATH": str(a2a_v03), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True, timeout=60,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    sent = lines[0]["send"]["error"]
    assert sent["code"] == -32009
    assert sent["message"].startswith("bad_request: ") and "A2A 1.0" in sent["message"]
    assert sent["data"][0]["reason"] == "VERSION_NOT_SUPPORTED"
    streamed = lines[1]
    assert streamed["stream_error"] == "A2AClientJSONRPCError"
    assert streamed["error"]["code"] == -32009
    await worker.close()
    await caller.close()
