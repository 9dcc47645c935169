"""The ``%%remote TARGET`` cell magic (``%load_ext kit``): run the cell body with ``bash -s`` on a host::

    %%remote gpu-box --timeout 60
    nvidia-smi topo -m

TARGET is ``local``, ``user@host[:port]``, an ``~/.ssh/config`` alias, or a variable holding a kit Host.
Output streams into the cell; the :class:`~kit.remote.Result` is stored in ``_remote``; a non-zero exit
raises CommandFailed (``--no-raise-error`` to only report it). Connections are kept per target."""
from __future__ import annotations

import sys

from IPython.core.magic import Magics, cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from kit.errors import CommandFailed, CommandTimeout
from kit.remote import Host, add_host_options, connect, connect_options
from kit.util import clip

__all__ = ["RemoteMagics", "load_ipython_extension"]

_HOSTS: dict[tuple, object] = {}


def _host_for(shell, args):
    obj = shell.user_ns.get(args.target) if shell is not None else None
    if isinstance(obj, Host):
        return obj
    key = (args.target, args.identity, args.known_hosts, args.trust, args.no_ssh_config)
    host = _HOSTS.get(key)
    if host is None:
        host = connect(args.target, **connect_options(args.target, args))
        _HOSTS[key] = host
    return host


def _host_options(func):
    """Apply the shared host options (:data:`kit.remote.HOST_OPTIONS`) as magic arguments."""
    specs: list = []
    add_host_options(lambda *flags, **kw: specs.append((flags, kw)))
    for flags, kw in reversed(specs):
        func = argument(*flags, **kw)(func)
    return func


@magics_class
class RemoteMagics(Magics):
    """Holds the ``%%remote`` cell magic."""

    @magic_arguments()
    @argument("target", help="local, user@host[:port], an ~/.ssh/config alias, or a variable holding a Host")
    @argument("--timeout", type=float, default=None, help="seconds; the remote process group is killed after")
    @argument("--cwd", default=None, help="working directory on the host")
    @_host_options
    @argument("--no-raise-error", action="store_true", help="report a non-zero exit instead of raising")
    @cell_magic
    def remote(self, line: str, cell: str):
        """Run the cell with ``bash -s`` on TARGET, streaming its output."""
        args = parse_argstring(self.remote, line)
        host = _host_for(self.shell, args)
        try:
            res = host.run("bash -s", input=cell, stream=True, timeout=args.timeout, cwd=args.cwd)
        except CommandTimeout as exc:  # name the cell, not the "bash -s" that runs it
            raise CommandTimeout(str(exc).replace(f"command {clip('bash -s')!r}", f"%%remote cell {_first(cell)!r}"),
                                 host=exc.host, cmd=cell, stdout=exc.stdout, stderr=exc.stderr,
                                 timeout=exc.timeout) from None
        if self.shell is not None:
            self.shell.user_ns["_remote"] = res
        if not res.ok:
            msg = f"{host.name}: %%remote cell exited {res.exit_code}"
            if args.no_raise_error:
                print(msg, file=sys.stderr)
            else:
                raise CommandFailed(msg, host=host.name, result=res)


def _first(cell: str) -> str:
    """The cell's first line that is not blank or a comment, clipped: what names it in an error."""
    lines = [ln.strip() for ln in cell.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    return clip(lines[0] + (" ..." if len(lines) > 1 else ""), 60) if lines else "(empty)"


def load_ipython_extension(ipython) -> None:
    """Register ``%%remote`` (called by ``%load_ext kit`` and ``%load_ext kit.magics``)."""
    ipython.register_magics(RemoteMagics)
