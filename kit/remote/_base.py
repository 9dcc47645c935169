"""What every host kind shares: the Result and FileStat records and the Host base class.

The base class implements everything that can be expressed through ``run`` (``python``, ``read_text``,
``spawn``) so LocalHost and SSHHost only implement transport: running a command, and file access.
"""
from __future__ import annotations

import html
import json
import re
import shlex
from dataclasses import dataclass
from typing import Any

from kit.errors import CommandFailed, RemoteError, RemoteFileError
from kit.remote._output import tail_lines
from kit.util import clip

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Result:
    """The outcome of one command on one host. ``ok`` is ``exit_code == 0``.

    ``stdout``/``stderr`` are decoded as UTF-8 with invalid bytes replaced. When the output was
    written to a file (``stdout_file=``), ``stdout`` holds only its last 64 KiB. ``exit_code`` follows
    the shell (128+N when killed by signal N locally); -1 when an SSH server reported no exit status.
    """

    cmd: str
    host: str
    stdout: str
    stderr: str
    exit_code: int
    duration_s: float

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def __repr__(self) -> str:
        return (f"Result(host={self.host!r}, cmd={clip(self.cmd)!r}, exit_code={self.exit_code}, "
                f"duration_s={self.duration_s:.3f}, stdout={clip(self.stdout)!r}, stderr={clip(self.stderr)!r})")

    def _repr_html_(self) -> str:
        colour = "#2e7d32" if self.ok else "#c62828"
        parts = [f"<div><b>{html.escape(self.host)}</b> <code>{html.escape(clip(self.cmd, 200))}</code> "
                 f"<span style='color:{colour}'>exit {self.exit_code}</span> in {self.duration_s:.3f} s</div>"]
        for label, text in (("stdout", self.stdout), ("stderr", self.stderr)):
            if text:
                parts.append(f"<details{' open' if label == 'stdout' or not self.ok else ''}><summary>{label} "
                             f"({len(text)} chars)</summary><pre>{html.escape(_tail(text))}</pre></details>")
        return "".join(parts)


@dataclass(frozen=True)
class FileStat:
    """What ``host.stat(path)`` found: size in bytes, mtime (epoch seconds), directory flag, mode bits."""

    path: str
    size: int
    mtime: float
    is_dir: bool
    mode: int

    def __repr__(self) -> str:
        return (f"FileStat(path={self.path!r}, size={self.size}, mtime={self.mtime:.3f}, "
                f"is_dir={self.is_dir}, mode={oct(self.mode)})")




def _tail(text: str, n: int = 4000) -> str:
    return text if len(text) <= n else "...\n" + text[-n:]


def env_exports(env: dict | None, host: str) -> str:
    """``export K='v'`` lines for a shell; names are validated, values quoted."""
    if not env:
        return ""
    lines = []
    for key, value in env.items():
        if not _ENV_NAME.match(str(key)):
            raise RemoteError(f"{host}: invalid environment variable name {key!r}", host=host)
        lines.append(f"export {key}={shlex.quote(str(value))}\n")
    return "".join(lines)


# Runs a snippet read from stdin: statements exec'd, the last expression's value printed as JSON on
# a marker line. The snippet's own prints go to stderr so stdout only carries the value.
_PY_DRIVER = r'''
import ast, json, sys
src = sys.stdin.read()
tree = ast.parse(src, "<kit.python>")
last = None
if tree.body and isinstance(tree.body[-1], ast.Expr):
    last = ast.Expression(tree.body.pop().value)
g = {"__name__": "__main__"}
real_out, sys.stdout = sys.stdout, sys.stderr
exec(compile(tree, "<kit.python>", "exec"), g)
val = eval(compile(last, "<kit.python>", "eval"), g) if last is not None else None
sys.stdout = real_out
try:
    s = json.dumps(val)
except (TypeError, ValueError) as exc:
    sys.stderr.write("kit.python: the last expression's value is not JSON-serialisable (%s): %s\n" % (type(val).__name__, exc))
    sys.exit(3)
sys.stdout.write("\x1eKITJSON " + s + "\n")
'''


class Host:
    """Base class of LocalHost and SSHHost: one API to run commands and read files on a machine."""

    target: str = ""
    name: str = ""

    # --- transport, implemented by subclasses -------------------------------------------------
    def run(self, cmd: str, *, timeout: float | None = None, env: dict | None = None, cwd: str | None = None,
            check: bool = False, stream: bool = False, input: str | bytes | None = None,
            stdout_file: str | None = None, stderr_file: str | None = None) -> Result:
        """Run ``cmd`` with bash on the host and wait for it.

        ``timeout`` (s): on expiry the command's whole process group is killed on the host and
        CommandTimeout is raised with the partial output. ``env``: extra variables (values quoted).
        ``cwd``: working directory (``cd`` fails -> exit 1). ``check``: raise CommandFailed on a
        non-zero exit. ``stream``: show output live (terminal or notebook cell) as it arrives.
        ``input``: bytes/str fed to the command's stdin (otherwise stdin is empty).
        ``stdout_file``/``stderr_file``: local paths that receive the stream as it arrives; the
        Result then keeps only the last 64 KiB in memory. stdout and stderr are always drained
        together, so large output never deadlocks. Output is decoded as UTF-8 with replacement.
        """
        raise NotImplementedError

    def stat(self, path: str) -> FileStat:
        raise NotImplementedError

    def read_bytes(self, path: str) -> bytes:
        raise NotImplementedError

    def get(self, remote_path: str, local_path: str, *, progress: bool | None = None) -> str:
        raise NotImplementedError

    def put(self, local_path: str, remote_path: str, *, progress: bool | None = None) -> str:
        raise NotImplementedError

    def close(self) -> None:
        """Release connections; the host can be used again afterwards (it reconnects)."""

    # --- built on run ------------------------------------------------------------------------
    def read_text(self, path: str, errors: str = "replace") -> str:
        """The file decoded as UTF-8 (invalid bytes replaced by default)."""
        return self.read_bytes(path).decode("utf-8", errors)

    def python(self, code: str, *, python: str = "python3", timeout: float = 60, env: dict | None = None) -> Any:
        """Run ``code`` in the host's Python and return the JSON value of its last expression.

        Used to ask what code would do on that host's hardware and install, e.g.
        ``host.python("import torch; torch.cuda.get_device_capability()")`` -> ``[9, 0]``.
        Raises CommandFailed (with the traceback's last line) if the snippet raised.
        """
        cmd = f"{shlex.quote(python)} -c {shlex.quote(_PY_DRIVER)}"
        res = self.run(cmd, timeout=timeout, env=env, input=code)
        if not res.ok:
            why = tail_lines(res.stderr, 1) or f"exit code {res.exit_code}"
            if res.exit_code == 127:
                why = f"{python} not found"
            raise CommandFailed(f"{self.name}: python snippet failed ({why})", host=self.name, result=res)
        for line in reversed(res.stdout.split("\n")):
            if line.startswith("\x1eKITJSON "):
                return json.loads(line[len("\x1eKITJSON "):])
        raise CommandFailed(f"{self.name}: python snippet printed no value (stdout: {tail_lines(res.stdout, 2)!r})",
                            host=self.name, result=res)

    def spawn(self, cmd: str, *, log: str, env: dict | None = None, cwd: str | None = None):
        """Start ``cmd`` detached (own session, survives disconnect), output appended to ``log``.

        Returns a :class:`~kit.remote.Job` to tail, wait for readiness, and stop it.
        """
        from kit.remote._job import start_job

        return start_job(self, cmd, log=log, env=env, cwd=cwd)

    def _check(self, res: Result, check: bool) -> Result:
        if check and not res.ok:
            raise CommandFailed(f"{self.name}: command {clip(res.cmd)!r} exited {res.exit_code}: "
                                f"{tail_lines(res.stderr) or '(no stderr)'}", host=self.name, result=res)
        return res

    def _file_error(self, path: str, what: str) -> RemoteFileError:
        return RemoteFileError(f"{self.name}: {path}: {what}", host=self.name, path=path)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.target!r})"

    def _repr_html_(self) -> str:
        from kit.util import html_fields

        return html_fields(type(self).__name__, [("name", self.name), ("target", self.target)])
