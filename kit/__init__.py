"""decode-kit: investigate LLM-serving decode performance from a notebook.

Public surface (everything else is private): ``kit.connect(target)`` / ``kit.hosts([...])`` (``kit.remote``),
``kit.source``, ``kit.profile``, ``kit.logs``, ``kit.models``, ``kit.env``, ``kit.ledger``, ``kit.plots``,
``kit.report``, ``kit.explorer``, ``kit.session``, ``kit.provenance``, ``kit.audit``, ``kit.errors``,
``kit.runs`` (the run catalogue: a program records once it has loaded it, ``import kit.runs``; the ``kit``
command and the MCP server do: ``import kit`` installs nothing), ``kit.server`` / ``kit.experiment``
(``kit.live``), ``kit.bench``, ``kit.investigate(a, b)`` (``kit.investigation``). CONTRIBUTING.md maps them.

Submodules load on first use so ``import kit`` stays fast."""
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
