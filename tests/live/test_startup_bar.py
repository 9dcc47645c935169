"""The engine start-up bar of ``kit.server`` follows the kit's rule for bars (issue 46 item 9: it ignored
``KIT_PROGRESS=off`` and pipes, and its frames landed in the report's cell outputs)."""
from __future__ import annotations

import io
import sys
import types

from kit.live._server import _bar


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_start_up_bar_is_shown_in_a_terminal_only_and_never_when_asked_off(monkeypatch):
    s = types.SimpleNamespace(name="engine")
    monkeypatch.delenv("KIT_PROGRESS", raising=False)
    monkeypatch.delitem(sys.modules, "ipykernel", raising=False)   # loaded by an earlier test: "a notebook"
    monkeypatch.setattr("sys.stderr", io.StringIO())          # a pipe
    assert _bar(s, 3) is None
    monkeypatch.setattr("sys.stderr", _Tty())                 # a terminal
    bar = _bar(s, 3)
    assert bar is not None
    bar.close()
    monkeypatch.setenv("KIT_PROGRESS", "off")
    assert _bar(s, 3) is None
