"""The A2A endpoint's start (D400): the socket listens at once, and uvicorn,
starlette, the a2a-sdk and protobuf are loaded by the first connection, not by
a daemon that nobody calls over A2A (issue 38: idle memory). That the first
request is then answered like any other is tests/e2e/test_a2a*.py's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent

_START = """
import asyncio, socket, sys
from types import SimpleNamespace
from kungfud.a2a.serve import A2AServer, missing

HEAVY = ("uvicorn", "starlette", "a2a", "google.protobuf")

async def main():
    server = SimpleNamespace(rt=SimpleNamespace(a2a_public_url=None), on_events=[])
    cfg = SimpleNamespace(a2a=SimpleNamespace(public_url="", block_s=1.0, auto_adopt_s=1.0))
    endpoint = A2AServer(server, cfg)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    sock.setblocking(False)
    host, port = await endpoint.start(sock)
    print("missing", missing())
    print("at start", sorted(m for m in HEAVY if m in sys.modules))
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(b"GET /nothing-here HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n")
    status = (await reader.readline()).decode().strip()
    writer.close()
    print("first answer", status)
    print("after", sorted(m for m in HEAVY if m in sys.modules))
    await endpoint.stop()

asyncio.run(main())
"""


def test_the_a2a_app_is_loaded_by_the_first_connection_not_at_start():
    out = subprocess.run([sys.executable, "-c", _START], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "missing None"  # the extra is installed: served
    assert lines[1] == "at start []"
    assert lines[2].startswith("first answer HTTP/1.1 "), lines  # answered by uvicorn and the app
    assert lines[3] == "after ['a2a', 'google.protobuf', 'starlette', 'uvicorn']", lines
