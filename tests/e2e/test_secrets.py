"""Secrets at rest and in messages (issue #25 round 3: findings 6 and 7, and
the file modes of the LMDB store; docs/decisions.md D234, D235).

- Every secret libpq accepts in a URI (``user:password@``, ``?password=``,
  ``?sslpassword=``) stays out of what ``serve``, ``check`` and ``migrate`` print.
- ``serve --workers N`` with a PostgreSQL store is refused in one line, exit 2.
- LMDB's ``data.mdb`` and ``lock.mdb``, and a backup's copy, are 0600.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from kungfud.store.postgres import redact_url
from tests.conftest import ROOT

SECRET = "S3cretPW"
UNREACHABLE = [
    f"postgresql://kf@127.0.0.1:1/kf?password={SECRET}",
    f"postgresql://kf@127.0.0.1:1/kf?sslmode=prefer&sslpassword={SECRET}",
    f"postgresql://kf:{SECRET}@127.0.0.1:1/kf?connect_timeout=2",
    f"postgres://kf@127.0.0.1:1/kf?pass%77ord={SECRET}",  # percent-encoded name: still libpq's password
]


def _kungfud(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kungfud", *args], cwd=ROOT, capture_output=True, text=True, timeout=60
    )


def test_redact_url_hides_every_password_libpq_reads_from_a_uri():
    for url in UNREACHABLE:
        shown = redact_url(url)
        assert SECRET not in shown and "127.0.0.1:1/kf" in shown, shown
    assert redact_url("postgresql://kf@db:5432/kf?sslmode=require") == "postgresql://kf@db:5432/kf?sslmode=require"
    assert redact_url("postgresql://kf@db/kf?password=x&sslmode=require") == "postgresql://kf@db/kf?password=***&sslmode=require"


@pytest.mark.parametrize("url", UNREACHABLE)
def test_serve_check_and_migrate_never_print_a_postgresql_password(tmp_path, url):
    """The review's repro (finding 6): an unreachable server, so each command
    fails on connecting and prints the URL it tried."""
    for args in (
        ["check", "--store", url, "--data-dir", str(tmp_path / "c")],
        ["serve", "--store", url, "--data-dir", str(tmp_path / "s"), "--listen", "127.0.0.1:0"],
        ["migrate", "--to", url, "--data-dir", str(tmp_path / "m")],
    ):
        r = _kungfud(*args)
        out = r.stdout + r.stderr
        assert r.returncode == 2, (args, out)
        assert "127.0.0.1:1" in out or args[0] == "migrate", out  # it does say which store
        assert SECRET not in out, (args[0], out)


def test_serve_workers_with_a_postgresql_store_is_refused_in_one_line(tmp_path):
    """Finding 7: it died with an AttributeError; now one clear line, exit 2."""
    r = _kungfud(
        "serve", "--workers", "2", "--store", "postgresql://kf@127.0.0.1:1/kf", "--data-dir", str(tmp_path / "d"),
        "--listen", "127.0.0.1:0",
    )
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "--workers" in lines[0] and "PostgreSQL" in lines[0], r.stderr
    assert "Error" not in r.stderr and "attribute" not in r.stderr


@pytest.mark.lmdb_only("the LMDB store's own files")
def test_lmdb_files_and_a_backup_copy_are_0600(daemon, tmp_path):
    lmdb_dir = daemon.data_dir / "lmdb"
    for name in ("data.mdb", "lock.mdb"):
        assert stat.S_IMODE((lmdb_dir / name).stat().st_mode) == 0o600, name
    r = _kungfud("backup", str(tmp_path / "bk"), "--data-dir", str(daemon.data_dir))
    assert r.returncode == 0, r.stderr
    copied = [p for p in (tmp_path / "bk").rglob("*") if p.is_file()]
    assert copied and all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in copied), [
        (p.name, oct(p.stat().st_mode)) for p in copied
    ]


@pytest.mark.lmdb_only("the LMDB store's own files")
def test_a_store_made_0644_before_is_made_0600_when_opened(tmp_path):
    from kungfud.store import Store

    data = tmp_path / "old"
    Store(str(data)).close()
    for name in ("data.mdb", "lock.mdb"):
        os.chmod(data / "lmdb" / name, 0o644)
    Store(str(data)).close()
    for name in ("data.mdb", "lock.mdb"):
        assert stat.S_IMODE((data / "lmdb" / name).stat().st_mode) == 0o600
