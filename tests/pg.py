"""A throwaway PostgreSQL cluster for tests (issue 16; docs/storage.md "PostgreSQL").

:class:`PgCluster` runs ``initdb`` in a temporary directory (as the ``postgres``
user when the tests run as root, since ``initdb`` refuses root; as the current
user otherwise), with trust authentication, ``fsync=on`` (the durability tests
need it), a free TCP port on 127.0.0.1 and its unix socket in the same
directory; ``pg_ctl -w`` starts it and ``pg_ctl -m immediate`` stops it (as a
crash would). :meth:`PgCluster.new_database` gives each test its own database.

The session-scoped fixture ``pg_server`` yields one cluster for the whole run
(a test module uses it with ``from tests.pg import pg_server``); it skips, with
one line saying why, only when no PostgreSQL binaries are installed. Under
pytest-xdist each worker is a session of its own, so each worker that needs one
runs its own cluster (its own temp dir, port and socket): nothing is shared.
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from typing import Iterator

import pytest

__all__ = ["PgCluster", "find_bindir", "pg_server"]

_RUN_AS = "postgres"


def find_bindir() -> str | None:
    """The directory of ``initdb`` and ``pg_ctl``: the newest
    ``/usr/lib/postgresql/*/bin`` (Debian), else from PATH; None if neither."""
    found = []
    for d in glob.glob("/usr/lib/postgresql/*/bin"):
        version = os.path.basename(os.path.dirname(d))
        if os.path.isfile(os.path.join(d, "initdb")) and version.isdigit():
            found.append((int(version), d))
    if found:
        return max(found)[1]
    initdb = shutil.which("initdb")
    if initdb and shutil.which("pg_ctl"):
        return os.path.dirname(initdb)
    return None


_SHORT_TMP = "/tmp" if os.path.isdir("/tmp") else None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgCluster:
    """One PostgreSQL server on a temporary data directory, owned by this process."""

    def __init__(self, bindir: str, *, root: str | None = None):
        self.bindir = bindir
        # Directly under /tmp, not under $TMPDIR or pytest's basetemp: the server's
        # socket (ROOT/.s.PGSQL.PORT) must fit AF_UNIX's 107 bytes.
        self.root = tempfile.mkdtemp(prefix="kf-pg-", dir=root or _SHORT_TMP)
        self.data = os.path.join(self.root, "data")
        self.socket_dir = self.root
        self.log = os.path.join(self.root, "server.log")
        self.port = _free_port()
        self.host = "127.0.0.1"
        self._ids = itertools.count(1)
        # initdb refuses root: run every server command as an unprivileged user.
        self._user: str | None = None
        if os.geteuid() == 0:
            self._user = _RUN_AS
            pw = pwd.getpwnam(_RUN_AS)
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
        os.chmod(self.root, 0o755)  # the socket must be reachable by us when the server is another user
        self.superuser = self._user or pwd.getpwuid(os.geteuid()).pw_name
        self._run(
            "initdb", "-D", self.data, "-A", "trust", "-U", self.superuser, "-E", "UTF8", "--locale=C", "--no-sync"
        )
        with open(os.path.join(self.data, "postgresql.conf"), "a") as f:
            f.write(
                "\n# kungfud tests (tests/pg.py)\n"
                f"listen_addresses = '{self.host}'\n"
                f"unix_socket_directories = '{self.socket_dir}'\n"
                "fsync = on\n"
                "synchronous_commit = on\n"
                "max_connections = 200\n"
                "shared_buffers = 32MB\n"
                "log_min_messages = warning\n"
            )
        # A free port can be taken between the look and the bind (xdist workers
        # each start a cluster of their own at once): another one, a few times.
        for attempt in range(5):
            with open(os.path.join(self.data, "postgresql.conf"), "a") as f:
                f.write(f"port = {self.port}\n")  # the last setting wins
            try:
                self.start()
                return
            except RuntimeError:
                if attempt == 4:
                    raise
                self.port = _free_port()

    # --- the server ---------------------------------------------------------------

    def _run(self, tool: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        cmd = [os.path.join(self.bindir, tool), *args]
        if self._user is not None:
            cmd = ["runuser", "-u", self._user, "--", *cmd]
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
        if check and proc.returncode != 0:
            raise RuntimeError(f"{tool} failed ({proc.returncode}): {proc.stdout.strip()[-2000:]}")
        return proc

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        self._run("pg_ctl", "-D", self.data, "-l", self.log, "-w", "-t", "60", "start")

    def stop(self) -> None:
        """Stop at once, as a crash would (``-m immediate``: no checkpoint; the
        next start recovers from the WAL)."""
        self._run("pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop", check=False)

    def restart(self) -> None:
        self.stop()
        self.start()

    def running(self) -> bool:
        return self._run("pg_ctl", "-D", self.data, "status", check=False).returncode == 0

    def destroy(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    # --- databases ----------------------------------------------------------------

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://{self.superuser}@{self.host}:{self.port}/{dbname}"

    def new_database(self) -> str:
        """A new empty database ``kf_<n>``; its URL."""
        import psycopg

        name = f"kf_{next(self._ids)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgCluster]:
    bindir = find_bindir()
    if bindir is None:
        pytest.skip("no PostgreSQL binaries (initdb, pg_ctl) in /usr/lib/postgresql/*/bin or on PATH")
    cluster = PgCluster(bindir)
    try:
        yield cluster
    finally:
        cluster.destroy()
