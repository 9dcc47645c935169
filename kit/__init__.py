"""decode-kit: investigate LLM-serving decode performance from a notebook.

Public surface (everything else is private):

- ``kit.connect(target)`` / ``kit.hosts([...])``: run commands on the local machine or SSH hosts.
- ``kit.source``: slice, grep and navigate the serving framework's installed source on a host.
- ``kit.profile``: Kineto / nsys decode profiles -> kernel tables, categories, AllReduce share.
- ``kit.logs``: serving logs and benchmark output -> tables; speculative acceptance, normalised.
- ``kit.models``: AllReduce cost and speculative-decoding break-even models; the decode speed of light.
- ``kit.env``: host fingerprint (GPUs, link matrix, versions, NCCL variables).
- ``kit.ledger``: the hypothesis ledger.  ``kit.plots``: the plots.  ``kit.report``: HTML report.
- ``kit.explorer``: ipywidgets profile explorer and its static views.
- ``kit.session``: a session's layout.  ``kit.provenance``: where each artefact came from.
- ``kit.audit``: effective settings, silent slow paths, ignored experiment variants, run validity.
- ``kit.errors``: the exception tree.
- ``kit.runs``: the run catalogue: every summary, comparison, benchmark, experiment, log parse and audit,
  queryable with SQL (DuckDB over Parquet); named baselines. A program records once it has loaded it
  (``import kit.runs``; the ``kit`` command and the MCP server do): ``import kit`` installs nothing.
- ``kit.server(host, cmd)`` / ``kit.experiment(base_cmd, matrix=...)`` (``kit.live``): run, profile and
  sweep a live serving engine.  ``kit.bench``: single-stream benchmark of a live server.
- ``kit.investigate(a, b)`` (``kit.investigation``): why is run B slower than run A: ranked, evidenced causes
  and the experiment that would confirm each.

Submodules load on first use so ``import kit`` stays fast.
"""
from __future__ import annotations

import importlib
from typing import Any

from kit.util import kit_version

__version__ = kit_version()

_SUBMODULES = ("remote", "source", "profile", "logs", "models", "env", "ledger", "plots", "report", "errors",
               "explorer", "session", "provenance", "live", "bench", "audit", "runs", "investigation")
# a name -> the module that defines it; ``load_ipython_extension`` (``%load_ext kit``) loads IPython with kit.magics
_FROM = {**dict.fromkeys(("connect", "hosts", "Host", "Result", "Job"), "remote"),
         **dict.fromkeys(("server", "experiment"), "live"), "investigate": "investigation",
         "load_ipython_extension": "magics"}

__all__ = sorted((*_SUBMODULES, *_FROM, "__version__"))


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"kit.{name}")
    if name in _FROM:
        return getattr(importlib.import_module(f"kit.{_FROM[name]}"), name)
    raise AttributeError(f"module 'kit' has no attribute {name!r}")
