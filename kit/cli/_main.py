"""The ``kit`` command: one sub-command per concern, each registered by its own module."""
from __future__ import annotations

import argparse
import importlib
import sys

from kit.errors import KitError

# Each module defines ``register(subparsers)`` adding its sub-commands; a sub-command's
# handler is stored as ``func`` and returns the process exit code.
_COMMAND_MODULES = (
    "kit.cli._remote",   # kit run, kit env
    "kit.cli._source",   # kit source slice|grep|find
    "kit.cli._profile",  # kit profile summary
    "kit.cli._logs",     # kit logs parse|spec
    "kit.cli._bench",    # kit bench parse
    "kit.cli._report",   # kit report
    "kit.cli._audit",    # kit audit (and kit profile check, registered by _profile)
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kit", description="decode-kit: LLM-serving decode investigations")
    parser.add_argument("--version", action="version", version=f"decode-kit {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue
            raise
        module.register(sub)
    return parser


def _version() -> str:
    from kit import __version__

    return __version__


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except KitError as exc:
        print(f"kit: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
