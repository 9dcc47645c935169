"""The ``kit`` command line: one sub-command group per file, each exposing ``register(parser)`` (the options of
the parser ``kit`` made for its command); a file is imported only when its command runs.

Files:

- ``_main.py``: the command table (``COMMANDS``: each command's ``register`` and one-line help, all that
  ``kit --help`` reads), the parser, ``main()`` (turns kit errors into one line and exit 1) and ``run()``, the
  program: ``main()`` and an exit without the interpreter's teardown
- ``_remote.py``: ``kit run`` and ``kit env``, and the ``--host`` options every group shares
- ``_source.py``: ``kit source slice|grep|find``
- ``_profile.py``: ``kit profile summary|compare|ranks|diff|check|capture``
- ``_logs.py``: ``kit logs parse|spec``
- ``_bench.py``: ``kit bench run|parse|reconcile|compare``; ``_bench_run.py``: the work of ``run`` and ``reconcile``
  (``kit.bench``, loaded only when one of them runs)
- ``_serve.py``: ``kit serve ENGINE``, and the engines started by name (shared with ``kit bench run --serve``)
- ``_capture.py``: the work of ``kit profile capture URL --steps N``: an engine's own profile through its endpoints
- ``_runs.py``: ``kit runs list|show|query|table|baseline|baselines|export|compact``
- ``_report.py``: ``kit report``
- ``_audit.py``: ``kit audit``
- ``_mcp.py``: ``kit mcp``: the analyses as MCP tools (``kit.mcp``)
"""
from __future__ import annotations

from kit.cli._main import build_parser, main, run
from kit.util import command_line

__all__ = ["main", "build_parser", "run", "command_line"]
