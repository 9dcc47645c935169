"""``kit run`` (a command on a host, exit code passed through) and ``kit env`` (the host fingerprint)."""
from __future__ import annotations

import sys

from kit.errors import CommandTimeout
from kit.remote import add_host_options, connect, connect_options
from kit.util import print_result


def register_run(run) -> None:
    run.description = ("Run CMD on the host with bash, output streamed. "
                       "Example: kit run --host gpu-box --timeout 30 -- nvidia-smi -L")
    host_args(run)
    run.add_argument("--timeout", type=float, default=None, help="seconds; the command's process group is killed after")
    run.add_argument("--cwd", default=None, help="working directory on the host")
    run.add_argument("cmd", nargs="+", help="the command (after --); words are joined with spaces, like ssh")
    run.set_defaults(func=_run)


def register_env(env) -> None:
    host_args(env)
    env.add_argument("--json", action="store_true", help="print JSON instead of the table")
    env.add_argument("--pid", type=int, default=None, help="also read the NCCL_* variables of this process")
    env.add_argument("--python", default="python3", help="the host's Python to ask for package versions")
    env.set_defaults(func=_env)


def host_args(p, *, short_identity: bool = True) -> None:
    """``--host`` and the shared host options (:data:`kit.remote.HOST_OPTIONS`)."""
    p.add_argument("--host", default="local", help="local (default), user@host[:port] or an ~/.ssh/config alias")
    add_host_options(p.add_argument, short_identity=short_identity)


def connect_args(args):
    """Open the host named by :func:`host_args` options."""
    return connect(args.host, **connect_options(args.host, args))


def _run(args) -> int:
    cmd = " ".join(args.cmd)
    with connect_args(args) as host:
        try:
            res = host.run(cmd, timeout=args.timeout, cwd=args.cwd, stream=True)
        except CommandTimeout as exc:
            print(f"kit: error: {exc}", file=sys.stderr)
            return 124
    return res.exit_code if 0 <= res.exit_code < 256 else 255


def _env(args) -> int:
    from kit.env import fingerprint  # deferred: it loads pandas, which kit run (this module) does not need

    with connect_args(args) as host:
        fp = fingerprint(host, pid=args.pid, python=args.python)
    print_result(fp, args.json, indent=2, sort_keys=True, default=None)
    return 0
