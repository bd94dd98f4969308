"""The I/O shell: connect, send (retrying a lost action once with its key, L3),
follow cursors, print the outcome; one runner per kind of command (one request,
``register``, the commands whose receipt carries a key shown once).

Idempotency (L3): each action gets a fresh key unless ``--key K`` is given; a
lost connection is retried once with the same key, and when the outcome stays
unknown the key is printed so a person can retry exactly that action.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from typing import Any

from ..handshake import DEFAULT_URL, refusal
from .call import PlannedCall
from .exits import CommandFailed, UsageError
from .profiles import ClientSettings, config_path, load_profiles, save_profile
from .names import NAMED_READS, resolve, with_names
from .render import Out

__all__ = ["REPLY_TIMEOUT_S", "NEW_KEY_OPS", "handshake_failure", "run_call", "run_register", "run_new_key"]

REPLY_TIMEOUT_S = 60.0


def handshake_failure(e: Exception, url: str) -> Exception:
    """What a failed websocket handshake means for the user (WIRE.md "Transport":
    an unknown key on the Authorization header is HTTP 401; the mapping of a
    status to a rejection is :func:`kungfud.handshake.refusal`)."""
    from websockets.exceptions import InvalidHandshake, InvalidStatus, InvalidURI

    if isinstance(e, InvalidURI):
        return UsageError(f"--url {url!r} is not a websocket URL ({e})")
    if isinstance(e, InvalidStatus):
        status = e.response.status_code
        refused = refusal(status)
        if refused is not None:
            return CommandFailed(refused.code, f"the daemon at {url} {refused.why}{_ADVICE.get(refused.code, '')}", refused.next)
        return CommandFailed("cannot_connect", f"the handshake with {url} failed with HTTP {status}; is the URL's path right?", "stop")
    if isinstance(e, (OSError, InvalidHandshake, asyncio.TimeoutError)):
        return CommandFailed("cannot_connect", f"cannot connect to {url}: {e or type(e).__name__}", "retry")
    return e


#: What the CLI's user can do about a refusal, after the daemon's part.
_ADVICE = {"unauthenticated": "; check KUNGFU_KEY or the profile"}


async def _connect(url: str, key: str | None):
    from ..client import Client

    try:
        return await Client.connect(url, key)
    except Exception as e:
        raise handshake_failure(e, url) from None


async def _request(client, op: str, args: dict, key: str | None) -> dict:
    return await asyncio.wait_for(client.request(op, args, key=key), REPLY_TIMEOUT_S)


async def _send(st: ClientSettings, call: PlannedCall, out: Out) -> tuple[dict, Any]:
    """Send ``call`` (paging with ``follow``); returns (response, client to close).
    A request lost with its connection is resent once on a new connection; an
    action keeps its idempotency key, so the resend never does it twice (L3)."""
    from websockets.exceptions import ConnectionClosed

    key = st.key if call.needs_agent else None
    idem = (call.key or _new_key()) if call.is_action else call.key
    client = await _connect(st.url, key)
    for attempt in (1, 2):
        try:
            resp = await _request(client, call.op, call.args, idem)
            if call.follow and resp.get("ok"):
                resp = await _follow(client, call, resp)
            return resp, client
        except (ConnectionError, ConnectionClosed, OSError, asyncio.TimeoutError) as e:
            await client.close()
            why = f"the connection was lost before the reply ({e or type(e).__name__})"
            if attempt == 2 and call.is_action:
                raise CommandFailed(
                    "cannot_connect",
                    f"{why}; the action may or may not have happened: retry it with --key {idem} "
                    "(the same key never does it twice)",
                    "retry",
                ) from None
            if attempt == 2:
                raise CommandFailed("cannot_connect", f"{why}; retry", "retry") from None
            out.note(f"connection lost; resending once{f' with the same key {idem}' if call.is_action else ''}")
            await asyncio.sleep(0.2)
            client = await _connect(st.url, key)
    raise AssertionError("unreachable")


def _new_key() -> str:
    from ..client import new_key

    return new_key()


async def _follow(client, call: PlannedCall, first: dict) -> dict:
    """Every page of a list read, as one page ``{"items": all, "cursor": null}``."""
    items = list(first["result"]["items"])
    cursor = first["result"]["cursor"]
    while cursor:  # None, or "" (a2a.tasks), at the end
        resp = await _request(client, call.op, {**call.args, "cursor": cursor}, None)
        if not resp.get("ok"):
            return resp
        items += resp["result"]["items"]
        cursor = resp["result"]["cursor"]
    return {**first, "result": {"items": items, "cursor": None}}


async def run_call(st: ClientSettings, call: PlannedCall, out: Out) -> int:
    from websockets.exceptions import ConnectionClosed

    if call.needs_agent and not st.key:
        raise CommandFailed(
            "unauthenticated",
            "no agent key: set KUNGFU_KEY, or pass --profile NAME (create one with: kungfu register NAME --save)",
            "revise",
        )
    resp, client = await _send(st, call, out)
    try:
        if resp.get("ok") and not out.as_json and not out.ids and call.op in NAMED_READS and st.key:
            names = await resolve(
                lambda op, args: _request(client, op, args, None), call.op, resp["result"], call.args
            )
            resp = {**resp, "result": with_names(resp["result"], names)}
    except (ConnectionError, OSError, asyncio.TimeoutError, ConnectionClosed) as e:  # names are a courtesy
        out.note(f"names not shown ({e or type(e).__name__})")
    finally:
        await client.close()
    if not resp.get("ok"):
        return out.error(resp.get("error") or {"code": "internal", "reason": "malformed reply", "next": "retry"}, call.in_flags)
    if resp.get("replayed"):
        out.note("replayed: this key was used before, so this is the first receipt (secrets hidden); nothing new happened")
    out.result(call.op, resp.get("result"))
    return 0


async def run_register(ns: argparse.Namespace, out: Out) -> int:
    name = getattr(ns, "profile", None) or os.environ.get("KUNGFU_PROFILE") or "default"
    path = config_path()
    url = getattr(ns, "url", None) or os.environ.get("KUNGFU_URL") or DEFAULT_URL
    if getattr(ns, "profile", None) and not getattr(ns, "url", None):
        url = (load_profiles(path).get(name) or {}).get("url") or url
    if ns.save and name in load_profiles(path) and not ns.force:
        raise UsageError(f"profile [{name}] already exists in {path}; pick another --profile or add --force")
    call = PlannedCall("agent.register", {"content": {"name": ns.name}}, key=getattr(ns, "key", None))
    resp, client = await _send(ClientSettings(url, None, name), call, out)
    await client.close()
    if not resp.get("ok"):
        return out.error(resp["error"])
    result = resp["result"]
    if resp.get("replayed"):
        out.note("replayed: this key registered an agent before; its key is shown only the first time (L3)")
    out.result(call.op, result)
    if ns.save:
        if not result.get("key"):
            raise UsageError("a replayed registration carries no key, so there is nothing to save")
        save_profile(path, name, {"url": url, "key": result["key"], "agent": result["agent"]})
        out.note(f"saved profile [{name}] in {path} (mode 0600)")
    elif not out.as_json:
        out.note("the key is shown only once: keep it secret (KUNGFU_KEY) or register with --save")
    return 0


NEW_KEY_OPS = frozenset({"admin.agent.create", "admin.agent.reset_key", "agent.rotate_key"})


async def run_new_key(st: ClientSettings, ns: argparse.Namespace, call: PlannedCall, out: Out) -> int:
    """Commands whose receipt carries a key shown only once: print it, or save
    it to a profile (``--save-as PROFILE``; ``rotate-key --save`` rewrites the
    profile the key came from). What can be checked is checked before acting,
    so a refused save never costs the key."""
    path = config_path()
    save_as = getattr(ns, "save_as", None)
    rotate_save = call.op == "agent.rotate_key" and ns.save
    if save_as is not None and save_as in load_profiles(path) and not ns.force:
        raise UsageError(f"profile [{save_as}] already exists in {path}; pick another name or add --force")
    if rotate_save and not st.key_from_profile:
        raise UsageError(
            "--save rewrites the profile the key came from, but this key came from KUNGFU_KEY; "
            "pass --profile NAME, or rotate without --save and update KUNGFU_KEY"
        )
    if call.needs_agent and not st.key:
        raise CommandFailed("unauthenticated", "no agent key: set KUNGFU_KEY, or pass --profile NAME", "revise")
    resp, client = await _send(st, call, out)
    await client.close()  # these are actions: no names to look up (NAMED_READS)
    if not resp.get("ok"):
        return out.error(resp.get("error") or {"code": "internal", "reason": "malformed reply", "next": "retry"})
    result = resp["result"]
    if resp.get("replayed"):
        out.note("replayed: this key was used before, so this is the first receipt; its agent key is shown only the first time")
    target = save_as if save_as is not None else st.profile if rotate_save else None
    if target is None or not result.get("key"):
        out.result(call.op, result)
        if result.get("key") and not out.as_json:
            out.note("the key is shown only once: keep it secret (KUNGFU_KEY or a profile)")
    else:
        values = dict(load_profiles(path).get(target) or {}) if rotate_save else {}
        values.update({"url": values.get("url") or st.url, "key": result["key"], "agent": result["agent"]})
        try:
            save_profile(path, target, values)
        except OSError as e:
            out.result(call.op, result)  # the only copy of the key: never lose it
            raise UsageError(f"cannot write profile [{target}] to {path} ({e}); the key is printed above") from None
        out.result(call.op, {"agent": result["agent"]})
        out.note(f"saved the new key in profile [{target}] in {path} (mode 0600)")
    if call.op != "admin.agent.create" and result.get("key"):
        out.note("the old key no longer works; its connections were closed")
    return 0
