"""``kungfud mcp``: an MCP server that bridges MCP tools to a running daemon, on
stdio for one agent, or (``--http``, :mod:`kungfud.mcp.http`) over Streamable
HTTP for any number of agents, each request acting as the agent whose key it sends.

One MCP tool per WIRE.md op in :data:`kungfud.wire.OPS` except ``hello`` (the
bridge authenticates the connection itself) and ``subscribe`` (a stream, not a
call): a new op becomes a tool by being added there. The tool name is the op
with dots replaced by underscores (``thread.post`` -> ``thread_post``). Its input
schema is generated from the op's msgspec args Struct, the same type the daemon
decodes with, then shaped for a model (:func:`input_schema`): every argument
described, ``content`` typed per op, "exactly one of memory or content" stated.
Actions take an extra optional ``idempotency_key`` (sent as the request ``key``;
the bridge makes one when absent), so an agent can retry a call whose outcome it
did not see and have it done at most once (L3).

A success is the daemon's ``result`` as JSON text after a one-line preface that
marks fields named ``content`` as participant data (L6), plus the same object as
``structuredContent``. A rejection is a tool error (``isError``) whose text is the
daemon's error object ``{code, reason, next, hint?}`` as JSON, its hint naming a
tool (``{"tool", "args"}``) rather than a wire op.

``--tools worker|lead|operator|all`` serves a named subset (:data:`TOOLSETS`;
over HTTP a request may choose with ``/mcp?tools=NAME``), and a rejection's
reason names tools, not wire ops (:func:`tool_reason`).

Everything except :func:`main` and the server glue works without the ``mcp``
package, which is imported only to serve. Both SDK generations are supported on
stdio: 2.x (handlers passed to ``Server(...)``) and 1.x (decorators); HTTP needs 2.x.
"""

from .bridge import DEFAULT_URL, PREFACE, PREFACE_REPLAYED, McpBridge, BridgePool, ToolOutcome, tool_hint, tool_reason
from .schemas import (
    EXCLUDED_OPS, IDEMPOTENCY_ARG, TOOLSETS, ToolSpec, input_schema, instructions, tool_name, tool_specs, toolset_ops,
)
from .serve import add_arguments, main

__all__ = [
    "DEFAULT_URL", "EXCLUDED_OPS", "IDEMPOTENCY_ARG", "PREFACE", "PREFACE_REPLAYED", "ToolSpec", "tool_name",
    "input_schema", "tool_specs", "instructions", "tool_hint", "McpBridge", "BridgePool", "ToolOutcome", "add_arguments",
    "main", "tool_reason", "TOOLSETS", "toolset_ops",
]
