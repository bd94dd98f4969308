"""``kungfu watch``: subscribe and print events, resuming after the last one
printed (``--state-file``) and after a lost connection (``since``)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from pathlib import Path

from .exits import Failed, UsageError
from .profiles import Settings
from .render import Out, render_event
from .shell import REPLY_TIMEOUT_S, handshake_failure

__all__ = ["run_watch"]

def _read_state(path: Path | None) -> int | None:
    if path is None:
        return None
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise UsageError(f"cannot read state file {path}: {e.strerror}") from None
    try:
        return int(text)
    except ValueError:
        raise UsageError(f"state file {path} should hold one seq number, not {text[:40]!r}") from None


def _write_state(path: Path | None, seq: int) -> None:
    if path is None:
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(f"{seq}\n")
        os.replace(tmp, path)
    except OSError as e:
        raise UsageError(f"cannot write state file {path}: {e.strerror or e}") from None


async def run_watch(st: Settings, ns: argparse.Namespace, out: Out) -> int:
    """``subscribe {since}`` and print events. The seq of each event is saved
    after it is printed, so a restart resumes after the last one printed: no
    gap, and at most the last event twice if killed between the two. A lost
    connection is resubscribed with ``since``."""
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed

    if not st.key:
        raise Failed("unauthenticated", "no agent key: set KUNGFU_KEY or pass --profile NAME", "revise")
    state = Path(ns.state_file).expanduser() if ns.state_file else None
    since = ns.since if ns.since is not None else _read_state(state)
    seen = 0
    last = time.monotonic()
    backoff = 0.2
    connected_once = False

    def left() -> float | None:
        return None if ns.timeout is None else max(0.0, ns.timeout - (time.monotonic() - last))

    while True:
        try:
            ws = await connect(
                st.url, additional_headers={"Authorization": f"Bearer {st.key}"}, compression=None, max_size=None, open_timeout=10
            )
        except Exception as e:
            failure = handshake_failure(e, st.url)
            if not connected_once or not isinstance(failure, Failed) or failure.error["code"] != "cannot_connect":
                raise failure from None
            if left() == 0.0:
                return 0
            await asyncio.sleep(min(backoff, left() or backoff))
            backoff = min(backoff * 2, 5.0)
            continue
        async with ws:
            backoff = 0.2
            args: dict = {} if since is None else {"since": since}
            if ns.open_tasks:
                args["open_tasks"] = True
            try:
                await ws.send(json.dumps({"id": "watch", "op": "subscribe", "args": args}))
            except (ConnectionClosed, OSError):
                pass  # seen by recv below
            subscribed = False
            while True:
                try:
                    # --timeout counts from the subscription, not from start-up.
                    frame = await asyncio.wait_for(ws.recv(), left() if subscribed else REPLY_TIMEOUT_S)
                except asyncio.TimeoutError:
                    if not subscribed:
                        raise Failed("cannot_connect", f"no reply to subscribe from {st.url}", "retry") from None
                    return 0
                except (ConnectionClosed, OSError) as e:
                    out.note(f"connection lost ({e}); resubscribing after seq {since}")
                    break
                msg = json.loads(frame)
                if "event" in msg:
                    if out.as_json:
                        print(json.dumps(msg, ensure_ascii=False), flush=True)
                    else:
                        print("\n".join(render_event(msg)), flush=True)
                    since = msg["seq"]
                    _write_state(state, since)
                    last = time.monotonic()
                    seen += 1
                    if ns.count is not None and seen >= ns.count:
                        return 0
                elif msg.get("id") == "watch":
                    if not msg.get("ok"):
                        return out.error(msg.get("error") or {})
                    if not connected_once:
                        last = time.monotonic()
                    connected_once = subscribed = True
                    if since is None:
                        # Nothing to replay: resume from the newest seq next time.
                        since = msg["result"]["seq"]
                        _write_state(state, since)
                    out.note(f"subscribed; newest seq {msg['result']['seq']}, resuming after {since}")
        await asyncio.sleep(min(backoff, left() or backoff))
