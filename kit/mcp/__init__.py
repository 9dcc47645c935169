"""The kit's analyses as MCP tools, for agents: read-only by default, every result with its provenance,
trust verdict and warnings as fields.

``kit mcp`` serves them over stdio (what MCP clients start) or, with ``--http PORT``, streamable HTTP
bound to 127.0.0.1. Tools that write (``ledger_record``: ``--allow-write``) or run code
(``source_evaluate``, ``report_build``: ``--allow-run HOST``, for the hosts named only) are not listed
unless the server was started to allow them. No tool takes a command line; host names, paths (inside
the server's ``--root`` directories) and patterns are checked before the kit's function is called;
every string of a result is redacted by kit.report's rules; each call has a timeout and an output cap.

    build_server(Policy(run_hosts=("local",)))   # an mcp.server.Server, for in-process use
    TOOLS                                        # the table: name, function, mode, schema

Files:

- ``_policy.py``: Policy (hosts, roots, write/run permission, timeout, cap) and the argument checks
- ``_tools.py``: the tool table and which rows a Policy lists
- ``_calls.py``: the read tools' functions (host fingerprint, source, traces, logs, audit, bench, ledger, catalogue)
- ``_calls_pairs.py``: read tools over two things: two runs by structure, client records against the engine's
- ``_calls_run.py``: the write and run tools' functions (ledger_record, source_evaluate, report_build)
- ``_result.py``: the result envelope: provenance, trust, warnings, paging, redaction, output cap
- ``_resources.py``: the session's resources and the prompt that walks its hypothesis chain
- ``_server.py``: the SDK server: listing, checked calls under a timeout, stdio and HTTP serving
"""
from __future__ import annotations

from kit.mcp._policy import Policy
from kit.mcp._server import build_server, serve_http, serve_stdio
from kit.mcp._tools import TOOLS, Tool, available
from kit.util import publish

__all__ = ["Policy", "TOOLS", "Tool", "available", "build_server", "serve_http", "serve_stdio"]

publish(globals(), __all__)
