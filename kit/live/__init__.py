"""Live investigation: run the serving engine, profile it while it serves, sweep configurations.

``kit.server(host, cmd, env=..., port=..., engine=...)`` starts an engine through
:class:`kit.remote.Job`, follows its log into the session with the load phase in a progress bar,
waits for ``/health`` or ``/v1/models``, fails early with the log's tail, and always stops it
(graceful, then forced). ``Server.profile(steps=|seconds=)`` drives the engine's own profiler
endpoints and returns a :class:`kit.profile.Profile`; ``Server.bench()`` runs
``kit.bench.single_stream``. ``kit.experiment(base_cmd, matrix=..., flags=...)`` does that for
each configuration (one factor at a time or the full grid), resumably, and returns an
:class:`Experiment` with a table (tok/s with CI, TTFT, ITL, speed-up, significance), an A/B plot
and ``decide()`` for the ledger.

Files:

- ``_server.py``: Server and server(): start, follow, health wait, stop, profile endpoints, bench
- ``_experiment.py``: plan (the variants), experiment() and Experiment: run, resume, statistics, plot
- ``_reach.py``: where this machine reaches the engine: its URL, or a forward over the host's SSH connection
"""
from __future__ import annotations

from kit.live._experiment import Experiment, experiment, plan
from kit.live._server import PHASES, Server, server
from kit.util import publish

__all__ = ["PHASES", "Experiment", "Server", "experiment", "plan", "server"]

publish(globals(), __all__)
