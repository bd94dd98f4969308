"""The web console (WIRE.md 1.1 "Web console"): static files from the package,
answered from the websocket server's ``process_request`` hook.

The page is a client of the websocket path like any other; this module only
hands out its files: the page, its style sheet and its script's ES modules
(``/console/main.js`` and the modules it imports, D100). Every response forbids
anything from another origin (``Content-Security-Policy``), content sniffing and
framing, so participant text the page shows can never become markup or script
(L6, §12).
"""

from __future__ import annotations

import email.utils
import html
import http
import re
from importlib import resources
from typing import Any

from websockets.datastructures import Headers
from websockets.http11 import Response

__all__ = ["console_response"]

# The console script's ES modules, as package files under kungfud/console/;
# each is served at /console/<file> so the modules' relative imports resolve.
SCRIPTS = (
    "main.js", "api.js", "dom.js", "session.js",
    "pages/work.js", "pages/turn.js", "pages/threads.js", "pages/tasks.js",
    "pages/memories.js", "pages/outcomes.js", "pages/admin.js", "pages/account.js",
    "pages/assignment.js", "pages/webhook.js", "pages/a2a.js",
)

# URL path → (package file, content type). A fixed table: no path is ever joined
# to a directory, so nothing outside these files can be asked for.
FILES: dict[str, tuple[str, str]] = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/index.html": ("index.html", "text/html; charset=utf-8"),
    "/console.css": ("console.css", "text/css; charset=utf-8"),
    **{f"/console/{name}": (name, "text/javascript; charset=utf-8") for name in SCRIPTS},
    # The page's icon; /favicon.ico too, which browsers ask for on their own.
    "/favicon.svg": ("favicon.svg", "image/svg+xml"),
    "/favicon.ico": ("favicon.svg", "image/svg+xml"),
}

# A Host header used in the CSP only when it is plainly a host[:port]; anything
# else falls back to 'self' alone (which Chromium and Firefox apply to ws: too).
_HOST = re.compile(r"(?:[A-Za-z0-9.-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\])(?::[0-9]{1,5})?")

_cache: dict[str, bytes] = {}


def _read(name: str) -> bytes:
    data = _cache.get(name)
    if data is None:
        node = resources.files("kungfud.console")
        for part in name.split("/"):  # a name of the table above, never a request's path
            node = node.joinpath(part)
        data = node.read_bytes()
        _cache[name] = data
    return data


def csp(host: str | None) -> str:
    connect = "'self'"
    if host and _HOST.fullmatch(host):
        connect += f" ws://{host} wss://{host}"
    return (
        "default-src 'self'; "
        f"connect-src {connect}; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'; object-src 'none'"
    )


def console_response(request: Any, ws_path: str) -> Response | None:
    """The console file for ``request``, or None when the path is not one of them
    (or is the websocket path itself)."""
    path = request.path.split("?", 1)[0]
    if path == ws_path or path not in FILES:
        return None
    name, ctype = FILES[path]
    body = _read(name)
    if name == "index.html":
        # The page learns the websocket path from the daemon that serves it.
        body = body.replace(b"{{WS_PATH}}", html.escape(ws_path, quote=True).encode())
    headers = Headers(
        [
            ("Date", email.utils.formatdate(usegmt=True)),
            ("Connection", "close"),
            ("Content-Length", str(len(body))),
            ("Content-Type", ctype),
            ("Content-Security-Policy", csp(request.headers.get("Host"))),
            ("X-Content-Type-Options", "nosniff"),
            ("X-Frame-Options", "DENY"),
            ("Referrer-Policy", "no-referrer"),
            ("Cache-Control", "no-cache"),
        ]
    )
    status = http.HTTPStatus.OK
    return Response(status.value, status.phrase, headers, body)
