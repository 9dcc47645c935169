"""Every ``kit`` command and sub-command says what it does in its own ``--help`` (``kit env --help``
printed only its options before)."""
from __future__ import annotations

import argparse

from kit.cli._main import build_parser


def _parsers(p: argparse.ArgumentParser, path: str):
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield f"{path} {name}", sub
                yield from _parsers(sub, f"{path} {name}")


def test_every_command_has_a_description():
    missing = [path for path, p in _parsers(build_parser(), "kit") if not p.description]
    assert missing == []
    env = dict(_parsers(build_parser(), "kit"))["kit env"]
    assert "fingerprint a host" in env.format_help().lower()


def test_kit_help_comes_from_the_command_table_alone():
    """``kit --help`` is built from ``COMMANDS`` without importing a command's module: it must print what the
    parser of every command, built by its module, prints (the table and the modules cannot drift)."""
    import subprocess
    import sys

    from kit.cli._main import COMMANDS

    full = build_parser()
    assert build_parser(["--help"], options=False).format_help() == full.format_help()
    assert [a.dest for a in full._subparsers._group_actions[0]._choices_actions] == list(COMMANDS)
    code = ("import sys; from kit.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith('kit.cli.') and m != 'kit.cli._main'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout + out.stderr
