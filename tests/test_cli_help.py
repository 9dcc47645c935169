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
