"""The MCP server glue and ``kungfud mcp``'s command line: the SDK's low-level
server over a :class:`~.bridge.McpBridge` (stdio, one agent) or a
:class:`~.bridge.BridgePool` (``--http``, :mod:`.http`). The ``mcp`` package is
imported only to serve. Both SDK generations are supported on stdio: 2.x
(handlers passed to ``Server(...)``) and 1.x (decorators); HTTP needs 2.x.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any, Callable

from .. import __version__
from ..client.trace import INCOMING, from_headers
from .bridge import DEFAULT_URL, KEYLESS_OPS, McpBridge, ToolOutcome
from .schemas import DEFAULT_TOOLSET, TOOLSETS, ToolSpec, instructions, tool_name, tool_specs

__all__ = ["add_arguments", "main", "build_server"]

log = logging.getLogger("kungfud.mcp")


def _tools(types: Any, specs: list[ToolSpec] | None = None) -> list[Any]:
    out = []
    for t in tool_specs() if specs is None else specs:
        kw: dict[str, Any] = {"name": t.name, "description": t.description, "inputSchema": t.input_schema}
        annotations = getattr(types, "ToolAnnotations", None)
        if annotations is not None and t.kind == "R":
            # Reads are read-only; an action keeps the defaults (may destroy, may
            # reach outside), the cautious reading for a client deciding what to confirm.
            kw["annotations"] = annotations(readOnlyHint=True)
        out.append(types.Tool(**kw))
    return out


def _result(types: Any, out: ToolOutcome) -> Any:
    kw: dict[str, Any] = {"content": [types.TextContent(type="text", text=out.text)], "isError": out.is_error}
    if isinstance(out.data, dict):
        kw["structuredContent"] = out.data
    if not out.is_error:
        kw["_meta"] = {"kungfud/replayed": out.replayed}
    return types.CallToolResult(**kw)


class _ToolError(Exception):
    """mcp 1.x turns an exception raised by a tool into ``isError`` with its text."""


def _trace_of(ctx: Any, params: Any) -> dict | None:
    """The trace context of an MCP tool call: ``_meta.traceparent`` (SEP-414),
    else the HTTP request's ``traceparent``/``tracestate`` headers."""
    meta = getattr(params, "meta", None)
    fields = meta.model_dump(by_alias=True) if hasattr(meta, "model_dump") else meta if isinstance(meta, dict) else {}
    found = from_headers(fields.get) if isinstance(fields, dict) else None
    request = getattr(ctx, "request", None)
    if found is None and request is not None:
        found = from_headers(request.headers.get)
    return found


def build_server(
    bridge_for: Callable[[Any], McpBridge],
    http: bool = False,
    toolset: str = DEFAULT_TOOLSET,
    toolset_for: Callable[[Any], str | None] = lambda ctx: None,
    instructions_for: Callable[[], str | None] | None = None,
) -> Any:
    """The MCP server. ``bridge_for(ctx)`` is the bridge of the agent a request
    acts as: the one bridge on stdio, the request's key over HTTP.
    ``toolset_for(ctx)`` is the tool set a request chose (HTTP: ``?tools=``),
    None for the server's own ``toolset``. ``instructions_for()``, when given
    (HTTP), names the set whose instructions an ``initialize`` gets (the request's,
    read from a context variable the HTTP gate sets)."""
    import inspect

    from mcp import types
    from mcp.server.lowlevel import Server

    sets = {name: _tools(types, tool_specs(name)) for name in TOOLSETS}
    keyless_tools = [t for t in sets["all"] if t.name in {tool_name(op) for op in KEYLESS_OPS}]

    def listed(b: McpBridge, chosen: str | None = None) -> list[Any]:
        if b.key is None:
            return keyless_tools
        if b.scope is None:
            return sets[chosen or toolset]
        mine = {t.name for t in b.offered(chosen)}  # a scoped key: the tools its scope allows (WIRE.md 1.3)
        return [t for t in sets[chosen or toolset] if t.name in mine]

    async def tell_tools_changed(ctx: Any) -> None:
        try:
            await ctx.session.send_tool_list_changed()
        except Exception as e:  # a client that cannot take notifications lists again on its own
            log.info("could not send tools/list_changed: %s", e)

    params = inspect.signature(Server.__init__).parameters
    if "on_call_tool" in params:  # mcp 2.x: handlers are constructor arguments

        async def on_list_tools(ctx: Any, params: Any) -> Any:
            b = bridge_for(ctx)
            await b.learn_scope()
            return types.ListToolsResult(tools=listed(b, toolset_for(ctx)))

        async def on_call_tool(ctx: Any, params: Any) -> Any:
            token = INCOMING.set(_trace_of(ctx, params))  # WIRE.md 1.3: the call's trace context, to the daemon
            try:
                out = await bridge_for(ctx).call(params.name, params.arguments, toolset_for(ctx))
            finally:
                INCOMING.reset(token)
            if out.tools_changed:
                await tell_tools_changed(ctx)
            return _result(types, out)

        server = Server(
            "kungfud",
            version=__version__,
            instructions=instructions(http, toolset),
            on_list_tools=on_list_tools,
            on_call_tool=on_call_tool,
        )
        if instructions_for is not None:  # HTTP: the instructions of the set the request chose
            options = server.create_initialization_options

            def per_request(*args: Any, **kwargs: Any) -> Any:
                opts = options(*args, **kwargs)
                chosen = instructions_for()
                if chosen is None or chosen == toolset or not hasattr(opts, "model_copy"):
                    return opts
                return opts.model_copy(update={"instructions": instructions(http, chosen)})

            server.create_initialization_options = per_request
        return server

    # mcp 1.x: decorators (stdio only)
    kw: dict[str, Any] = {}
    if "version" in params:
        kw["version"] = __version__
    if "instructions" in params:
        kw["instructions"] = instructions(http, toolset)
    server = Server("kungfud", **kw)

    @server.list_tools()
    async def list_tools() -> list[Any]:
        await bridge_for(None).learn_scope()
        return listed(bridge_for(None))

    try:
        register = server.call_tool(validate_input=False)  # the daemon validates, with WIRE.md errors
    except TypeError:  # before 1.10
        register = server.call_tool()
    structured = hasattr(types.CallToolResult, "model_fields") and "structuredContent" in types.CallToolResult.model_fields

    @register
    async def call_tool(name: str, arguments: dict[str, Any]) -> Any:
        out = await bridge_for(None).call(name, arguments)
        if out.tools_changed:
            await tell_tools_changed(server.request_context)
        if out.is_error:
            raise _ToolError(out.text)
        content = [types.TextContent(type="text", text=out.text)]
        if structured and isinstance(out.data, dict):
            return content, out.data
        return content

    return server


def _init_options(server: Any) -> Any:
    try:
        from mcp.server.lowlevel import NotificationOptions
    except ImportError:  # pragma: no cover - older layouts
        from mcp.server.lowlevel.server import NotificationOptions
    return server.create_initialization_options(notification_options=NotificationOptions(tools_changed=True))


async def _serve(url: str, key: str | None, timeout: float, toolset: str = DEFAULT_TOOLSET) -> None:
    from mcp.server.stdio import stdio_server

    bridge = McpBridge(url, key, timeout, toolset=toolset)
    server = build_server(lambda ctx: bridge, toolset=toolset)
    try:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, _init_options(server))
    finally:
        await bridge.close()


# --- command line ----------------------------------------------------------------------

DEFAULT_LISTEN = "127.0.0.1:8741"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``kungfud mcp`` (used by :mod:`kungfud.cli`)."""
    p.add_argument("--url", help=f"daemon websocket URL (default: $KUNGFU_URL or {DEFAULT_URL})")
    p.add_argument("--key", help="agent key to act as (default: $KUNGFU_KEY; prefer the variable, argv is visible)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for one daemon reply (default 60)")
    p.add_argument("--log-level", default="WARNING", help="stderr log level: DEBUG, INFO, WARNING, ERROR")
    p.add_argument(
        "--http",
        action="store_true",
        help="serve MCP Streamable HTTP at /mcp for any number of agents (each request's Bearer key) instead of stdio",
    )
    p.add_argument("--listen", default=None, help=f"HOST:PORT for --http (default {DEFAULT_LISTEN})")
    p.add_argument(
        "--tools",
        choices=sorted(TOOLSETS),
        default=DEFAULT_TOOLSET,
        help="which tools to serve: worker (15: turn, offers, outcomes, reading and doing one piece of work), "
        "lead (Threads, making and judging work), operator (accounts) or all (default); "
        "over --http a request may choose with /mcp?tools=NAME",
    )


def main(args: argparse.Namespace | list[str] | None = None) -> int:
    """Run the bridge on stdin/stdout until the MCP client closes it, or, with
    ``--http``, serve MCP over HTTP until interrupted."""
    if not isinstance(args, argparse.Namespace):
        p = argparse.ArgumentParser(prog="kungfud mcp", description="MCP server bridging to kungfud")
        add_arguments(p)
        args = p.parse_args(args)
    logging.basicConfig(
        level=getattr(logging, str(getattr(args, "log_level", "WARNING")).upper(), logging.WARNING),
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
        stream=sys.stderr,
    )
    try:
        import mcp  # noqa: F401
    except ImportError:
        print("kungfud mcp needs the MCP SDK: pip install -e '.[mcp]' (in a kungfud checkout)", file=sys.stderr)
        return 2
    url = args.url or os.environ.get("KUNGFU_URL") or DEFAULT_URL
    toolset = getattr(args, "tools", None) or DEFAULT_TOOLSET
    timeout = float(getattr(args, "timeout", 60.0))
    if getattr(args, "http", False):
        if args.key:
            print("kungfud mcp --http: each request sends its own key (Authorization: Bearer); drop --key", file=sys.stderr)
            return 2
        from .http import serve_http

        return serve_http(url, args.listen or DEFAULT_LISTEN, timeout, toolset)
    if getattr(args, "listen", None):
        print("kungfud mcp: --listen needs --http", file=sys.stderr)
        return 2
    key = args.key or os.environ.get("KUNGFU_KEY") or None
    if key is None:
        log.warning("no agent key (KUNGFU_KEY or --key): only agent_register is offered until it succeeds")
    import anyio

    try:
        anyio.run(_serve, url, key, timeout, toolset)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
