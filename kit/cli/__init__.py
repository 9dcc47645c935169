"""The ``kit`` command line: one sub-command group per file, each exposing ``register(parser)`` (the options of
the parser ``kit`` made for its command); a file is imported only when its command runs. ``_main.py`` holds the
command table (``COMMANDS``), the parser, ``main()`` and ``run()``, the program; CONTRIBUTING's map names the rest.
"""
from __future__ import annotations

from kit.cli._main import build_parser, main, run
from kit.util import command_line

__all__ = ["main", "build_parser", "run", "command_line"]
