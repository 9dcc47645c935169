"""Live investigation: run the serving engine, profile it while it serves, sweep configurations.

``kit.server(host, cmd, env=..., port=..., engine=...)`` starts an engine through
:class:`kit.remote.Job`, follows its log into the session byte for byte with the load phase in a
progress bar, and calls it ready only when the engine's own process holds the listening socket and
``/health`` or ``/v1/models`` answers (a port another process holds is a ServerError naming it,
before anything starts; ``port="free"`` picks a free one). It fails early with the log's tail, and
always stops the engine (graceful, then forced; descendants that called ``setsid`` too): on leaving
the ``with`` block, on any exception or Ctrl-C, at exit even when nobody kept the Server in a
variable, and on SIGTERM/SIGHUP of the driving Python. Each engine's pid, process group, session and
tag are written beside its log (``*.engine.json``). ``Server.profile(steps=|seconds=)`` drives the
engine's own profiler endpoints and returns a :class:`kit.profile.Profile`; ``Server.bench()`` runs
``kit.bench.single_stream``, ``Server.load()`` ``kit.bench.sweep``. ``kit.experiment(base_cmd,
matrix=..., flags=...)`` does that for each configuration (one factor at a time or the full grid),
one fresh engine per run, runs interleaved across variants, resumably (engines a killed driver left
are stopped first), and returns an :class:`Experiment` with a table (tok/s with CI, TTFT, ITL,
speed-up with its interval, significance), an A/B plot and ``decide()`` for the ledger.

Files:

- ``_server.py``: Server and server(): start, follow, readiness, stop, bench, load
- ``_profiling.py``: ``Server.profile``: the engines' profiler endpoints, load while recording, traces pulled
- ``_engine.py``: the engine's identity on the host: tags, port holders, leftovers, the SIGTERM guard
- ``_experiment.py``: plan (the variants), run order, experiment() and Experiment: run, resume, statistics, plot
- ``_reach.py``: where this machine reaches the engine: its URL, or a forward over the host's SSH connection
- ``_reference.py``: ``reference_command(engine, cmd)``: the graph-off command of a serving run, recorded
  beside a graph profile as the reference that places its kernels (``kit.profile.load(..., reference=)``),
  with the mode used and a warning when it is another program (vLLM ``--enforce-eager``)
"""
from __future__ import annotations

from kit.live._experiment import Experiment, experiment, plan
from kit.live._reference import ReferenceCommand, reference_command
from kit.live._server import PHASES, Server, server
from kit.util import publish

__all__ = ["PHASES", "Experiment", "ReferenceCommand", "Server", "experiment", "plan", "reference_command", "server"]

publish(globals(), __all__)
