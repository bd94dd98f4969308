"""WIRE.md 1.1 "Web console": the daemon serves the console's files at ``GET /``
with a Content-Security-Policy that allows nothing from another origin, next to
``/v1`` (still the websocket), ``/healthz`` and ``/metrics``. No browser needed."""

from __future__ import annotations

import posixpath
import re
import urllib.error

import pytest

from kungfud.client import Client
from kungfud.server.console import FILES, GENERATED, SCRIPTS
from tests.console.conftest import ROOT, get, http_base


@pytest.mark.rules("L6-1", "L6-4", "R12-8")
def test_console_files_are_served_with_csp_nosniff_and_their_content_types(daemon):
    base = http_base(daemon.url)
    host = base.split("://", 1)[1]
    types = {"/": "text/html", "/index.html": "text/html", "/console.css": "text/css"}
    types |= {f"/console/{name}": "text/javascript" for name in (*SCRIPTS, *GENERATED)}
    for path, ctype in types.items():
        status, headers, body = get(base + path)
        assert status == 200, path
        assert headers["Content-Type"] == f"{ctype}; charset=utf-8", (path, headers)
        assert headers["X-Content-Type-Options"] == "nosniff", path
        csp = headers["Content-Security-Policy"]
        directives = {d.split()[0]: d.split()[1:] for d in csp.split("; ")}
        # Nothing from any other origin: every source is 'self' or this daemon's own websocket.
        assert directives["default-src"] == ["'self'"], csp
        assert set(directives["connect-src"]) == {"'self'", f"ws://{host}", f"wss://{host}"}, csp
        assert directives["frame-ancestors"] == ["'none'"], csp
        for d, sources in directives.items():
            assert all(s.startswith("'") or s.endswith(f"//{host}") for s in sources), (d, csp)
        assert body
    # The icon, at the path browsers ask for by themselves too (no 404 in the console's log).
    for path in ("/favicon.svg", "/favicon.ico"):
        status, headers, body = get(base + path)
        assert (status, headers["Content-Type"]) == (200, "image/svg+xml"), path
        assert headers["X-Content-Type-Options"] == "nosniff" and body.startswith(b"<svg"), path
    _, _, page = get(base + "/")
    assert b'<link rel="icon" href="/favicon.svg"' in page
    # The page names its websocket path and loads only its own files.
    assert b'content="/v1"' in page
    assert b'<script type="module" src="/console/main.js">' in page and b'href="/console.css"' in page
    assert b"http://" not in page and b"https://" not in page


@pytest.mark.rules("L6-1", "L6-4")
def test_console_scripts_are_exactly_the_packages_modules_and_set_no_markup():
    """D100: the script is ES modules served from the fixed table; a module left out
    of the table (or an import naming a file that is not served) would break the page,
    and none of them may put text on the page as markup."""
    package = ROOT / "kungfud" / "console"
    on_disk = sorted(str(f.relative_to(package)) for f in package.rglob("*.js"))
    assert sorted(SCRIPTS) == on_disk
    served = {path for path, (_, ctype) in FILES.items() if ctype.startswith("text/javascript")}
    assert served == {f"/console/{name}" for name in (*SCRIPTS, *GENERATED)}
    for name in SCRIPTS:
        text = (package / name).read_text()
        for target in re.findall(r'^import .* from "([^"]+)";$', text, re.M):
            assert target.startswith("."), (name, target)  # nothing from another origin
            url = posixpath.normpath(posixpath.join("/console", posixpath.dirname(name), target))
            assert url in served, (name, target)
        # Participant text reaches the page as text nodes only (dom.js h()).
        code = re.sub(r"^\s*//.*$", "", text, flags=re.M)
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
            assert sink not in code, (name, sink)


@pytest.mark.rules("L6-4")
def test_console_refuses_a_host_header_that_is_not_a_loopback_host(daemon):
    import http.client

    base = http_base(daemon.url)
    host, port = base.split("://", 1)[1].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.putrequest("GET", "/", skip_host=True)
    conn.putheader("Host", "evil.example; script-src *")
    conn.endheaders()
    r = conn.getresponse()
    # D232: a daemon on loopback answers no foreign Host at all (DNS rebinding);
    # whatever it answers echoes nothing of the header.
    assert r.status == 421
    assert "evil" not in r.read().decode() and "evil" not in str(r.getheaders())
    conn.close()


@pytest.mark.rules("L1-4")
async def test_console_leaves_v1_healthz_and_metrics_as_they_were(daemon):
    base = http_base(daemon.url)
    assert get(base + "/healthz")[0] == 200
    status, headers, body = get(base + "/metrics")
    assert status == 200 and b"kungfud_actions_total" in body
    for path in ("/nope", "/console", "/../kungfud/config.py", "/console.js/x", "/__init__.py",
                 "/console.js", "/console/", "/console/pages", "/console/nope.js", "/console/../index.html",
                 "/main.js", "/console/pages/../main.js", "/console/__init__.py"):
        with pytest.raises(urllib.error.HTTPError) as e:
            get(base + path)
        assert e.value.code == 404, path
    async with await Client.connect(daemon.url, daemon.admin_key) as c:
        assert (await c.read("agent.whoami"))["status"] == "active"
