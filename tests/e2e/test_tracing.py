"""Tracing over a real daemon (WIRE.md 1.3 "Tracing", docs/operations.md
"Tracing"): the daemon exports to an OTLP/HTTP collector in this process
(tests/e2e/otlp_kit.py, decoded with opentelemetry-proto). A span per request
with its attributes, its decide and commit children and the link to the group
commit; the parent from ``meta`` or the upgrade's ``traceparent``; webhook
POSTs carrying their delivery span's ``traceparent``, linked to the action's
span; event frames carrying ``meta.traceparent``; a deadline's span; an
unreachable collector that slows no reply; and one trace end to end: a lead's
post → the worker's webhook POST (linked) → a ``kungfu wake`` run whose
``TRACEPARENT`` continues it → the worker's ``assignment.deliver`` in the
same trace."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.sdk")  # the test extra installs it; the tracing tests need it

from kungfud.client import Client  # noqa: E402
from kungfud.client.trace import INCOMING  # noqa: E402
from tests.e2e.helpers import register  # noqa: E402
from tests.e2e.otlp_kit import Collector  # noqa: E402
from tests.e2e.test_cli import ROOT  # noqa: E402
from tests.e2e.webhook_kit import Receiver  # noqa: E402

# OpenTelemetry's own variables: export every 100 ms instead of 5 s; a resource attribute.
ENV = {"OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=test"}
HOOKS = '[webhooks]\nallow_hosts = ["127.0.0.1:*"]\nretry_pauses_s = [0.2]\n'
PARENT_TRACE = "0af7651916cd43dd8448eb211c80319c"
PARENT_SPAN = "b7ad6b7169203331"
PARENT = f"00-{PARENT_TRACE}-{PARENT_SPAN}-01"


def _tp_ids(tp: str) -> tuple[str, str]:
    _, trace, span, _ = tp.split("-")
    return trace, span


def _is(tp: str, span) -> bool:
    """``tp`` is the traceparent of ``span`` (its trace and span ids)."""
    return _tp_ids(tp) == (span.trace_id, span.span_id)


async def _traced(make_daemon, extra: str = "", env: dict | None = None, **kw):
    col = await Collector().start()
    d = make_daemon(col.config() + extra, env={**ENV, **(env or {})}, **kw)
    return col, d


def _request_span(col: Collector, op: str, trace: str):
    spans = [s for s in col.named(f"kungfud {op}") if s.trace_id == trace]
    assert len(spans) == 1, [(s.name, s.trace_id) for s in col.spans]
    return spans[0]


def test_a_request_span_has_its_attributes_its_decide_and_commit_children_and_a_link_to_its_group_commit(make_daemon):
    async def go():
        col, d = await _traced(make_daemon)
        agent, key = await register(d.urls[0], "traced")
        async with await Client.connect(d.urls[0], key) as c:
            token = INCOMING.set({"traceparent": PARENT})
            try:
                await c.act("memory.create", {"content": {"a": 1}}, key="m-1")
                again = await c.request("memory.create", {"content": {"a": 1}}, key="m-1")
                refused = await c.request("memory.update", {"memory": "me_nothing", "content": {}}, key="u-1")
            finally:
                INCOMING.reset(token)
        assert again["replayed"] is True and refused["error"]["code"] == "not_found"
        await col.wait(lambda: len(col.named("kungfud memory.update")) >= 1 and len(col.named("kungfud memory.create")) >= 2)
        created = [s for s in col.named("kungfud memory.create") if s.trace_id == PARENT_TRACE]
        assert len(created) == 2
        first = next(s for s in created if s.attributes["kungfud.replayed"] is False)
        replay = next(s for s in created if s.attributes["kungfud.replayed"] is True)
        # The request's meta is the parent: same trace, its span the parent.
        assert first.parent == PARENT_SPAN and replay.parent == PARENT_SPAN
        assert first.attributes == {
            "kungfud.agent": agent, "kungfud.op": "memory.create", "kungfud.outcome": "ok", "kungfud.replayed": False,
        }
        assert first.kind == 2  # SERVER
        assert first.resource["service.name"] == "kungfud" and first.resource["kungfud.node"]
        assert first.resource["deployment.environment"] == "test"  # OTEL_RESOURCE_ATTRIBUTES applies
        kids = {s.name: s for s in col.children(first)}
        assert set(kids) == {"kungfud.decide", "kungfud.commit"}
        assert kids["kungfud.commit"].attributes["kungfud.commit.actions"] >= 1
        # The link from the request to the group commit's span (its own child here: it was alone).
        assert (PARENT_TRACE, kids["kungfud.commit"].span_id) in first.links
        assert first.start_ns <= kids["kungfud.decide"].start_ns <= kids["kungfud.commit"].end_ns <= first.end_ns
        upd = _request_span(col, "memory.update", PARENT_TRACE)
        assert upd.attributes["kungfud.outcome"] == "not_found" and upd.attributes["kungfud.replayed"] is False
        assert all(p == "/v1/traces" for p in col.paths)
        await col.close()

    asyncio.run(go())


def test_requests_that_share_a_group_commit_link_to_one_commit_span(make_daemon):
    async def go():
        col, d = await _traced(make_daemon)
        _, key = await register(d.urls[0], "burst")
        async with await Client.connect(d.urls[0], key) as c:
            await asyncio.gather(*(c.act("memory.create", {"content": {"i": i}}) for i in range(40)))
        await col.wait(lambda: len(col.named("kungfud memory.create")) >= 40)
        await col.wait(lambda: len(col.named("kungfud.commit")) >= 40)
        commits = {s.span_id: s for s in col.named("kungfud.commit")}
        linked = [next(sid for _, sid in s.links if sid in commits) for s in col.named("kungfud memory.create")]
        # Each request links to a commit span; requests of one group commit link to the same one.
        shared = [sid for sid in set(linked) if linked.count(sid) > 1]
        assert shared, "40 concurrent creates never shared a group commit"
        for sid in shared:
            assert commits[sid].attributes["kungfud.commit.actions"] >= linked.count(sid)
        await col.close()

    asyncio.run(go())


def test_the_upgrade_traceparent_header_is_the_parent_of_a_connections_requests(make_daemon):
    import websockets

    async def go():
        col, d = await _traced(make_daemon)
        _, key = await register(d.urls[0], "header")
        hdrs = {"Authorization": f"Bearer {key}", "traceparent": PARENT}
        async with websockets.connect(d.urls[0], additional_headers=hdrs) as ws:
            await ws.send(json.dumps({"id": 1, "op": "memory.list", "args": {}}))
            assert json.loads(await ws.recv())["ok"] is True
            # A request's own meta wins over the header.
            other = "00-11111111111111111111111111111111-2222222222222222-01"
            await ws.send(json.dumps({"id": 2, "op": "memory.list", "args": {}, "meta": {"traceparent": other}}))
            assert json.loads(await ws.recv())["ok"] is True
            await ws.send(json.dumps({"id": 3, "op": "memory.list", "args": {}, "meta": {"traceparnt": other}}))
            bad = json.loads(await ws.recv())
            assert bad["error"]["code"] == "bad_request" and "traceparnt" in bad["error"]["reason"]
        await col.wait(lambda: len(col.named("kungfud memory.list")) >= 2)
        by_trace = {s.trace_id: s for s in col.named("kungfud memory.list")}
        assert by_trace[PARENT_TRACE].parent == PARENT_SPAN
        assert by_trace["1" * 32].parent == "2" * 16
        await col.close()

    asyncio.run(go())


def test_webhook_posts_carry_their_delivery_spans_traceparent_linked_to_the_actions_span_and_event_frames_carry_meta(
    make_daemon,
):
    async def go():
        col, d = await _traced(make_daemon, HOOKS)
        rx = await Receiver().start()
        a, ka = await register(d.urls[0], "asker")
        b, kb = await register(d.urls[-1], "hooked")
        ca, cb = await Client.connect(d.urls[0], ka), await Client.connect(d.urls[-1], kb)
        t = (await ca.act("thread.create", {"content": {"title": "traced"}}))["thread"]
        g = await ca.act("thread.admit", {"thread": t, "role": "speaker"})
        await cb.act("thread.join", {"token": g["token"]})
        await cb.act("webhook.set", {"url": rx.url})
        frames: list[dict] = []
        sub = await cb.subscribe()

        async def read():
            async for ev in sub:
                frames.append(ev)

        reader = asyncio.create_task(read())
        token = INCOMING.set({"traceparent": PARENT})
        try:
            await ca.act("thread.post", {"thread": t, "content": {"q": "?"}, "ask": [b]})
        finally:
            INCOMING.reset(token)
        await rx.wait(lambda: len(rx.ok()) >= 1)
        await col.wait(lambda: col.named("kungfud webhook.deliver") and col.named("kungfud thread.post"))
        post = _request_span(col, "thread.post", PARENT_TRACE)
        hook = rx.ok()[0]
        assert set(hook.json["meta"]) == {"traceparent"} and _is(hook.json["meta"]["traceparent"], post)  # the body is the event frame
        trace, span = _tp_ids(hook.headers["traceparent"])
        await col.wait(lambda: col.by_id(span) is not None)
        deliver = col.by_id(span)
        assert deliver.name == "kungfud webhook.deliver" and deliver.trace_id == trace
        assert (post.trace_id, post.span_id) in deliver.links  # linked to the action's span
        assert deliver.attributes["kungfud.agent"] == b and deliver.attributes["kungfud.seq"] == hook.json["seq"]
        assert deliver.attributes["kungfud.outcome"] == "ok" and deliver.kind == 3  # CLIENT
        for _ in range(100):
            if frames:
                break
            await asyncio.sleep(0.1)
        assert frames and _is(frames[0]["meta"]["traceparent"], post)
        reader.cancel()
        for c in (ca, cb):
            await c.close()
        await rx.close()
        await col.close()

    asyncio.run(go())


def test_a_deadline_that_fires_has_a_span_and_its_events_keep_its_context(make_daemon):
    async def go():
        col, d = await _traced(make_daemon, test_clock=True)
        _, ka = await register(d.urls[0], "lead")
        w, kw = await register(d.urls[-1], "worker")
        ca, cw = await Client.connect(d.urls[0], ka), await Client.connect(d.urls[-1], kw)
        t = (await ca.act("thread.create", {"content": {"title": "late"}}))["thread"]
        g = await ca.act("thread.admit", {"thread": t, "role": "speaker"})
        await cw.act("thread.join", {"token": g["token"]})
        r = await ca.act("thread.post", {"thread": t, "content": {"x": 1}, "assign": {
            "to": w, "content": {"criteria": "soon"}, "deliver_within_s": 60}})
        await cw.act("assignment.take", {"assignment": r["assignment"]})
        sub = await cw.subscribe()
        d.advance_clock(120)
        ev = await asyncio.wait_for(sub.__anext__(), 60)  # the expiry's: the deliver obligation ended
        assert ev["event"] == "turn" and ev["data"]["ended"][0]["why"] == "expired"
        await col.wait(lambda: col.named("kungfud deadline"), timeout=60)
        fired = col.named("kungfud deadline")[0]
        assert fired.attributes["kungfud.object"] == t and fired.parent == ""
        assert _is(ev["meta"]["traceparent"], fired)
        for c in (ca, cw):
            await c.close()
        await col.close()

    asyncio.run(go())


@pytest.mark.rules("L1-1")
def test_events_keep_their_trace_context_across_a_restart_and_check_and_rebuild_keep_it(make_daemon):
    """The context is stored with the event (not derived): a replay after a
    restart carries it, ``kungfud check`` finds nothing wrong, and
    ``check --rebuild`` keeps it."""

    async def traced_post(d) -> tuple[str, int]:
        _, ka = await register(d.urls[0], "asker")
        b, kb = await register(d.urls[-1], "asked")
        ca, cb = await Client.connect(d.urls[0], ka), await Client.connect(d.urls[-1], kb)
        t = (await ca.act("thread.create", {"content": {"title": "kept"}}))["thread"]
        g = await ca.act("thread.admit", {"thread": t, "role": "speaker"})
        await cb.act("thread.join", {"token": g["token"]})
        token = INCOMING.set({"traceparent": PARENT})
        try:
            await ca.act("thread.post", {"thread": t, "content": {"q": "?"}, "ask": [b]})
            await ca.act("task.create", {"audience": "open", "contract": {"content": {"output": "o", "criteria": "c"}}})
        finally:
            INCOMING.reset(token)
        for c in (ca, cb):
            await c.close()
        return kb, 0

    async def replayed(d, kb: str) -> dict:
        async with await Client.connect(d.urls[-1], kb) as c:
            sub = await c.subscribe(since=0)
            return await asyncio.wait_for(sub.__anext__(), 30)

    async def go():
        col, d = await _traced(make_daemon)
        kb, _ = await traced_post(d)
        await col.wait(lambda: col.named("kungfud thread.post"))
        post = _request_span(col, "thread.post", PARENT_TRACE)
        await col.close()
        return d, kb, post

    d, kb, post = asyncio.run(go())
    d.stop()
    for extra in ((), ("--rebuild",)):
        r = subprocess.run([sys.executable, "-m", "kungfud", "check", *d.store_args, *extra],
                           capture_output=True, text=True, cwd=ROOT, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
    d.start()
    ev = asyncio.run(replayed(d, kb))
    assert ev["event"] == "turn" and _is(ev["meta"]["traceparent"], post)


def test_an_unreachable_collector_never_holds_a_reply_and_its_drops_are_counted(make_daemon):
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    dead = s.getsockname()[1]
    s.close()  # nothing listens there
    d = make_daemon(f'[tracing]\notlp_endpoint = "http://127.0.0.1:{dead}"\n',
                    env={**ENV, "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "1"})

    async def go():
        _, key = await register(d.urls[0], "busy")
        async with await Client.connect(d.urls[0], key) as c:
            for i in range(50):
                await asyncio.wait_for(c.act("memory.create", {"content": {"i": i}}), 30)

    asyncio.run(go())
    metrics_url = d.urls[0].replace("ws://", "http://").rsplit("/", 1)[0] + "/metrics"
    for _ in range(200):
        text = urllib.request.urlopen(metrics_url, timeout=10).read().decode()
        line = next(x for x in text.splitlines() if x.startswith("kungfud_trace_spans_dropped_total "))
        if int(line.split()[1]) > 0:
            break
        import time

        time.sleep(0.2)
    assert int(line.split()[1]) > 0, text


def _shim(tmp: Path) -> dict:
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    exe = bin_dir / "kungfu"
    exe.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m kungfud.agent_cli "$@"\n')
    exe.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}


PICK = (
    "python3 -c 'import json,os; print(next(e[\"data\"][\"ref\"][\"assignment\"] "
    "for e in json.loads(os.environ[\"KUNGFU_EVENTS\"]) if e[\"event\"] == \"opportunity\"))'"
)


@pytest.mark.timeout_s(180)
def test_one_trace_from_a_leads_post_through_the_workers_webhook_and_wake_run_to_its_delivery(make_daemon, tmp_path):
    """The lead posts an assignment with a traceparent; the worker's webhook
    POST is linked to the post's span; ``kungfu wake`` runs the worker's
    command with TRACEPARENT, and the CLI in it sends that context, so the
    worker's take and deliver are in the lead's trace. With several nodes the
    lead and the worker use different ones."""

    async def go():
        col, d = await _traced(make_daemon, HOOKS)
        rx = await Receiver().start()
        lead, kl = await register(d.urls[0], "lead")
        worker, kw = await register(d.urls[-1], "worker")
        cl, cw = await Client.connect(d.urls[0], kl), await Client.connect(d.urls[-1], kw)
        t = (await cl.act("thread.create", {"content": {"title": "work"}}))["thread"]
        g = await cl.act("thread.admit", {"thread": t, "role": "speaker"})
        await cw.act("thread.join", {"token": g["token"]})
        await cw.act("webhook.set", {"url": rx.url})
        env = {k: v for k, v in os.environ.items() if not k.startswith(("KUNGFU_", "TRACE"))}
        cmd = f'echo "$TRACEPARENT" > woke.txt; AS=$({PICK}); kungfu take "$AS" && kungfu deliver "$AS" --text done'
        log = open(tmp_path / "wake.log", "w")
        wake = subprocess.Popen(
            [sys.executable, "-m", "kungfud.agent_cli", "wake", "--exec", cmd, "--on", "opportunity"],
            env={**env, **_shim(tmp_path), "KUNGFU_KEY": kw, "KUNGFU_URL": d.urls[-1],
                 "KUNGFU_CONFIG": str(tmp_path / "profiles.toml")},
            cwd=tmp_path, stdout=log, stderr=log, start_new_session=True,
        )
        try:
            for _ in range(300):
                if "subscribed" in (tmp_path / "wake.log").read_text():
                    break
                await asyncio.sleep(0.1)
            token = INCOMING.set({"traceparent": PARENT})
            try:
                r = await cl.act("thread.post", {"thread": t, "content": {"brief": "x"}, "assign": {
                    "to": worker, "content": {"criteria": "done"}}})
            finally:
                INCOMING.reset(token)
            await col.wait(lambda: [s for s in col.named("kungfud assignment.deliver") if s.trace_id == PARENT_TRACE],
                           timeout=120)
        finally:
            wake.terminate()
            wake.wait(30)
            log.close()
        post = _request_span(col, "thread.post", PARENT_TRACE)
        assert post.parent == PARENT_SPAN
        # The worker's webhook POST: its own span, linked to the post's.
        await rx.wait(lambda: any(p.json["event"] == "opportunity" for p in rx.ok()))
        hook = next(p for p in rx.ok() if p.json["event"] == "opportunity")
        _, hook_span = _tp_ids(hook.headers["traceparent"])
        await col.wait(lambda: col.by_id(hook_span) is not None)
        assert (PARENT_TRACE, post.span_id) in col.by_id(hook_span).links
        # The wake run's TRACEPARENT is the post's span: the run continues the trace.
        assert _is((tmp_path / "woke.txt").read_text().strip(), post)
        take = _request_span(col, "assignment.take", PARENT_TRACE)
        deliver = _request_span(col, "assignment.deliver", PARENT_TRACE)
        assert take.parent == post.span_id and deliver.parent == post.span_id
        assert deliver.attributes["kungfud.agent"] == worker and deliver.attributes["kungfud.outcome"] == "ok"
        assert (await cl.read("assignment.get", {"assignment": r["assignment"]}))["state"] == "delivered"
        for c in (cl, cw):
            await c.close()
        await rx.close()
        await col.close()

    asyncio.run(go())


# --- off ------------------------------------------------------------------------------------------

_BLOCK_OTEL = (
    "import sys\n"
    "class _NoOtel:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name == 'opentelemetry' or name.startswith('opentelemetry.'):\n"
    "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
    "sys.meta_path.insert(0, _NoOtel())\n"
)

_DEFAULT_DAEMON = r'''
import json, os, socket, sys, threading, time
from websockets.sync.client import connect
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
data = sys.argv[1]

def client():
    for _ in range(400):
        try:
            key = open(os.path.join(data, "admin.key")).read().strip()
            ws = connect(f"ws://127.0.0.1:{port}/v1", additional_headers={"Authorization": f"Bearer {key}"})
            break
        except OSError:
            time.sleep(0.05)
    tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    ws.send(json.dumps({"id": 1, "op": "memory.create", "key": "k", "args": {"content": {}}, "meta": {"traceparent": tp}}))
    ok = json.loads(ws.recv())["ok"]
    ws.send(json.dumps({"id": 2, "op": "subscribe", "args": {"since": 0}}))
    ws.recv()
    print(json.dumps({"ok": ok, "otel": sorted(m for m in sys.modules if m.startswith("opentelemetry"))}), flush=True)
    os._exit(0)

threading.Thread(target=client, daemon=True).start()
from kungfud.cli import main
main(["serve", "--data-dir", data, "--listen", f"127.0.0.1:{port}"])
'''


def test_the_default_daemon_never_imports_opentelemetry(tmp_path):
    """Without ``[tracing] otlp_endpoint`` serving a traced request imports
    nothing of OpenTelemetry (installed in this environment all the same)."""
    r = subprocess.run([sys.executable, "-c", _DEFAULT_DAEMON, str(tmp_path / "data")],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out == {"ok": True, "otel": []}, r.stderr[-2000:]


def test_serve_with_an_endpoint_and_without_the_extra_exits_naming_the_extra(tmp_path):
    cfg = tmp_path / "t.toml"
    cfg.write_text('[tracing]\notlp_endpoint = "http://127.0.0.1:4318"\n')
    script = _BLOCK_OTEL + "from kungfud.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    r = subprocess.run(
        [sys.executable, "-c", script, "serve", "--config", str(cfg), "--data-dir", str(tmp_path / "d"),
         "--listen", "127.0.0.1:0"], capture_output=True, text=True, cwd=ROOT, timeout=60,
    )
    assert r.returncode == 2 and "pip install 'kungfud[tracing]'" in r.stderr, r.stderr
    assert not (tmp_path / "d").exists()  # refused before anything was created


def test_the_client_library_without_opentelemetry_sends_no_meta_and_never_fails(daemon, tmp_path):
    script = _BLOCK_OTEL + (
        "import asyncio, os\n"
        "from kungfud.client import Client\n"
        "from kungfud.client.trace import meta\n"
        "assert meta() is None, meta()\n"
        "os.environ['TRACEPARENT'] = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'\n"
        "assert meta() == {'traceparent': os.environ['TRACEPARENT']}, meta()\n"
        "async def go():\n"
        "    async with await Client.connect(sys.argv[1], sys.argv[2]) as c:\n"
        "        print((await c.act('memory.create', {'content': {}}))['version'])\n"
        "asyncio.run(go())\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACE")}
    r = subprocess.run([sys.executable, "-c", script, daemon.urls[0], daemon.admin_key],
                       capture_output=True, text=True, cwd=ROOT, timeout=60, env=env)
    assert r.returncode == 0 and r.stdout.strip() == "1", r.stderr


def test_mcp_over_http_passes_meta_traceparent_and_the_http_headers_on_to_the_daemon(make_daemon):
    """SEP-414: a tool call's ``_meta.traceparent`` is the parent of the
    daemon's request span; without it, the HTTP request's ``traceparent``."""
    pytest.importorskip("mcp")
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    from tests.e2e.test_mcp_http import mcp_http

    header_tp = "00-" + "3" * 32 + "-" + "4" * 16 + "-01"

    async def go():
        col, d = await _traced(make_daemon)
        _, key = await register(d.urls[0], "mcp")
        async with mcp_http(d.urls[0]) as url:
            headers = {"Authorization": f"Bearer {key}", "traceparent": header_tp}
            async with (
                httpx2.AsyncClient(headers=headers, timeout=60) as http,
                streamable_http_client(url, http_client=http) as (read, write),
                ClientSession(read, write) as s,
            ):
                await s.initialize()
                await s.call_tool("memory_create", {"content": {"a": 1}}, meta={"traceparent": PARENT})
                await s.call_tool("memory_create", {"content": {"a": 2}})
        await col.wait(lambda: len(col.named("kungfud memory.create")) >= 2)
        by_trace = {s.trace_id: s for s in col.named("kungfud memory.create")}
        assert by_trace[PARENT_TRACE].parent == PARENT_SPAN  # _meta wins over the header
        assert by_trace["3" * 32].parent == "4" * 16
        await col.close()

    asyncio.run(go())


_HELPERS = r'''
import sys
from kungfud import tracing
assert tracing.push("tk_1", "pc_1") is None and tracing.inbound("a2a.send", {}) is None  # off: nothing
tracing.configure(sys.argv[1], 1.0, "helpers", "0")
cause = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
span = tracing.push("tk_1", "pc_1", cause)
print(span.headers["traceparent"], flush=True)
span.end("HTTP 500")
rs = tracing.inbound("a2a.send", {"traceparent": cause}, "ag_1")
rs.finish(outcome="forbidden")
tracing.shutdown(10)
'''


def test_the_a2a_helpers_make_a_linked_push_span_and_a_request_span_from_http_headers():
    """For the A2A binding (docs/architecture.md "Tracing hooks"): ``push``
    is a span per push POST, linked to the action, whose traceparent the POST
    carries; ``inbound`` a request span whose parent is the HTTP caller's;
    ``frame_meta`` the ``meta`` of a frame from HTTP headers; all None when off."""
    from kungfud import tracing

    assert tracing.frame_meta({"traceparent": PARENT, "tracestate": "a=b"}) == {"traceparent": PARENT, "tracestate": "a=b"}
    assert tracing.frame_meta({}) is None and tracing.frame_meta(None) is None

    async def go():
        col = await Collector().start()
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", _HELPERS, col.endpoint, cwd=ROOT, stdout=asyncio.subprocess.PIPE,
            env={**os.environ, **ENV})
        out, _ = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 0
        await col.wait(lambda: col.named("kungfud a2a.push") and col.named("kungfud a2a.send"))
        push = col.named("kungfud a2a.push")[0]
        assert _is(out.decode().strip(), push) and push.parent == "" and push.kind == 3
        assert (PARENT_TRACE, PARENT_SPAN) in push.links
        assert push.attributes["kungfud.task"] == "tk_1" and push.attributes["kungfud.outcome"] == "failed"
        send = col.named("kungfud a2a.send")[0]
        assert send.trace_id == PARENT_TRACE and send.parent == PARENT_SPAN
        assert send.attributes["kungfud.outcome"] == "forbidden" and send.attributes["kungfud.agent"] == "ag_1"
        await col.close()

    asyncio.run(go())


def test_each_a2a_push_post_is_a_span_linked_to_the_action_and_carries_its_traceparent(make_daemon):
    from tests.e2e.test_a2a_ops import E, msg, pair

    async def go():
        col, d = await _traced(make_daemon, HOOKS)
        rx = await Receiver().start()
        client, _, _, w = await pair(d.urls[0])
        conf = {"taskPushNotificationConfig": {"url": rx.url, "token": "tok-1"}}
        token = INCOMING.set({"traceparent": PARENT})
        try:
            await client.act("a2a.send", {"to": w, "message": msg("traced", "tr-1", extensions=[E]), "configuration": conf})
        finally:
            INCOMING.reset(token)
        await rx.wait(lambda: len(rx.ok()) >= 1)
        first = rx.ok()[0]
        _, span_id = _tp_ids(first.headers["traceparent"])
        await col.wait(lambda: col.by_id(span_id) is not None and col.named("kungfud a2a.send"))
        push = col.by_id(span_id)
        send = _request_span(col, "a2a.send", PARENT_TRACE)
        assert push.name == "kungfud a2a.push" and push.kind == 3 and push.parent == ""
        assert (send.trace_id, send.span_id) in push.links  # linked to the action whose fact made the event
        assert push.attributes["kungfud.task"] == first.json["statusUpdate"]["taskId"]
        assert push.attributes["kungfud.outcome"] == "ok"
        await rx.close()
        await col.close()

    asyncio.run(go())


def test_an_a2a_request_with_a_traceparent_header_continues_the_callers_trace(make_daemon):
    """WIRE.md 1.3 "Tracing": the ``traceparent``/``tracestate`` headers of an
    A2A HTTP request are a carrier in, like the websocket upgrade's: the
    ``kungfud a2a.send`` span of a SendMessage is a child of the caller's span."""
    import httpx

    from tests.e2e.test_a2a_ops import pair

    async def go():
        col, d = await _traced(make_daemon)
        client, _, worker, w = await pair(d.urls[0])
        base = f"{d.a2a_urls[0]}/a2a/agents/{w}"
        headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {client.key}", "traceparent": PARENT}
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
            "message": {"messageId": "traced-http-1", "role": "ROLE_USER", "parts": [{"text": "work"}]},
            "configuration": {"returnImmediately": True}}}
        async with httpx.AsyncClient(headers=headers) as http:
            r = await http.post(base, json=body)
        assert r.status_code == 200 and r.json()["result"]["task"]["id"].startswith("tk_"), r.text
        await col.wait(lambda: any(s.trace_id == PARENT_TRACE for s in col.named("kungfud a2a.send")))
        send = _request_span(col, "a2a.send", PARENT_TRACE)
        assert send.parent == PARENT_SPAN and send.attributes["kungfud.outcome"] == "ok"
        await client.close()
        await worker.close()
        await col.close()

    asyncio.run(go())
