"""The kit's analyses as MCP tools, for agents: read-only by default, every result with its provenance,
trust verdict and warnings as fields.

``kit mcp`` serves them over stdio (what MCP clients start) or, with ``--http PORT``, streamable HTTP
bound to 127.0.0.1 with a bearer token every request must carry. Tools that write (``ledger_record``:
``--allow-write``) or run code
(``source_evaluate``, ``report_build``: ``--allow-run HOST``, for the hosts named only) are not listed
unless the server was started to allow them. No tool takes a command line; host names and patterns
are checked, and every path-typed field of a tool's schema is resolved by the server (inside the
``--root`` directories, every entry of a directory argument too) before the kit's function is called;
a result is redacted as one text by kit.report's rules and refused if it holds key material; each
call (function, redaction, serialisation) has a timeout and an output cap.

    build_server(Policy(run_hosts=("local",)))   # an mcp.server.Server, for in-process use
    TOOLS                                        # the table: name, function, mode, schema

Files:

- ``_policy.py``: Policy (hosts, roots, write/run permission, timeout, cap), the argument checks and the
  resolution of path-typed schema fields (``Policy.resolve``)
- ``_tools.py``: the tool table (one row per tool: function, mode, schema with its path kinds) and which
  rows a Policy lists
- the tools by capability: ``_source.py`` (the host, its source, a predicate evaluated), ``_traces.py``
  (profiler traces: summary, check, compare, structure), ``_logs.py`` (logs, settings, audit, benchmarks,
  reconciliation), ``_investigate.py`` (two runs: why B is slower), ``_catalogue.py`` (the run catalogue),
  ``_session.py`` (ledger, session, report)
- ``_result.py``: the result envelope: provenance, the trust order, warnings, paging, redaction, output cap
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
