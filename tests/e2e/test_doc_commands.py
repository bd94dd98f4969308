"""Every command line the docs show runs as shown (issue 37 §2): each ``sh``
block of README.md, docs/*.md and examples/**/*.md that runs ``kungfu`` or
``kungfud`` is run, verbatim, by ``bash -e -o pipefail`` in a subprocess against
one shared live daemon, blocks in parallel; a line that fails fails the test
with its file and line. A new doc line is covered as soon as it is written.

What is substituted, and why (the only differences from what a reader types):

- **Documented values** (:data:`VALUES`): the daemon's address
  ``ws://127.0.0.1:8740/v1``, and the operator's paths (``/var/lib/kungfud``,
  ``/etc/kungfud.toml``, ``/backups/``, ``/var/log/``), become this test's, and
  ``https://hooks.example.com/kungfu`` (which does not resolve offline) a local
  port nothing answers, allowed by the daemon's ``[webhooks] allow_hosts``. Each
  block gets a fresh ``HOME`` whose ``~/.local/share/kungfud`` is the shared
  daemon's data directory (so ``admin.key`` is where the docs say), and a fresh
  working directory (``examples`` links to the repository's).
- **Placeholders for live values**: ``kf_…`` is the key of an agent staged for the
  block (:func:`stage`): it owes responses to entries 3 and 4 of a Thread
  (``th_…``), has taken an assignment there (``as_…``) and has a delivery of a
  Task of its own to judge (``en_…``); ``ag_…`` is another fresh agent. A block
  that needs neither runs as a fresh agent (``KUNGFU_KEY``). Values a block makes
  itself (``$TH``, ``$AS``, ``$EN`` …) come from its earlier lines, as for a reader.
- **Programs on PATH** (:data:`SHIMS`): ``kungfu`` and ``kungfud`` are this tree's;
  one that runs until stopped (``kungfu watch``/``wake``, ``kungfud serve``,
  ``kungfud mcp --http``) passes when it is still running after
  :data:`LONG_S` seconds (``timeout``'s 124) or exits 0 before; ``kungfud serve``
  and ``kungfud mcp --http`` listen on a free port (and ``serve`` on a fresh data
  directory unless the line names one), so nothing collides with a daemon of the
  machine. Programs that are not kungfud's (``pip``, ``python3 -m venv``,
  ``claude``) succeed without doing anything: the docs' lines for them are about
  those programs.

A ``python`` block whose first line is ``# NAME.py…`` is a file the shell blocks
of its page run (``python NAME.py``): it is written to each working directory of
that page's blocks. A receiver's port ``8750`` becomes a free one. Whatever a
block started in the background is stopped when its last line has run.

A block that starts with ``#!`` is a script the docs show "as it stands" in
examples/: it must be that file, byte for byte (test_agents_sleep.py runs it).
:data:`NOT_RUN` lists the one block that needs a server this test does not have,
with the test that covers it instead.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cluster import Daemon

ROOT = Path(__file__).resolve().parent.parent.parent
LONG_S = 4  # a long-running command that is still up after this long started fine
SHELL_LANGS = {"sh", "bash", "shell"}
COMMAND = re.compile(r"(^|[\s;|&($`'\"=])(\.venv/bin/)?kungfud?(\s|$)")

VALUES = {
    "ws://127.0.0.1:8740/v1": "$DOC_URL",
    "/var/lib/kungfud": "~/.local/share/kungfud",
    "/etc/kungfud.toml": "~/kungfud.toml",
    "/backups/": "~/backups/",
    "/var/log/": "~/",
    "kf_…": "$DOC_KEY",
    "th_…": "$DOC_TH",
    "as_…": "$DOC_AS",
    "en_…": "$DOC_EN",
    "ag_…": "$DOC_AG",
    "kungfu COMMAND --help": "kungfu turn --help",
    # example.com does not resolve offline, and the daemon resolves a webhook's
    # host when it is set: a port on this host nothing answers (allow_hosts below)
    "https://hooks.example.com/kungfu": "http://127.0.0.1:9/kungfu",
}

#: The daemon's config: what docs/webhooks.md "Try it on one machine" writes.
HOOKS_TOML = '[webhooks]\nallow_hosts = ["127.0.0.1"]\n'
HOOKS_LINE = "printf '" + HOOKS_TOML.replace("\n", "\\n") + "' > kungfud-hooks.toml"

#: Blocks not run here: a distinctive line of the block → why, and what covers it.
NOT_RUN = {
    "pg_dump -Fc postgresql://kungfud@db:5432/kungfu": (
        "a PostgreSQL backup with PostgreSQL's tools at a server named db; "
        "tests/store/test_pg_kv.py checks a restored store with `kungfud check --store`"
    ),
}

_KUNGFU_SHIM = r"""#!/bin/bash
# this tree's PROG, as docs/…'s reader runs it; long-running commands are stopped after LONG_S s
prog=PROG
sub= skip=
for a in "$@"; do
  if [ -n "$skip" ]; then skip=; continue; fi
  case $a in --profile|--url|--config|--key|--data-dir|--store) skip=1 ;; -*) ;; *) sub=$a; break ;; esac
done
extra=() long=
case "$prog $sub" in
  "kungfu watch"|"kungfu wake") long=1 ;;
  "kungfud serve")
    long=1
    case " $* " in *" --listen "*) ;; *) extra+=(--listen 127.0.0.1:0) ;; esac
    case " $* " in *" --data-dir "*|*" --store "*) ;; *) extra+=(--data-dir "$(mktemp -d "$HOME/serve-XXXX")") ;; esac ;;
  "kungfud mcp")
    case " $* " in *" --http "*) long=1; extra+=(--listen 127.0.0.1:0) ;; esac ;;
esac
if [ "$prog" = kungfu ]; then mod=kungfud.agent_cli; else mod=kungfud; fi
if [ -z "$long" ]; then exec "$DOC_PYTHON" -m $mod "$@" "${extra[@]}"; fi
rc=0
timeout -s INT LONG_S "$DOC_PYTHON" -m $mod "$@" "${extra[@]}" || rc=$?
[ $rc -eq 124 ] && exit 0
exit $rc
"""

SHIMS = {
    "kungfu": _KUNGFU_SHIM.replace("PROG", "kungfu").replace("LONG_S", str(LONG_S)),
    "kungfud": _KUNGFU_SHIM.replace("PROG", "kungfud").replace("LONG_S", str(LONG_S)),
    "python": '#!/bin/sh\nexec "$DOC_PYTHON" "$@"\n',
    "python3": '#!/bin/sh\n[ "$1 $2" = "-m venv" ] && exit 0\nexec "$DOC_PYTHON" "$@"\n',
    "pip": "#!/bin/sh\nexit 0\n",
    "claude": "#!/bin/sh\nexit 0\n",
}


@dataclass
class Block:
    doc: str
    line: int  # of the block's first line in doc
    text: str

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "examples").rglob("*.md"))]


def fenced(path: Path) -> list[tuple[str, int, str]]:
    """(language, first line, text) of every fenced block of ``path``."""
    lines = path.read_text().split("\n")
    out, i = [], 0
    while i < len(lines):
        m = re.match(r"\s*```(\S*)\s*$", lines[i])
        if m:
            j = i + 1
            while not lines[j].strip().startswith("```"):
                j += 1
            out.append((m.group(1), i + 2, "\n".join(lines[i + 1 : j]) + "\n"))
            i = j
        i += 1
    return out


def runs_kungfu(text: str) -> bool:
    return any(COMMAND.search(line.split("#", 1)[0] if not line.startswith("#!") else "") for line in text.splitlines())


def command_blocks() -> list[Block]:
    return [
        Block(str(p.relative_to(ROOT)), line, text)
        for p in doc_files()
        for lang, line, text in fenced(p)
        if lang in SHELL_LANGS and runs_kungfu(text)
    ]


def page_files(doc: str) -> dict[str, str]:
    """The files a page shows as ``python`` blocks that start ``# NAME.py``."""
    return {
        m.group(1): text
        for lang, _, text in fenced(ROOT / doc)
        if lang == "python" and (m := re.match(r"# (\w+\.py)\b", text))
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kungfu(env: dict, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "kungfud.agent_cli", *args], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, (args, done.stderr)
    return done.stdout.strip()


def register(env: dict, name: str) -> tuple[str, str]:
    import json

    got = json.loads(kungfu(env, "register", name, "--json"))
    return got["agent"], got["key"]


def stage(env: dict) -> dict:
    """The live values behind ``kf_…``, ``th_…``, ``as_…``, ``en_…`` and ``ag_…``."""
    import json

    lead_id, lead = register(env, "lead")
    me, key = register(env, "me")
    as_lead, as_me = {**env, "KUNGFU_KEY": lead}, {**env, "KUNGFU_KEY": key}

    def j(e, *args):
        return json.loads(kungfu(e, *args, "--json"))

    th = j(as_lead, "thread", "create", "--title", "docs")["thread"]
    kungfu(as_me, "thread", "join", j(as_lead, "thread", "admit", th, "--role", "speaker")["token"])
    assignment = j(as_lead, "post", th, "--text", "write it", "--assign-to", me, "--criteria", "any")["assignment"]
    kungfu(as_me, "take", assignment)  # entry 1
    kungfu(as_lead, "post", th, "--text", "fyi", "--no-ask")  # entry 2
    kungfu(as_lead, "post", th, "--text", "question 3", "--ask", me)
    kungfu(as_lead, "post", th, "--text", "question 4", "--ask", me)
    task = j(as_me, "task", "create", "--output", "a word", "--criteria", "any")["task"]
    engagement = j(as_lead, "take", task, "--text", "word")["engagement"]
    other, _ = register(env, "other")
    return {"DOC_KEY": key, "DOC_TH": th, "DOC_AS": assignment, "DOC_EN": engagement, "DOC_AG": other}


@pytest.fixture(scope="module")
def doc_daemon(tmp_path_factory):
    # One single-process LMDB daemon whatever --nodes says: the docs' lines are
    # about the command lines (cluster shapes have their own tests), and some of
    # them (kungfud backup, check --data-dir) read its LMDB data directory.
    tmp = tmp_path_factory.mktemp("doc_commands")
    (tmp / "kungfud.toml").write_text(HOOKS_TOML)
    d = Daemon(tmp / "data", tmp / "kungfud.toml").start()
    yield d
    d.stop()


def prepare(block: Block, tmp: Path, daemon: Daemon) -> tuple[list[str], dict, Path]:
    home, cwd, shim = tmp / "home", tmp / "cwd", tmp / "shim" / "bin"
    for p in (home / ".local" / "share", cwd, shim):
        p.mkdir(parents=True)
    (home / ".local" / "share" / "kungfud").symlink_to(daemon.data_dir)
    (home / "kungfud.toml").write_text("[server]\nopen_registration = false\n")
    (cwd / "examples").symlink_to(ROOT / "examples")
    (cwd / ".venv").symlink_to(shim.parent)
    for name, text in SHIMS.items():
        (shim / name).write_text(text)
        (shim / name).chmod(0o755)
    env = {
        "HOME": str(home), "PATH": f"{shim}{os.pathsep}{os.environ['PATH']}", "DOC_PYTHON": sys.executable,
        "DOC_URL": daemon.url, "KUNGFU_URL": daemon.url, "PYTHONPATH": str(ROOT), "LANG": "C.UTF-8",
    }
    text = block.text
    if any(p in text for p in ("kf_…", "th_…", "as_…", "en_…", "ag_…")):
        env.update(stage(env))
    env["KUNGFU_KEY"] = register(env, "reader")[1]
    port = str(free_port())
    values = {**VALUES, "127.0.0.1:8750": f"127.0.0.1:{port}", '("127.0.0.1", 8750)': f'("127.0.0.1", {port})'}
    for doc_value, ours in values.items():
        text = text.replace(doc_value, ours)
    for name, file_text in page_files(block.doc).items():
        for doc_value, ours in values.items():
            file_text = file_text.replace(doc_value, ours)
        (cwd / name).write_text(file_text)
    trap = "trap 'echo \"doc-commands: line $LINENO failed: $BASH_COMMAND\" >&2' ERR\n"
    return ["bash", "-e", "-o", "pipefail", "-c", trap + text], env, cwd


def run_block(block: Block, tmp: Path, daemon: Daemon) -> str | None:
    """None when every line of ``block`` ran; else what failed, where."""
    args, env, cwd = prepare(block, tmp, daemon)
    out, err = tmp / "stdout", tmp / "stderr"
    with open(out, "w") as o, open(err, "w") as e:
        proc = subprocess.Popen(args, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=o, stderr=e, start_new_session=True)
        try:
            code = proc.wait(120)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            try:  # what the block left in the background (a receiver, a daemon)
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
    if code == 0:
        return None
    stderr = err.read_text()
    if code is None:
        return f"{block.where}: did not end within 120 s\n{stderr[-1500:]}"
    m = re.search(r"doc-commands: line (\d+) failed: (.*)", stderr)
    where = f"{block.doc}:{block.line + int(m.group(1)) - 2}" if m else block.where
    return f"{where}: exit {code}\n{stderr[-1500:]}"


def test_the_docs_show_command_lines_and_name_what_is_not_run():
    blocks = command_blocks()
    docs = {b.doc for b in blocks}
    assert {"README.md", "docs/cli.md", "docs/agents.md", "docs/webhooks.md", "docs/operations.md", "docs/mcp.md"} <= docs, docs
    assert sum(HOOKS_LINE in b.text for b in blocks) == 1, "the daemon here is not configured as webhooks.md's box says"
    for line in NOT_RUN:
        assert sum(line in b.text for b in blocks) == 1, f"NOT_RUN names a block the docs no longer have: {line!r}"
    # a block of commands must say it is one, or it would not be run
    for p in doc_files():
        for lang, line, text in fenced(p):
            if lang == "" and runs_kungfu(text) and any(re.match(r"\$?\s*kungfud? ", t) for t in text.splitlines()):
                raise AssertionError(f"{p.relative_to(ROOT)}:{line}: a block of commands needs ```sh (or ```text for output)")


def test_the_scripts_the_docs_show_are_the_examples_as_they_stand():
    scripts = {p.read_text(): p for p in (ROOT / "examples").rglob("*.sh")}
    shown = [b for b in command_blocks() if b.text.startswith("#!")]
    assert shown
    for b in shown:
        assert b.text in scripts, f"{b.where}: the script shown is not a file of examples/ as it stands"


def test_every_command_line_the_docs_show_runs_verbatim(doc_daemon, tmp_path):
    blocks = [
        b for b in command_blocks() if not b.text.startswith("#!") and not any(line in b.text for line in NOT_RUN)
    ]
    assert len(blocks) >= 10
    with ThreadPoolExecutor(max_workers=4) as pool:
        failures = [
            f for f in pool.map(lambda ib: run_block(ib[1], tmp_path / f"b{ib[0]}", doc_daemon), enumerate(blocks)) if f
        ]
    shutil.rmtree(tmp_path, ignore_errors=True)
    assert not failures, "\n\n".join(failures)


def test_webhook_set_keeps_the_webhook_url_apart_from_the_daemons():
    """The blocker of issue 37: ``webhook set URL`` stored URL as the global
    ``--url`` (the daemon's), wherever ``--url`` stood on the line."""
    from kungfud.agent_cli import plan

    hook, daemon = "https://hooks.example.com/kungfu", "ws://127.0.0.1:9999/v1"
    for argv in (
        ["webhook", "set", hook],
        ["--url", daemon, "webhook", "set", hook],
        ["webhook", "set", hook, "--url", daemon, "--events", "turn,outcome"],
    ):
        ns, call = plan(argv)
        assert call.op == "webhook.set" and call.args["url"] == hook, argv
        assert getattr(ns, "url", None) == (daemon if "--url" in argv else None), argv
