"""The ``kit`` command line: one sub-command group per file, each exposing ``register(subparsers)``.

Files:

- ``_main.py``: the parser, ``main()`` (wires the groups, turns kit errors into one line and exit 1) and
  ``run()``, the program: ``main()`` and an exit without the interpreter's teardown
- ``_remote.py``: ``kit run`` and ``kit env``, and the ``--host`` options every group shares
- ``_source.py``: ``kit source slice|grep|find``
- ``_profile.py``: ``kit profile summary|compare|ranks`` (and capture, registered from ``_capture.py``)
- ``_logs.py``: ``kit logs parse|spec``
- ``_bench.py``: ``kit bench parse|reconcile|compare`` (and run, registered from ``_bench_run.py``)
- ``_serve.py``: ``kit serve ENGINE``, and the engines started by name (shared with ``kit bench run --serve``)
- ``_capture.py``: ``kit profile capture URL --steps N``: an engine's own profile through its endpoints
- ``_runs.py``: ``kit runs list|show|query|table|baseline|baselines|export|compact``
- ``_report.py``: ``kit report``
- ``_audit.py``: ``kit audit`` and ``kit profile check``
- ``_mcp.py``: ``kit mcp``: the analyses as MCP tools (``kit.mcp``)
"""
from __future__ import annotations

from kit.cli._main import build_parser, command_line, main, run

__all__ = ["main", "build_parser", "run", "command_line"]
