"""Progress bars (kit.util.progress): shown in a terminal once work outlasts the delay, silent when
stderr is not a terminal or when KIT_PROGRESS=off. Checked through a real pseudo-terminal."""
from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios

from tests.conftest import ROOT

WORK = ("import time\nfrom kit.util import progress\n"
        "with progress('parsing', 10, unit='file', delay=0.2) as bar:\n"
        "    for _ in range(10):\n        time.sleep(0.08)\n        bar.update(1)\n"
        "print('done')\n")


def _run(env_extra: dict, tty: bool) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **env_extra}
    if not tty:
        p = subprocess.run([sys.executable, "-c", WORK], env=env, capture_output=True, text=True, timeout=60)
        return p.stderr
    main, sub = pty.openpty()
    fcntl.ioctl(sub, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))   # a terminal 100 columns wide
    p = subprocess.Popen([sys.executable, "-c", WORK], env=env, stdin=sub, stdout=sub, stderr=sub, close_fds=True)
    os.close(sub)
    out = b""
    while True:
        try:
            chunk = os.read(main, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    p.wait(timeout=60)
    os.close(main)
    return out.decode(errors="replace")


def test_a_bar_in_a_terminal_none_in_a_pipe_none_when_asked():
    shown = _run({}, tty=True)
    assert "parsing" in shown and "file" in shown and "done" in shown
    assert _run({}, tty=False).strip() == ""
    off = _run({"KIT_PROGRESS": "off"}, tty=True)
    assert "parsing" not in off and "done" in off
