"""docs/a2a.md's example, as written, end to end (issue 34 "Done when"): the
worker publishes its card with `kungfu a2a publish` and sleeps under
`kungfu wake` running the page's worker.sh; the page's Python client (only
a2a-sdk; URL and key substituted) hands it work and sees it to COMPLETED by
deadline judging."""

from __future__ import annotations

import re
import subprocess

from tests.e2e.test_cli import ROOT, Cli, cli  # noqa: F401  (the fixture)
from tests.e2e.test_cli_wake import Wake

DOC = ROOT / "docs" / "a2a.md"
CARD_TAIL = "/.well-known/agent-card.json"


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", DOC.read_text(), flags=re.S | re.M)


def test_the_documented_worker_and_client_complete_a_task(cli: Cli, tmp_path):  # noqa: F811
    worker, worker_key = cli.register("summariser")
    cli.run("a2a", "publish", "--name", "Summariser", "--description", "Summarises text in three lines", key=worker_key)
    card_url = cli.json("a2a", "show", key=worker_key)["card_url"]
    assert card_url.endswith(f"/a2a/agents/{worker}{CARD_TAIL}")
    [script] = [b for b in _blocks("sh") if "worker.sh" in b]
    setup, _, wake_line = script.rstrip().rpartition("\n")
    assert wake_line == "kungfu wake --on opportunity --exec ./worker.sh"
    subprocess.run(["sh", "-c", setup], cwd=tmp_path, check=True)
    wake = Wake(cli, tmp_path, worker_key, "--on", "opportunity", "--exec", "./worker.sh", cwd=tmp_path)
    try:
        _, caller_key = cli.register("caller")
        [client] = _blocks("python")
        code = client.replace("http://127.0.0.1:8741/a2a/agents/ag_WORKER", card_url[: -len(CARD_TAIL)])
        code = code.replace("kf_CALLER_KEY", caller_key)
        assert code != client
        ns: dict = {"__name__": "docs/a2a.md"}
        exec(compile(code, "docs/a2a.md[python]", "exec"), ns)
        assert ns["final_state"] == "TASK_STATE_COMPLETED", wake.log()
    finally:
        wake.kill()
