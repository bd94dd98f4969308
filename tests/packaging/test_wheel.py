"""Issue 8.6: ``pip install kungfud`` from a built wheel works in a clean venv —
the console scripts exist, the daemon starts on its defaults and serves (the
websocket and, issue 15, the web console's files)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import urllib.request
import venv
from pathlib import Path

from kungfud.server.console import FILES

ROOT = Path(__file__).resolve().parents[2]


def test_packaging_wheel_installs_in_a_clean_venv_and_the_daemon_serves(tmp_path):
    dist = tmp_path / "dist"
    r = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(ROOT)],
        capture_output=True, text=True, timeout=300,
    )
    assert r.returncode == 0, r.stderr
    (wheel,) = dist.glob("kungfud-*.whl")
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    r = subprocess.run([str(py), "-m", "pip", "install", "-q", str(wheel)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    for script in ("kungfud", "kungfu"):
        assert (env_dir / "bin" / script).exists(), script
    # The wheel holds the package only: run from a directory without the source tree.
    home = tmp_path / "home"
    home.mkdir()
    environ = {**os.environ, "HOME": str(home), "XDG_DATA_HOME": str(home / "data")}
    environ.pop("PYTHONPATH", None)
    proc = subprocess.Popen(
        [str(env_dir / "bin" / "kungfud"), "serve", "--listen", "127.0.0.1:0"],
        cwd=home, env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith("kungfud listening on ws://127.0.0.1:"), line + proc.stderr.read()
        url = line.split()[-1]
        assert (home / "data" / "kungfud" / "admin.key").exists()  # the platform default data dir
        smoke = (
            "import asyncio, json, sys\n"
            "from kungfud.client import Client\n"
            "async def main():\n"
            "    async with await Client.connect(sys.argv[1]) as c:\n"
            "        me = await c.act('agent.register', {'content': {'name': 'smoke'}})\n"
            "    async with await Client.connect(sys.argv[1], me['key']) as c:\n"
            "        m = await c.act('memory.create', {'content': {'hello': 'wheel'}})\n"
            "        print(json.dumps(await c.read('memory.get', {'memory': m['memory']})))\n"
            "asyncio.run(main())\n"
        )
        r = subprocess.run([str(py), "-c", smoke, url], cwd=home, env=environ, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["content"] == {"hello": "wheel"}
        # Issue 15: the console's static files are package data in the wheel,
        # and the daemon installed from it serves them.
        r = subprocess.run(
            [str(py), "-c", "import importlib.resources as r; print(sorted(f.name for f in r.files('kungfud.console').iterdir()))"],
            cwd=home, env=environ, capture_output=True, text=True, timeout=60,
        )
        assert r.returncode == 0, r.stderr
        assert {"index.html", "main.js", "console.css", "pages"} <= set(ast.literal_eval(r.stdout)), r.stdout
        base = "http://" + url.split("://", 1)[1].split("/", 1)[0]
        for path, marker in (
            ("/", b'src="/console/main.js"'),
            ("/console/main.js", b"sessionStorage"),
            ("/console/pages/threads.js", b"thread.post"),
            ("/console.css", b"#nav"),
        ):
            with urllib.request.urlopen(base + path, timeout=10) as resp:
                assert resp.status == 200 and marker in resp.read(), path
        # Every file of the console's fixed table (each ES module of its script) is in the wheel.
        for path in FILES:
            with urllib.request.urlopen(base + path, timeout=10) as resp:
                assert resp.status == 200 and resp.read(), path
    finally:
        proc.terminate()
        assert proc.wait(20) == 0
