"""The kit's analyses as MCP tools, for agents: read-only by default, every result with its provenance,
trust verdict and warnings as fields.

``kit mcp`` serves them over stdio (what MCP clients start) or, with ``--http PORT``, streamable HTTP
bound to 127.0.0.1 with a bearer token every request must carry. Tools that write (``--allow-write``) or
run code (``--allow-run HOST``) are not listed unless the server was started to allow them. No tool takes
a command line; every path-typed field of a tool's schema is resolved and checked by the server before the
kit's function is called; a result is redacted as one text and refused if it holds key material; each
call has a timeout and an output cap.

    build_server(Policy(run_hosts=("local",)))   # an mcp.server.Server, for in-process use
    TOOLS                                        # the table: name, function, mode, schema
"""
from __future__ import annotations

from kit.mcp._policy import Policy
from kit.mcp._server import build_server, serve_http, serve_stdio
from kit.mcp._tools import TOOLS, Tool, available
from kit.util import publish

__all__ = ["Policy", "TOOLS", "Tool", "available", "build_server", "serve_http", "serve_stdio"]

publish(globals(), __all__)
