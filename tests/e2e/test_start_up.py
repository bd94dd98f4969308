"""A start that fails leaves nothing behind and says why (issue 15 "Operators" 3;
review "Cosmetic").

``kungfud serve`` binds its port before it creates a data directory or an admin
agent: a busy port used to leave a new directory with a lock file, a store and
an ``admin.key`` of an admin nobody would use. A ``--data-dir`` naming a file
said ``[Errno 17] File exists``.
"""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from tests.conftest import ROOT


def _serve(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kungfud", "serve", *args], cwd=ROOT, capture_output=True, text=True, timeout=60
    )


@pytest.mark.rules("L2-1", "L2-4")
def test_L2_1_a_busy_port_leaves_no_data_directory_and_no_admin_key(tmp_path):
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        data = tmp_path / "data"
        r = _serve("--data-dir", str(data), "--listen", f"127.0.0.1:{port}")
        assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
        assert f"cannot listen on 127.0.0.1:{port}" in r.stderr and "Traceback" not in r.stderr, r.stderr
        assert "listening" not in r.stdout
        assert not data.exists(), sorted(p.name for p in data.rglob("*"))
        # An existing, empty directory stays empty: no lock file, no store, no key.
        data.mkdir()
        r = _serve("--data-dir", str(data), "--listen", f"127.0.0.1:{port}")
        assert r.returncode == 2, r.stderr
        assert list(data.iterdir()) == []
    finally:
        holder.close()


@pytest.mark.rules("L2-4")
def test_L2_4_a_data_dir_that_is_a_file_is_refused_with_a_clear_message(tmp_path):
    not_a_dir = tmp_path / "data"
    not_a_dir.write_text("a file\n")
    r = _serve("--data-dir", str(not_a_dir), "--listen", "127.0.0.1:0")
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stderr.strip() == f"kungfud: data directory {not_a_dir} exists and is not a directory", r.stderr
    assert not_a_dir.read_text() == "a file\n"
