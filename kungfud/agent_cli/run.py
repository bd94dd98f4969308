"""``kungfu``'s entry point: :func:`plan` the command line, run it in the shell,
and map how it ended to an exit status (:data:`EXIT_CODES`)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from .call import PlannedCall
from .exits import EXIT_CODES, CommandFailed, UsageError
from .plan import plan
from .profiles import settings
from .render import Out
from .shell import NEW_KEY_OPS, run_call, run_new_key, run_register
from .wake import run_wake
from .watch import run_watch

__all__ = ["main"]


async def _run(ns: argparse.Namespace, call: PlannedCall | None, out: Out) -> int:
    if ns.cmd == "register":
        return await run_register(ns, out)
    st = settings(ns)
    if ns.cmd == "watch":
        return await run_watch(st, ns, out)
    if ns.cmd == "wake":
        return await run_wake(st, ns, out)
    assert call is not None
    if call.op in NEW_KEY_OPS and call.is_action and ns.cmd != "call":
        return await run_new_key(st, ns, call, out)
    return await run_call(st, call, out)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        ns, call = plan(argv)
    except SystemExit as e:  # argparse: --help (0) or a usage error (2)
        return e.code if isinstance(e.code, int) else EXIT_CODES["usage"]
    except UsageError as e:
        print(f"kungfu: error: {e}", file=sys.stderr)
        return EXIT_CODES["usage"]
    out = Out(bool(getattr(ns, "json", False)), bool(getattr(ns, "ids", False)))
    try:
        return asyncio.run(_run(ns, call, out))
    except UsageError as e:
        print(f"kungfu: error: {e}", file=sys.stderr)
        return EXIT_CODES["usage"]
    except CommandFailed as e:
        return out.error(e.error)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader of stdout went away (`kungfu watch | head`): stop quietly.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0

