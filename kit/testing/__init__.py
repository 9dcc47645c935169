"""Test helpers the kit's own tests use and users may reuse (like ``fabric.testing``).

With pytest, ``from kit.testing import sshd`` in a ``conftest.py`` provides a session-scoped ``sshd`` fixture:
a real OpenSSH server on 127.0.0.1 (see :class:`SSHServer`).

Files:

- ``_sshd.py``: :class:`SSHServer` (sshd at a free port, throwaway keys and login users, network namespace
  and forwarding options), :func:`find_sshd`, the ``sshd`` fixture
- ``_replay.py``: :func:`replay_trace`: a real trace's steps replayed (many steps, ranks with jitter, planted
  slow kernels)
- ``_host/stream_probe.py``: :data:`STREAM_PROBE`'s program (a child process that streams from a host and
  reports its memory and key exchanges), a real file
"""
from __future__ import annotations

from importlib import resources

from kit.testing._replay import replay_trace
from kit.testing._sshd import TEST_USER, SSHServer, find_sshd, sshd
from kit.util import publish

STREAM_PROBE = resources.files("kit.testing").joinpath("_host", "stream_probe.py").read_text(encoding="utf-8")
"""Run as ``python -c STREAM_PROBE '<connect options as JSON>' TARGET SIZE`` (``_host/stream_probe.py``)."""

__all__ = ["SSHServer", "STREAM_PROBE", "TEST_USER", "find_sshd", "replay_trace", "sshd"]

publish(globals(), __all__)
