"""Live investigation: run the serving engine, profile it while it serves, sweep configurations.

``kit.server(host, cmd, ...)`` starts an engine, follows its log into the session byte for byte, calls it
ready only when its own process holds the port and answers, and always stops it (descendants that called
``setsid`` too), even when the driving Python is killed; ``Server.profile()`` drives the engine's own
profiler, ``Server.bench()`` and ``Server.load()`` run ``kit.bench``. ``kit.experiment(base_cmd, matrix=...,
flags=...)`` does that for each configuration, one fresh engine per run, interleaved and resumable, and returns
an :class:`Experiment` (table with intervals and significance, A/B plot, ``decide()`` for the ledger).

Files:

- ``_server.py``: Server and server(): start, follow, readiness, stop, bench, load
- ``_profiling.py``: ``Server.profile`` and ``kit profile capture``: the engines' profiler endpoints, load while
  recording, traces pulled
- ``_engine.py``: the engine's identity on the host: tags, port holders, leftovers, the SIGTERM guard
- ``_experiment.py``: plan (the variants), run order, experiment() and Experiment: run, resume, statistics, plot
- ``_reach.py``: where this machine reaches the engine: its URL, or a forward over the host's SSH connection
- ``_reference.py``: ``reference_command(engine, cmd)``: the graph-off command of a serving run, the reference
  that places a graph profile's kernels (``kit.profile.load(..., reference=)``)
"""
from __future__ import annotations

from kit.live._experiment import Experiment, experiment, plan
from kit.live._reference import ReferenceCommand, reference_command
from kit.live._server import PHASES, Server, server
from kit.util import publish

__all__ = ["PHASES", "Experiment", "ReferenceCommand", "Server", "experiment", "plan", "reference_command", "server"]

publish(globals(), __all__)
