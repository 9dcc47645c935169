"""Run commands and read files on the hosts under investigation: this machine or SSH servers.

One API for both::

    host = kit.connect("kit@gpu-box:2222")             # SSHHost (paramiko, strict host keys); "local": LocalHost
    r = host.run("nvidia-smi -L", timeout=30)          # Result(cmd, host, stdout, stderr, exit_code, duration_s)
    job = host.spawn("python -m sglang.launch_server ...", log="/tmp/sglang.log")
    job.wait_for(pattern="fired up", timeout=900)
    kit.hosts(["a", "b"]).run("nvidia-smi topo -m")    # in parallel, one slot per host
    host.get_many("/traces/rank*.json", "local/dir")   # overlapped, compressed, resumable; a TransferReport
    with host.forward(30000) as fwd:                   # the host's 127.0.0.1:30000, reached from here
        kit.bench.single_stream(fwd.url)
    host.private_dir("live")                           # ${TMPDIR:-/tmp}/kit-<uid>/live, mode 0700

Every command runs in its own process group, killed entirely on the host on a timeout. Errors are the
RemoteError family of :mod:`kit.errors`, naming the host and command or path. Callers must
``shlex.quote`` every path or pattern they put into a command string.

Files:

- ``_connect.py``: connect / hosts: open a LocalHost or SSHHost (an ``~/.ssh/config`` alias too), or a group
- ``_options.py``: the host options table shared by the CLI and the ``%%remote`` magic
- ``_base.py``: Host: the API every host implements, and the helpers built on run (python, spawn)
- ``_result.py``: Result, FileStat: the records host calls return
- ``_runner.py``: Runner: the one command loop (timeout, process-group kill, output, stdin, exit status)
- ``_local.py``: LocalHost: start, read and signal a subprocess on this machine
- ``_ssh.py``: SSHHost: start, read and signal a command over a paramiko channel; files over SFTP
- ``_ssh_config.py``: ~/.ssh/config, known_hosts and the host-key trust policy
- ``_job.py``: Job: a long-running command with its log on the host (spawn, wait_for, stop)
- ``_group.py``: HostGroup: one command on many hosts in parallel, one result slot per host
- ``_output.py``: output sinks: bounded tails and files for a command's stdout/stderr
- ``_forward.py``: Forward: a local port carried to a host's port over its SSH connection (``ssh -L``)
- ``_private.py``: the user's private directory on a host (0700, never a planted symlink)
- ``_transfer.py``: Transfer: get/put/read_bytes/get_many: the policy (resume, skip, codec, many files, Ctrl-C)
- ``_transfer_io.py``: transfer mechanics: the decompressing sink, a stream on the runner, partial names
- ``_transfer_report.py``: Fetched, TransferReport: what a transfer returns"""
from __future__ import annotations

from kit.remote._base import Host
from kit.remote._connect import connect, hosts
from kit.remote._connect import ssh_host_class as _ssh_host_class
from kit.remote._forward import Forward
from kit.remote._group import GroupResult, HostGroup
from kit.remote._job import Job
from kit.remote._local import LocalHost
from kit.remote._options import HOST_OPTIONS, add_host_options, connect_options
from kit.remote._result import FileStat, Result
from kit.remote._transfer import Transfer
from kit.remote._transfer_report import Fetched, TransferReport
from kit.util import publish

__all__ = ['HOST_OPTIONS', 'add_host_options', 'connect_options', 'Fetched', 'FileStat', 'Forward', 'GroupResult',
           'Host', 'HostGroup', 'Job', 'LocalHost', 'Result', 'SSHHost', 'Transfer', 'TransferReport', 'connect',
           'hosts']


def __getattr__(name: str):
    if name == "SSHHost":  # paramiko is imported on first use
        cls = _ssh_host_class()
        cls.__module__ = __name__
        return cls
    raise AttributeError(f"module 'kit.remote' has no attribute {name!r}")


publish(globals(), __all__)
