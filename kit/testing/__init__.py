"""Test helpers the kit's own tests use and users may reuse (like ``fabric.testing``): ``from kit.testing
import sshd`` in a ``conftest.py`` provides a session-scoped ``sshd`` fixture, a real OpenSSH server."""
from __future__ import annotations

from importlib import resources

from kit.testing._replay import replay_trace
from kit.testing._sshd import TEST_USER, SSHServer, find_sshd, sshd
from kit.util import publish

STREAM_PROBE = resources.files("kit.testing").joinpath("_host", "stream_probe.py").read_text(encoding="utf-8")
"""Run as ``python -c STREAM_PROBE '<connect options as JSON>' TARGET SIZE`` (``_host/stream_probe.py``)."""

__all__ = ["SSHServer", "STREAM_PROBE", "TEST_USER", "find_sshd", "replay_trace", "sshd"]

publish(globals(), __all__)
