"""A store that is not whole is refused at every start (review M4, issue 12).

LMDB trusts ``data.mdb``: a zero-length file was taken for a new store (a new
admin, ``admin.key`` overwritten, every fact gone), a truncated one was served
with data silently missing, and ``kungfud check`` died of SIGBUS reading past its
end. ``kungfud serve``, ``check`` and ``backup`` now check the file against
LMDB's own metadata before reading a page, and the fact log against what was
written with it, and refuse with one message naming the file (docs/decisions.md
D38).
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import lmdb
import pytest

from kungfud.store import Store
from kungfud.store.layout import u64
from tests.conftest import ROOT
from tests.store.test_check import run_random_actions


def _kungfud(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kungfud", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


def _serve(data: Path) -> subprocess.CompletedProcess:
    """Start a daemon that must refuse: it exits by itself (no readiness line)."""
    return _kungfud("serve", "--data-dir", str(data), "--listen", "127.0.0.1:0")


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory) -> Path:
    """A stopped data directory with facts spread over many pages."""
    d = tmp_path_factory.mktemp("whole") / "data"
    store = Store(str(d))
    try:
        run_random_actions(store, waves=10)
    finally:
        store.close()
    return d


@pytest.fixture
def data(store_dir, tmp_path) -> Path:
    dst = tmp_path / "data"
    shutil.copytree(store_dir, dst)
    return dst


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _one_clear_message(r: subprocess.CompletedProcess, *needles: str) -> None:
    """Exit 2 (never a signal), no traceback, one message naming what is wrong."""
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and "listening" not in r.stdout, r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, r.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


def _page(data: Path) -> int:
    env = lmdb.open(str(data / "lmdb"), readonly=True, lock=False, max_dbs=32)
    try:
        return env.stat()["psize"]
    finally:
        env.close()


@pytest.mark.rules("L1-4")
@pytest.mark.parametrize("damage", ["zero-length", "half-truncated", "one-page-short"])
def test_L1_4_truncated_store_is_refused_by_serve_check_and_backup_and_admin_key_kept(data, tmp_path, damage):
    mdb = data / "lmdb" / "data.mdb"
    size = mdb.stat().st_size
    assert size >= 20 * _page(data), "the fixture should span many pages"
    cut = {"zero-length": 0, "half-truncated": size // 2, "one-page-short": size - _page(data)}[damage]
    with open(mdb, "r+b") as f:
        f.truncate(cut)
    key_before = _digest(data / "admin.key")
    what = "is empty (0 bytes)" if damage == "zero-length" else "is truncated"

    _one_clear_message(_serve(data), str(mdb), what)
    assert _digest(data / "admin.key") == key_before, "admin.key was overwritten"
    assert mdb.stat().st_size == cut, "the refused store was written to"

    check = _kungfud("check", "--data-dir", str(data))
    _one_clear_message(check, str(mdb), what)  # not SIGBUS (-7), not a traceback

    backup = _kungfud("backup", str(tmp_path / "bk"), "--data-dir", str(data))
    _one_clear_message(backup, str(mdb), what)
    assert not (tmp_path / "bk" / "lmdb" / "data.mdb").exists()
    assert _digest(data / "admin.key") == key_before and mdb.stat().st_size == cut


@pytest.mark.rules("L1-4")
def test_L1_4_the_whole_store_at_its_exact_size_is_served_and_checked(data):
    """The size rule is exact: the untouched file (not one byte more) passes."""
    mdb = data / "lmdb" / "data.mdb"
    assert mdb.stat().st_size % _page(data) == 0
    r = _kungfud("check", "--data-dir", str(data))
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout + r.stderr
    proc = subprocess.Popen(
        [sys.executable, "-m", "kungfud", "serve", "--data-dir", str(data), "--listen", "127.0.0.1:0"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("kungfud listening on "), (line, proc.stderr.read() if proc.poll() is not None else "")
    finally:
        proc.terminate()
        assert proc.wait(20) == 0


@pytest.mark.rules("L1-4")
@pytest.mark.parametrize("left", ["admin.key", "kungfud.lock"])
def test_L1_4_a_directory_that_held_a_store_is_not_new_when_the_store_is_gone(data, left):
    """A directory with an admin key or a lock file but no store is not new: no
    fresh store, no new admin over it."""
    shutil.rmtree(data / "lmdb")
    for name in ("admin.key", "kungfud.lock"):
        if name != left:
            (data / name).unlink()
    before = {p.name: _digest(p) for p in data.iterdir()}
    _one_clear_message(_serve(data), str(data / "lmdb" / "data.mdb"), "is missing", left)
    assert {p.name: _digest(p) for p in data.iterdir()} == before, "the refusal created or changed files"


@pytest.mark.rules("L1-4")
def test_L1_4_an_admin_key_beside_a_store_without_facts_is_never_overwritten(tmp_path):
    data = tmp_path / "data"
    Store(str(data)).close()  # a store with no facts (e.g. its first start died)
    (data / "admin.key").write_text("kf_an_earlier_key\n")
    _one_clear_message(_serve(data), str(data / "admin.key"), "never overwritten")
    assert (data / "admin.key").read_text() == "kf_an_earlier_key\n"


def _tamper(data: Path, edit) -> None:
    env = lmdb.open(str(data / "lmdb"), max_dbs=32)
    try:
        with env.begin(write=True) as txn:
            edit(env, txn)
    finally:
        env.close()


def _last_seq(env, txn) -> int:
    return int.from_bytes(txn.get(b"seq", db=env.open_db(b"meta", txn=txn)), "big")


@pytest.mark.rules("L1-4")
def test_L1_4_a_fact_log_shorter_than_its_recorded_seq_is_refused(data):
    """The log lost its last facts (meta still names them): refused at start and
    by backup, reported by check, and never rebuilt from."""

    def drop_tail(env, txn):
        log = env.open_db(b"log", txn=txn)
        seq = _last_seq(env, txn)
        for s in (seq, seq - 1):
            assert txn.delete(u64(s), db=log)

    _tamper(data, drop_tail)
    mdb = str(data / "lmdb" / "data.mdb")
    _one_clear_message(_serve(data), mdb, "is not consistent", "fact log should hold facts 1..")
    _one_clear_message(_kungfud("backup", str(data.parent / "bk"), "--data-dir", str(data)), mdb, "is not consistent")
    for extra in ((), ("--rebuild",)):
        r = _kungfud("check", "--data-dir", str(data), *extra)
        assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
        assert "Traceback" not in r.stderr
        assert "log: the fact log should hold facts 1.." in r.stdout
        assert "the fact log is damaged" in r.stdout
    assert "nothing rebuilt" in r.stdout


@pytest.mark.rules("L1-4")
def test_L1_4_check_reports_a_fact_that_does_not_decode(data):
    def garble(env, txn):
        log = env.open_db(b"log", txn=txn)
        txn.put(u64(_last_seq(env, txn) // 2), b"\xc1 not msgpack", db=log)

    _tamper(data, garble)
    r = _kungfud("check", "--data-dir", str(data))
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and r.stderr == ""
    assert "does not decode or apply" in r.stdout and "the fact log is damaged" in r.stdout


@pytest.mark.rules("L1-4")
def test_L1_4_a_last_fact_without_its_object_snapshot_is_refused_at_start(data):
    """The cheap start-up check: the last fact's objects were written with it."""
    from kungfud.store.layout import decode_fact

    def drop_object(env, txn):
        fact = decode_fact(txn.get(u64(_last_seq(env, txn)), db=env.open_db(b"log", txn=txn)))
        obj = next(iter(fact.objects()))
        assert txn.delete(obj.encode(), db=env.open_db(b"objects", txn=txn))

    _tamper(data, drop_object)
    _one_clear_message(_serve(data), "is not consistent", "object snapshot is missing", "kungfud check")
    r = _kungfud("check", "--data-dir", str(data))
    assert r.returncode == 1 and "objects: missing" in r.stdout, r.stdout + r.stderr


@pytest.mark.rules("L1-4")
def test_L1_4_a_data_mdb_that_is_not_an_lmdb_file_is_refused_naming_it(data):
    mdb = data / "lmdb" / "data.mdb"
    size = mdb.stat().st_size
    with open(mdb, "r+b") as f:
        f.write(b"\x00" * 2 * _page(data))  # both meta pages gone, size unchanged
    for r in (_serve(data), _kungfud("check", "--data-dir", str(data))):
        _one_clear_message(r, str(mdb), "is not an LMDB store")
    assert mdb.stat().st_size == size
