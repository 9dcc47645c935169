"""Connect / hosts: open a LocalHost or SSHHost, or a parallel group (documented in the package docstring)."""
from __future__ import annotations

from typing import Iterable

from kit.errors import UsageError
from kit.remote._base import Host
from kit.remote._group import HostGroup
from kit.remote._local import LocalHost


def ssh_host_class() -> type:
    """SSHHost, imported on first use."""
    from kit.remote._ssh import SSHHost  # deferred: paramiko, loaded by the first SSH host

    return SSHHost


def connect(target: str = "local", **options) -> Host:
    """Open a host: ``"local"``, ``user@host[:port]`` or an ``~/.ssh/config`` alias.

    SSH options: ``user``, ``port``, ``key_filename``, ``known_hosts`` (path or list replacing the
    user's and system's files, which are by default ``UserKnownHostsFile``/``GlobalKnownHostsFile`` of
    ``~/.ssh/config``, else OpenSSH's; read as OpenSSH does: ``@revoked`` keys refused,
    ``@cert-authority`` lines skipped with a warning), ``trust`` (``"strict"`` default: unknown keys
    refused; ``"accept-new"``: recorded in the kit's own known_hosts; a changed key is always refused),
    ``kit_known_hosts`` (that file), ``ssh_config`` (path), ``connect_timeout`` (s), ``look_for_keys``,
    ``allow_agent``, ``passphrase``. The connection opens now: a refused key or a dead host fails here."""
    if target == "local":
        if options:
            raise UsageError(f"kit.connect('local') takes no options (got {sorted(options)})")
        return LocalHost()
    return ssh_host_class()(target, **options).open()


def hosts(targets: Iterable[str | Host], **options) -> HostGroup:
    """A group of hosts for parallel commands. Connections open lazily, each in its own thread,
    so one unreachable host costs only its own slot (its error) in ``group.run(cmd)``."""
    return HostGroup([t if isinstance(t, Host) else LocalHost() if t == "local" else ssh_host_class()(t, **options)
                      for t in targets])
