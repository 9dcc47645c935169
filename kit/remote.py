"""Run commands and read files on the hosts under investigation: this machine or SSH servers.

One API for both::

    host = kit.connect("local")                        # LocalHost (subprocess)
    host = kit.connect("kit@gpu-box:2222")             # SSHHost (paramiko, strict host keys)
    host = kit.connect("gpu-alias")                    # alias from ~/.ssh/config (ProxyJump honoured)
    r = host.run("nvidia-smi -L", timeout=30)          # Result(cmd, host, stdout, stderr, exit_code, duration_s)
    job = host.spawn("python -m sglang.launch_server ...", log="/tmp/sglang.log")
    job.wait_for(pattern="fired up", timeout=900)
    kit.hosts(["a", "b"]).run("nvidia-smi topo -m")    # in parallel, one slot per host

Every command runs in its own process group so a timeout kills it entirely on the host.
Errors are the RemoteError family of :mod:`kit.errors`; messages name the host and command or path.
Callers must ``shlex.quote`` every path or pattern they put into a command string.
"""
from __future__ import annotations

from typing import Iterable

from kit._local import LocalHost
from kit._remote_base import FileStat, Host, Result
from kit._remote_group import GroupResult, HostGroup
from kit._remote_job import Job

__all__ = ["connect", "hosts", "Host", "LocalHost", "SSHHost", "Result", "FileStat", "Job", "HostGroup",
           "GroupResult"]


def __getattr__(name: str):
    if name == "SSHHost":
        from kit._ssh import SSHHost

        return SSHHost
    raise AttributeError(f"module 'kit.remote' has no attribute {name!r}")


def connect(target: str = "local", **options) -> Host:
    """Open a host: ``"local"``, ``user@host[:port]`` or an ``~/.ssh/config`` alias.

    SSH options: ``user``, ``port``, ``key_filename``, ``known_hosts`` (path or list replacing
    ``~/.ssh/known_hosts``), ``trust`` (``"strict"`` default: unknown keys refused; ``"accept-new"``:
    an unknown key is recorded in the kit's own known_hosts file; a changed key is always refused),
    ``kit_known_hosts`` (that file's path), ``ssh_config`` (path), ``connect_timeout`` (s),
    ``look_for_keys``, ``allow_agent``, ``passphrase``. The SSH connection is opened now, so a
    refused key or an unreachable host fails here.
    """
    if target == "local":
        if options:
            raise TypeError(f"kit.connect('local') takes no options (got {sorted(options)})")
        return LocalHost()
    from kit._ssh import SSHHost

    host = SSHHost(target, **options)
    host.open()
    return host


def _flag_options(target: str, *, identity: str | None = None, known_hosts: str | None = None,
                  trust: str | None = None, no_ssh_config: bool = False) -> dict:
    """Turn the command-line flags shared by ``kit run``/``kit env`` and ``%%remote`` into
    :func:`connect` options (nothing for ``"local"``)."""
    opts: dict = {}
    if target == "local":
        return opts
    if identity:
        opts.update(key_filename=identity, look_for_keys=False, allow_agent=False)
    if known_hosts:
        opts["known_hosts"] = known_hosts
    if trust:
        opts["trust"] = trust
    if no_ssh_config:
        opts["ssh_config"] = False
    return opts


def hosts(targets: Iterable[str | Host], **options) -> HostGroup:
    """A group of hosts for parallel commands. Connections open lazily, each in its own thread,
    so one unreachable host costs only its own slot (its error) in ``group.run(cmd)``."""
    members: list[Host] = []
    for t in targets:
        if isinstance(t, Host):
            members.append(t)
        elif t == "local":
            members.append(LocalHost())
        else:
            from kit._ssh import SSHHost

            members.append(SSHHost(t, **options))
    return HostGroup(members)
