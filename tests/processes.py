"""No process the suite starts outlives it (issue 37 §3).

Every pytest process (the only one, or each xdist worker and the controller)
makes itself a *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``, Linux): a
process the suite started whose parent exits — a daemon's worker after its
supervisor was killed, a command a shell started, ``pg_ctl``'s server — is
re-parented to the pytest process instead of to init, so it stays among the
pytest process's descendants, where :func:`survivors` finds it. After each test
the new descendants are noted with the test they were first seen after, so the
message at the end names the test that started a leftover.

At the end of the session (every fixture torn down) any descendant still
running after a grace period is a leak: it is named (pid, command line, the
test), killed, and the session fails.
"""

from __future__ import annotations

import ctypes
import os
import signal
import time

_PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Adopt this process's orphaned descendants; False where the OS cannot."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _stat(pid: int) -> tuple[int, str] | None:
    """(parent pid, state letter) of ``pid``, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[1]), fields[0]
    except (OSError, IndexError, ValueError):
        return None


def descendants(root: int, skip: frozenset[int] = frozenset()) -> set[int]:
    """The running (not zombie) processes below ``root``; the subtrees of ``skip`` left out."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _stat(int(name))
            if st is not None and st[1] != "Z":
                children.setdefault(st[0], []).append(int(name))
    found: set[int] = set()
    todo = [root]
    while todo:
        for pid in children.get(todo.pop(), ()):
            if pid not in skip and pid not in found:
                found.add(pid)
                todo.append(pid)
    return found


def command_line(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip() or "?"
    except OSError:
        return "?"


class Tracker:
    """The descendants of this process, each with the test it was first seen after."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.seen: dict[int, str] = {}

    def note(self, test: str, skip: frozenset[int] = frozenset()) -> None:
        for pid in descendants(self.pid, skip):
            self.seen.setdefault(pid, test)

    def survivors(self, grace: float = 10.0, skip: frozenset[int] = frozenset()) -> list[str]:
        """Descendants still running after ``grace`` seconds, each named, then
        killed (SIGKILL); an empty list when every process the suite started has ended."""
        deadline = time.monotonic() + grace
        while (left := descendants(self.pid, skip)) and time.monotonic() < deadline:
            time.sleep(0.1)
        named = [
            f"pid {pid}: {command_line(pid)} (started by {self.seen.get(pid, 'the session')})" for pid in sorted(left)
        ]
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        return named
