"""The Host base class: the API every host kind implements.

``run`` is written once here (driven by the one loop in ``_runner.py``), with everything expressed
through it (``python``, ``read_text``, ``spawn``) and the files through the host's Transfer, so a
transport only implements the public hooks: ``start_process``, ``stat``, ``read_file``, ``write_file``,
``listdir``, ``open_channel`` and ``streams``.
"""
from __future__ import annotations

import json
import shlex
from typing import Any

from kit.errors import CommandFailed
from kit.remote._forward import Forward, close_forwards
from kit.remote._job import Job, start_job
from kit.remote._output import tail_lines
from kit.remote._private import private_dir
from kit.remote._result import Closing, FileStat, Result
from kit.remote._runner import Process, Runner, shell_script
from kit.remote._transfer import transfer_of
from kit.util import html_fields

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
    sys.stderr.write("kit.python: the last expression's value is not JSON-serialisable (%s): %s\n"
                     % (type(val).__name__, exc))
    sys.exit(3)
sys.stdout.write("\x1eKITJSON " + s + "\n")
'''


class Host(Closing):
    """Base class of LocalHost and SSHHost: one API to run commands and read files on a machine."""

    target: str = ""
    name: str = ""
    is_local: bool = False  # this machine: files are read directly, no shell stream or SFTP
    streams: bool = False   # Transfer reads files through a command stream (resumable, compressible): SSH
    sftp_timeout: float = 120.0  # longest wait for any one reply while moving a file (s)

    # --- commands: written once, over the transport's start_process -------------------------------
    def run(self, cmd: str, *, timeout: float | None = None, env: dict | None = None, cwd: str | None = None,
            check: bool = False, stream: bool = False, input: str | bytes | None = None,
            stdout_file: str | None = None, stderr_file: str | None = None, on_stdout=None,
            idle_timeout: float | None = None, cancel=None) -> Result:
        """Run ``cmd`` with bash on the host and wait for it.

        ``timeout`` (s): on expiry the command's whole process group is killed on the host and
        CommandTimeout carries the partial output. ``env``: extra variables (values quoted). ``cwd``:
        working directory (``cd`` fails -> exit 1). ``check``: CommandFailed on a non-zero exit.
        ``stream``: show output live as it arrives. ``input``: fed to stdin (otherwise empty).
        ``stdout_file``/``stderr_file``: local paths that receive the stream as it arrives. Memory is
        bounded whenever output goes elsewhere: the Result keeps the last 64 KiB of a stream sent to a file,
        the last 1 MiB with ``stream=True`` (``Result.truncated`` says so), else everything. stdout and
        stderr are drained together (no deadlock) and decoded as UTF-8 with replacement. A connection lost
        mid-command is a ConnectError naming host and command.

        For streams (file transfers): ``on_stdout`` receives stdout as raw chunks, none kept;
        ``idle_timeout`` (s) kills the command when no output came for that long (CommandTimeout);
        ``cancel`` (a ``threading.Event``) set from another thread kills it and raises KeyboardInterrupt."""
        script = shell_script(cmd, env, cwd, self.name)
        return Runner(self.name, cmd, timeout=timeout, check=check, stream=stream, input=input,
                      stdout_file=stdout_file, stderr_file=stderr_file, on_stdout=on_stdout,
                      idle_timeout=idle_timeout, cancel=cancel).run(
            lambda: self.start_process(script, cmd=cmd, stdin=input is not None))

    # --- transport hooks, implemented by subclasses ------------------------------------------------
    def start_process(self, script: str, *, cmd: str, stdin: bool) -> Process:
        """Start ``script`` with bash on the host as the leader of its own process group and session, stdin
        open when ``stdin``; the :class:`Process` the runner drives (``cmd`` names it in errors). A transport
        that cannot know the group itself sets ``Process.marked`` and runs ``_runner.MARK_LINE`` first."""
        raise NotImplementedError

    def read_file(self, path: str, sink, offset: int) -> str:
        """The bytes of ``path`` from ``offset`` into ``sink`` without a shell; returns the method's name."""
        raise NotImplementedError

    def write_file(self, local_path: str, remote_path: str, *, resume: bool = True,
                   progress: bool | None = None) -> None:
        """``local_path`` to ``remote_path`` through a temporary name renamed into place (``resume``: an
        unchanged file is skipped, a partial one continued)."""
        raise NotImplementedError

    def listdir(self, path: str) -> list[str]:
        """The names in the directory ``path`` (RemoteFileError naming host and path)."""
        raise NotImplementedError

    def open_channel(self, dest: tuple[str, int], src: tuple[str, int], timeout: float):
        """A connection to ``dest`` as the host sees it, carried over the host's own connection (an SSH
        ``direct-tcpip`` channel) for :class:`~kit.remote.Forward`; ConnectError naming host and address."""
        raise NotImplementedError(f"{type(self).__name__} reaches addresses directly: no channel to open")

    def stat(self, path: str) -> FileStat:
        raise NotImplementedError

    # --- files, through the host's Transfer (kit/remote/_transfer.py) ---------------------------
    @property
    def transfer(self):
        """This host's :class:`~kit.remote.Transfer` (streams, compression, resume, many files)."""
        return transfer_of(self)

    def read_bytes(self, path: str) -> bytes:
        """The whole file. RemoteFileError if it is missing, a directory or unreadable."""
        return self.transfer.read_bytes(path)

    def get(self, remote_path: str, local_path: str, *, progress: bool | None = None, **options) -> str:
        """Download to ``local_path`` (atomic, resumable, compressed on the wire for text artefacts);
        ``options``: ``resume``, ``compress`` of :meth:`kit.remote.Transfer.get`."""
        return self.transfer.get(remote_path, local_path, progress=progress, **options)

    def put(self, local_path: str, remote_path: str, *, progress: bool | None = None, **options) -> str:
        """Upload to ``remote_path`` through a temporary name renamed into place (``resume`` option)."""
        return self.transfer.put(local_path, remote_path, progress=progress, **options)

    def get_many(self, remote_paths, dest: str, **options):
        """Several files (a list, or a glob pattern) into the directory ``dest``, overlapped; returns a
        :class:`~kit.remote.TransferReport` with one row per file (a failure never hides the others)."""
        return self.transfer.get_many(remote_paths, dest, **options)

    def close(self) -> None:
        """Release connections and end this host's forwards; the host can be used again afterwards
        (it reconnects for commands; a closed forward stays closed)."""
        close_forwards(self)

    def forward(self, remote_port: int, remote_host: str = "127.0.0.1", local_port: int = 0, *,
                check: bool = True, unix_socket: str | None = None) -> Forward:
        """Reach ``remote_host:remote_port`` as seen from the host (default its loopback) from this
        machine: a :class:`~kit.remote.Forward` (a context manager) whose ``url`` to use here, carried over
        an SSH host's connection, the direct address on this machine. ``check``: ConnectError at once if
        nothing accepts connections there. ``unix_socket`` (SSH hosts): listen on that path, mode 0600,
        instead of 127.0.0.1, which every user here can reach."""
        return Forward(self, remote_port, remote_host, local_port, check=check, direct=self.is_local,
                       unix_socket=unix_socket)

    def private_dir(self, sub: str = "") -> str:
        """This user's private directory on the host (mode 0700, ``${TMPDIR:-/tmp}/kit-<uid>``, never
        a planted symlink or another user's directory), with ``sub`` made inside it; see ``_private.py``."""
        return private_dir(self, sub)

    # --- built on run ------------------------------------------------------------------------
    def read_text(self, path: str, errors: str = "replace") -> str:
        """The file decoded as UTF-8 (invalid bytes replaced by default)."""
        return self.read_bytes(path).decode("utf-8", errors)

    def python(self, code: str, *, python: str = "python3", timeout: float = 60, env: dict | None = None) -> Any:
        """The JSON value of the last expression of ``code`` run by the host's Python (``host.python("import
        torch; torch.cuda.get_device_capability()")`` -> ``[9, 0]``); CommandFailed with its traceback's last line."""
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

    def spawn(self, cmd: str, *, log: str, env: dict | None = None, cwd: str | None = None) -> Job:
        """Start ``cmd`` detached (own session, survives disconnect), output appended to ``log``: a
        :class:`~kit.remote.Job` to tail, wait for readiness, and stop."""
        return start_job(self, cmd, log=log, env=env, cwd=cwd)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.target!r})"

    def _repr_html_(self) -> str:
        return html_fields(type(self).__name__, [("name", self.name), ("target", self.target)])
